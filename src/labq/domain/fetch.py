"""Where a fetched task comes from: restraint's ``<fetch url=… subdir=…/>``, read.

A fetch URL names a git repository (``git://``, ``http(s)://``, ``file://``), a
tarball (a path ending in ``.tar.gz``, ``.tgz``, ``.tar.bz2``, ``.tar.xz`` or
``.tar``) or, with ``file://``, a plain directory. Restraint writes the ref as
the query and the subdirectory as the fragment (``repo.git?master#kernel/nfs``);
Beaker's own examples write the ref as the fragment (``repo#master``, or with a
``subdir`` attribute). :func:`parse_source` keeps both readings apart; which
one a bare ``#word`` on a git URL means is settled when the repository is asked
(see :mod:`labq.dispatch.fetch`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final
from urllib.parse import urlsplit, urlunsplit

SCHEMES: Final = ("git", "http", "https", "file")
TARBALL_SUFFIXES: Final = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")
_REF: Final = re.compile(r"^[A-Za-z0-9._/+-]{1,255}$")


class SourceError(ValueError):
    """A fetch URL or subdirectory that labq cannot use; the message says why."""


@dataclass(frozen=True)
class FetchSource:
    """A fetch URL taken apart.

    ``location`` is the URL without query and fragment (what git or the HTTP
    client is given); ``ref`` the query (restraint's ref); ``fragment`` what
    followed ``#``; ``subdir`` the ``subdir`` attribute.
    """

    location: str
    tarball: bool
    ref: str | None = None
    fragment: str | None = None
    subdir: str | None = None

    def readings(self) -> list[tuple[str | None, str | None]]:
        """The (ref, subdirectory) pairs the URL may mean, the most likely first."""
        if self.tarball:
            return [(None, _join(self.fragment, self.subdir))]
        if self.subdir is not None:  # Beaker: repo#ref with subdir="path"
            return [(self.ref or self.fragment, self.subdir)]
        if self.ref is not None:  # restraint: repo?ref#path
            return [(self.ref, self.fragment)]
        if self.fragment is None:
            return [(None, None)]
        # repo#word: Beaker's examples mean a branch, restraint's a subdirectory
        return [(self.fragment, None), (None, self.fragment)]


def parse_source(url: str, subdir: str | None = None) -> FetchSource:
    """Take a fetch URL apart, or raise :class:`SourceError` naming the problem."""
    if not url or url != url.strip() or "\0" in url:
        raise SourceError(f"fetch url {url!r} is empty or has surrounding blanks")
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise SourceError(
            f"fetch url {url!r}: the scheme must be one of {', '.join(SCHEMES)} "
            f"(not {parts.scheme or 'none'!r})"
        )
    if parts.scheme != "file" and not parts.netloc:
        raise SourceError(f"fetch url {url!r} names no host")
    if not parts.path or parts.path == "/":
        raise SourceError(f"fetch url {url!r} names no repository or file")
    tarball = parts.path.endswith(TARBALL_SUFFIXES)
    ref = parts.query or None
    if ref is not None and (tarball or not _REF.match(ref) or ref.startswith("-")):
        raise SourceError(f"fetch url {url!r}: {ref!r} after '?' is not a git ref")
    fragment = parts.fragment or None
    if fragment is not None and not subdir_ok(fragment):
        raise SourceError(f"fetch url {url!r}: {fragment!r} after '#' is not a relative path")
    if subdir is not None and not subdir_ok(subdir):
        raise SourceError(f"fetch subdir {subdir!r} is not a relative path inside the source")
    if tarball and fragment is not None and subdir is not None:
        raise SourceError(f"fetch url {url!r} gives a subdirectory and a subdir attribute too")
    if ref is not None and fragment is not None and subdir is not None:
        raise SourceError(f"fetch url {url!r}: a ref after '?' and after '#' with a subdir too")
    location = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return FetchSource(location, tarball, ref, fragment, subdir)


def subdir_ok(path: str) -> bool:
    """A relative path that stays inside its source (no ``..``, not absolute)."""
    if not path or path.startswith("/") or "\0" in path or "\\" in path:
        return False
    return all(p not in ("", ".", "..") for p in path.rstrip("/").split("/"))


def task_name(url: str, subdir: str | None = None) -> str:
    """The name of a nameless fetched task: restraint's ``host/path[/subdirectory]``."""
    parts = urlsplit(url)
    try:
        _, sub = parse_source(url, subdir).readings()[0]
    except SourceError:
        sub = subdir
    name = str(PurePosixPath("/", parts.netloc, parts.path.lstrip("/"), *([sub] if sub else [])))
    return name if len(name) <= 255 else name[:254] + "…"


def _join(a: str | None, b: str | None) -> str | None:
    found = [p for p in (a, b) if p]
    return "/".join(found) if found else None
