"""A VM's boot files where QEMU can read them: a distro tree's kernel, initrd or image.

A tree imported over HTTP (``labq distro import https://…``) names its files by URL,
and QEMU reads paths. :func:`local_copy` gives a path for a path or a ``file://``
URL as it is, and downloads an ``http(s)://`` URL once into a cache: a file per URL,
asked for again with ``If-Modified-Since`` before each VM, so a tree republished in
place is fetched anew and an unchanged one is not (a kernel and initrd are tens of
megabytes, an image gigabytes). A download is written beside its place and renamed
into it, so two supervisors booting the same tree at once never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
import urllib.response
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

from labq.errors import ProviderError

DOWNLOAD_TIMEOUT: Final = 300.0  # seconds without a byte before a download is given up
MAX_BYTES: Final = 64 * 1024**3  # a boot file larger than this is refused
_CHUNK: Final = 1 << 20


def local_copy(location: str, cache: Path, *, limit: int = MAX_BYTES) -> Path:
    """A path holding what ``location`` (a path, ``file://`` or ``http(s)://`` URL) names."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file"):
        path = Path(unquote(parts.path) if parts.scheme else location)
        if not path.is_file():
            raise ProviderError(f"{location} does not exist")
        return path
    if parts.scheme not in ("http", "https"):
        raise ProviderError(f"{location}: only paths and file, http and https URLs")
    return _cached(location, cache, limit)


def _cached(url: str, cache: Path, limit: int) -> Path:
    """The cached copy of ``url``, brought up to date."""
    home = cache / hashlib.sha256(url.encode()).hexdigest()[:32]
    home.mkdir(parents=True, exist_ok=True)
    name = Path(unquote(urlsplit(url).path)).name or "file"
    copy, validators = home / name, home / "validators.json"
    request = urllib.request.Request(url)  # noqa: S310 (http or https: checked above)
    if copy.is_file():
        request.add_header("If-Modified-Since", formatdate(copy.stat().st_mtime, usegmt=True))
        etag = _etag(validators)
        if etag:
            request.add_header("If-None-Match", etag)
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as answer:  # noqa: S310
            _save(answer, copy, limit, url)
            modified = answer.headers.get("Last-Modified")
            etag = answer.headers.get("ETag")
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the connection open
        if exc.code == 304 and copy.is_file():
            return copy
        raise ProviderError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise ProviderError(f"{url}: {exc.reason}") from None
    except TimeoutError:
        raise ProviderError(f"{url}: no answer within {DOWNLOAD_TIMEOUT:g} s") from None
    _remember(copy, validators, modified, etag)
    return copy


def _save(answer: urllib.response.addinfourl, copy: Path, limit: int, url: str) -> None:
    """Write the answer's body beside ``copy`` and rename it into place."""
    fd, temp = tempfile.mkstemp(dir=copy.parent, prefix=".download-")
    try:
        size = 0
        with os.fdopen(fd, "wb") as out:
            while chunk := answer.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise ProviderError(f"{url}: larger than {limit} bytes")
                out.write(chunk)
        os.replace(temp, copy)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _remember(copy: Path, validators: Path, modified: str | None, etag: str | None) -> None:
    """The server's Last-Modified becomes the copy's mtime (what If-Modified-Since sends
    next time); its ETag is kept beside it."""
    if modified:
        try:
            stamp = parsedate_to_datetime(modified).timestamp()
            os.utime(copy, (stamp, stamp))
        except (TypeError, ValueError):
            pass
    validators.write_text(json.dumps({"etag": etag}))


def _etag(validators: Path) -> str | None:
    try:
        found = json.loads(validators.read_text()).get("etag")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None
