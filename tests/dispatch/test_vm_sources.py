"""A VM's boot files over HTTP: downloaded once into the boot cache, fetched again only
when the tree changed, refused with the URL and the reason (a real HTTP server)."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from labq.dispatch.vms.sources import local_copy
from labq.errors import ProviderError


class Tree(http.server.SimpleHTTPRequestHandler):
    """Serves a directory (with Last-Modified; If-Modified-Since gives 304) and counts
    the files it sent whole."""

    sent: list[str]

    def log_message(self, format: str, *args: object) -> None:
        if len(args) > 1 and str(args[1]) == "200":
            self.sent.append(self.path)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """A directory served over HTTP: its URL, the directory, the paths sent whole."""
    root = tmp_path / "tree"
    root.mkdir()
    sent: list[str] = []
    handler = type("Counted", (Tree,), {"sent": sent})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root, sent
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_over_http_is_downloaded_once_and_again_when_it_changed(served, tmp_path):
    url, root, sent = served
    (root / "vmlinuz").write_bytes(b"kernel 1")
    os.utime(root / "vmlinuz", (1_700_000_000, 1_700_000_000))
    cache = tmp_path / "cache"

    first = local_copy(f"{url}/vmlinuz", cache)
    assert first.read_bytes() == b"kernel 1"
    assert first.is_relative_to(cache)
    again = local_copy(f"{url}/vmlinuz", cache)
    assert again == first
    assert again.read_bytes() == b"kernel 1"
    assert sent == ["/vmlinuz"]  # the second time the server said 304

    (root / "vmlinuz").write_bytes(b"kernel 2, republished in place")
    os.utime(root / "vmlinuz", (1_800_000_000, 1_800_000_000))
    assert local_copy(f"{url}/vmlinuz", cache).read_bytes() == b"kernel 2, republished in place"
    assert sent == ["/vmlinuz", "/vmlinuz"]
    assert [p.name for p in first.parent.iterdir() if p.name.startswith(".")] == []


def test_paths_and_file_urls_are_read_where_they_are(tmp_path):
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"k")
    assert local_copy(str(kernel), tmp_path / "cache") == kernel
    assert local_copy(kernel.as_uri(), tmp_path / "cache") == kernel
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("name", "limit", "problem"),
    [
        ("missing.img", 1 << 20, "HTTP 404"),
        ("big.img", 10, "larger than 10 bytes"),
    ],
)
def test_a_file_that_cannot_be_had_is_one_line_with_the_url(served, tmp_path, name, limit, problem):
    url, root, _ = served
    (root / "big.img").write_bytes(b"x" * 100)
    with pytest.raises(ProviderError) as caught:
        local_copy(f"{url}/{name}", tmp_path / "cache", limit=limit)
    assert str(caught.value).startswith(f"{url}/{name}: {problem}")
    assert "\n" not in str(caught.value)
    cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert cached == []  # nothing half-written is left to boot from


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("ftp://trees.example/vmlinuz", "only paths and file, http and https URLs"),
        ("/no/such/vmlinuz", "does not exist"),
        ("http://127.0.0.1:9/vmlinuz", "Connection refused"),
    ],
)
def test_a_location_that_is_not_a_file_says_so(tmp_path, location, problem):
    with pytest.raises(ProviderError, match=problem) as caught:
        local_copy(location, tmp_path / "cache")
    assert str(caught.value).startswith(location)
