"""Fetching a task at run time: a git repository, a tarball or a local directory.

Fetched trees are cached under ``<data_dir>/fetched/``: a git source per
repository URL and resolved commit (so every task of a set, and every set
after it, that names the same commit shares one checkout), a tarball per URL
and the SHA-256 of what was downloaded. A ``file://`` directory that is not a
git repository is used where it is. git runs as for pinned workspaces (no
shell, a timeout, no prompts, no ``ext::``; see :mod:`labq.dispatch.workspace`).

Admins may rewrite URLs (``fetch.rewrite``: prefix → replacement, the longest
prefix wins), like git's ``insteadOf``: to serve tasks from a mirror, or from
a local repository in tests.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

from labq.dispatch import tarballs
from labq.dispatch.workspace import RefError, cached_checkout, resolve_head, resolve_ref
from labq.domain.fetch import FetchSource, SourceError, parse_source
from labq.errors import LabqError

DOWNLOAD_TIMEOUT: Final = 300.0
MAX_DOWNLOAD: Final = 2 * 1024**3  # a tarball larger than this is refused
_HEX: Final = frozenset("0123456789abcdef")
_DONE: Final = ".labq-extracted"


class FetchError(LabqError):
    """A task that could not be fetched; the message names the URL and the reason."""


@dataclass(frozen=True)
class FetchOptions:
    """How a supervisor fetches: where the cache is, URL rewrites, whether ``file://``
    URLs written in a job may be read (rewritten ones always may)."""

    cache: Path
    rewrite: Mapping[str, str] = field(default_factory=dict)
    file_urls: bool = True


@dataclass(frozen=True)
class Fetched:
    """A fetched task's directory (in the cache: read it, never change it)."""

    directory: Path
    url: str  # after rewriting
    commit: str | None = None


def rewrite(url: str, rules: Mapping[str, str]) -> str:
    """``url`` with the longest matching prefix of ``rules`` replaced."""
    best = max((p for p in rules if url.startswith(p)), key=len, default=None)
    return url if best is None else rules[best] + url[len(best) :]


def fetch_task(url: str, subdir: str | None, options: FetchOptions) -> Fetched:
    """Download (or find in the cache) the task at ``url``; raise :class:`FetchError`."""
    actual = rewrite(url, options.rewrite)
    shown = url if actual == url else f"{url} (as {actual})"
    try:
        source = parse_source(actual, subdir)
        if actual == url and source.location.startswith("file:") and not options.file_urls:
            raise FetchError("file:// URLs are not allowed in this lab")
        if source.tarball:
            return _tarball(source, options.cache, actual)
        path = _local_path(source)
        if path is not None and not _is_git(path):
            return _directory(path, source, actual)
        return _git(source, options.cache, actual)
    except (FetchError, RefError, SourceError, OSError) as exc:
        raise FetchError(f"cannot fetch {shown}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}{f': {exc.filename}' if exc.filename else ''}"
    return str(exc)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _local_path(source: FetchSource) -> Path | None:
    parts = urlsplit(source.location)
    if parts.scheme != "file":
        return None
    if parts.netloc not in ("", "localhost"):
        raise FetchError(f"file:// URL names another host ({parts.netloc})")
    return Path(unquote(parts.path))


def _is_git(path: Path) -> bool:
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def _inside(tree: Path, sub: str | None) -> Path:
    """``tree/sub``, which must be a directory that stays inside ``tree``."""
    found = tree / sub if sub else tree
    if not found.resolve().is_relative_to(tree.resolve()):
        raise FetchError(f"{sub} leads outside the fetched tree")
    if not found.is_dir():
        raise FetchError(f"there is no directory {sub} in it")
    return found


def _directory(path: Path, source: FetchSource, url: str) -> Fetched:
    if not path.is_dir():
        raise FetchError(f"{path} is not a directory, a git repository or a tarball")
    (_, sub), *_ = source.readings()
    return Fetched(_inside(path, sub), url)


def _git(source: FetchSource, cache: Path, url: str) -> Fetched:
    """Try each reading of the URL (``repo#word``: a branch, else a subdirectory)."""
    readings = source.readings()
    for n, (ref, sub) in enumerate(readings):
        last = n == len(readings) - 1
        try:
            commit = _resolve(source.location, ref)
            tree = cached_checkout(source.location, commit, cache / "git" / _key(source.location))
            return Fetched(_inside(tree, sub), url, tree.name)
        except (RefError, FetchError):
            if last:
                raise
    raise AssertionError("a source has at least one reading")  # pragma: no cover


def _resolve(repo: str, ref: str | None) -> str:
    if ref is None:
        return resolve_head(repo)
    if 7 <= len(ref) <= 64 and set(ref) <= _HEX:
        return ref  # a commit id, maybe abbreviated: the checkout expands it
    return resolve_ref(repo, ref)


def _tarball(source: FetchSource, cache: Path, url: str) -> Fetched:
    """Download, then extract once per (URL, content); the single top directory that
    snapshots have (``project-v1/``) is stepped into, as restraint does."""
    (_, sub), *_ = source.readings()
    base = cache / "tar" / _key(source.location)
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix=".download-") as tmp:
        archive = Path(tmp) / "archive"
        digest = _download(source.location, archive)
        final = base / digest
        if not (final / _DONE).exists():
            tree = Path(tmp) / "tree"
            tree.mkdir()
            try:
                tarballs.extract(archive, tree)  # no links or paths out of the tree
            except (tarfile.TarError, EOFError) as exc:
                raise FetchError(f"not a readable tarball: {exc}") from None
            (tree / _DONE).touch()
            try:
                tree.rename(final)
            except OSError:
                if not (final / _DONE).exists():  # not a twin that won the race
                    raise
    entries = [p for p in final.iterdir() if p.name != _DONE]
    top = entries[0] if len(entries) == 1 and entries[0].is_dir() else final
    return Fetched(_inside(top, sub), url, None)


def _download(location: str, dest: Path) -> str:
    """Save ``location`` (http, https or file) as ``dest``; its SHA-256."""
    digest = hashlib.sha256()
    size = 0
    try:
        # http, https or file only: parse_source refused every other scheme
        opened = urllib.request.urlopen(location, timeout=DOWNLOAD_TIMEOUT)  # noqa: S310
        with opened as answer, open(dest, "wb") as out:
            while chunk := answer.read(1 << 20):
                size += len(chunk)
                if size > MAX_DOWNLOAD:
                    raise FetchError(f"larger than {MAX_DOWNLOAD} bytes")
                digest.update(chunk)
                out.write(chunk)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(str(exc.reason)) from None
    except TimeoutError:
        raise FetchError(f"no answer within {DOWNLOAD_TIMEOUT:g} s") from None
    return digest.hexdigest()


def copy_task(directory: Path, dest: Path) -> None:
    """A private copy of a fetched task (without ``.git``) at ``dest``, replacing any."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(directory, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", _DONE))
