"""``labq distro`` against a real ``labq server``: trees imported from a directory and over
HTTP, an image added by its Teuthology names, listed, removed, and bad input in one line."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "treeinfo"


@pytest.fixture
def run(labq, live_server):
    """Run ``labq`` against the live server as its admin."""

    def call(*args: str, ok: bool = True):
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
        result = labq(*args, env=env, timeout=60)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result

    return call


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def mirror(tmp_path) -> Iterator[tuple[str, Path]]:
    """A tree mirror over HTTP: its root URL and directory."""
    root = tmp_path / "mirror"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def tree_dir(parent: Path, name: str, treeinfo: str | bytes) -> Path:
    directory = parent / name
    directory.mkdir(parents=True)
    target = directory / ".treeinfo"
    if isinstance(treeinfo, bytes):
        target.write_bytes(treeinfo)
    else:
        shutil.copyfile(DATA / treeinfo, target)
    return directory


def refused(result, *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("labq: ")
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def test_a_labs_trees_from_a_directory_over_http_and_by_name(run, mirror, tmp_path) -> None:
    url, root = mirror
    run("lab", "add", "lab1")
    local = tree_dir(tmp_path, "rhel9", "rhel9-aarch64.treeinfo")
    imported = run("distro", "import", str(local), "--lab", "lab1")
    assert imported.stdout.strip() == (
        "imported RHEL-9.3.0 (RedHatEnterpriseLinux9 BaseOS aarch64) into lab 'lab1'"
    )
    tree_dir(root, "stream9", "stream9-x86_64.treeinfo")
    fetched = run(
        "distro", "import", f"{url}/stream9", "--lab", "lab1", "--tag", "RELEASED", "--json"
    )
    stream = json.loads(fetched.stdout)
    assert (stream["name"], stream["os_type"], stream["os_version"]) == (
        "CentOS-Stream-9",
        "centos",
        "9.stream",
    )
    assert stream["kernel"] == f"{url}/stream9/images/pxeboot/vmlinuz"
    assert stream["tags"] == ["RELEASED"]
    run(
        "distro", "add", "--lab", "lab1", "--name", "ubuntu-22.04", "--os-type", "ubuntu",
        "--os-version", "22.04", "--arch", "x86_64", "--machine-type", "smithi",
        "--machine-type", "mira",
    )  # fmt: skip
    listed = json.loads(run("distro", "list", "--lab", "lab1", "--json").stdout)["trees"]
    assert [(t["name"], t["arch"], t["kind"]) for t in listed] == [
        ("CentOS-Stream-9", "x86_64", "tree"),
        ("RHEL-9.3.0", "aarch64", "tree"),
        ("ubuntu-22.04", "x86_64", "image"),
    ]
    assert listed[2]["machine_types"] == ["mira", "smithi"]
    shown = run("distro", "list").stdout
    assert "ubuntu/22.04" in shown
    assert "RedHatEnterpriseLinux9" in shown
    gone = run("distro", "remove", "--lab", "lab1", "RHEL-9.3.0", "--arch", "aarch64")
    assert gone.stdout.strip() == "removed RHEL-9.3.0 (RedHatEnterpriseLinux9 BaseOS aarch64)"
    assert len(json.loads(run("distro", "list", "--json").stdout)["trees"]) == 2


def test_bad_trees_are_refused_in_one_line(run, mirror, tmp_path) -> None:
    url, root = mirror
    run("lab", "add", "lab1")
    refused(run("distro", "import", str(tmp_path), "--lab", "lab1", ok=False), "no .treeinfo in")
    refused(
        run("distro", "import", f"{url}/nothing/", "--lab", "lab1", ok=False),
        f"{url}/nothing/.treeinfo",
        "answered 404",
    )
    tree_dir(root, "broken", b"[general]\nfamily = Fedora\narch = x86_64\n")
    refused(
        run("distro", "import", f"{url}/broken", "--lab", "lab1", ok=False),
        "[general] version",
        "missing",
    )
    tree_dir(root, "huge", b"[general]\n" + b"; padding\n" * 110_000)
    refused(run("distro", "import", f"{url}/huge", "--lab", "lab1", ok=False), "larger than")
    local = tree_dir(tmp_path, "rhel9", "rhel9-aarch64.treeinfo")
    refused(run("distro", "import", str(local), "--lab", "nowhere", ok=False), "no lab named")
    run("distro", "import", str(local), "--lab", "lab1")
    refused(run("distro", "import", str(local), "--lab", "lab1", ok=False), "already has a tree")
    run("distro", "import", str(local), "--lab", "lab1", "--replace")
    refused(
        run("distro", "add", "--lab", "lab1", "--name", "x", "--os-type", "rhel",
            "--os-version", "9.3", "--arch", "x86_64", "--repo", "nourl", ok=False),
        "'nourl' is not NAME=URL",
    )  # fmt: skip
    refused(run("distro", "remove", "--lab", "lab1", "nothing", ok=False), "has no tree 'nothing'")
