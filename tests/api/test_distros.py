"""``/distros``: everyone lists a lab's trees; only admins import, add and remove them, and
each change tells the scheduler DistrosChanged once it is committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from labq.domain.events import DistrosChanged
from tests.api.conftest import API, Lab

TREEINFO = (Path(__file__).parents[1] / "data" / "treeinfo" / "rhel9-aarch64.treeinfo").read_text()
URL = "http://trees.example/rhel-9.3/BaseOS/aarch64/os/"
IMPORT = {"lab": "lab1", "url": URL, "treeinfo": TREEINFO, "tags": ["RELEASED"]}
IMAGE = {
    "lab": "lab1",
    "name": "centos-9.stream",
    "arch": "x86_64",
    "os_type": "centos",
    "os_version": "9.stream",
    "machine_types": ["smithi"],
}
CHANGES = [
    ("POST", "/distros/import", IMPORT),
    ("POST", "/distros", IMAGE),
    ("DELETE", "/distros/lab1/RHEL-9.3.0", None),
]


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
def test_only_admins_change_the_catalogue(lab: Lab, method: str, path: str, body: object) -> None:
    lab.post("/distros/import", json=IMPORT)
    lab.events.calls.clear()
    before = lab.activity()
    answer = lab.client.request(method, API + path, json=body, headers=lab.auth("alice"))
    assert answer.status_code == 403
    assert answer.json()["error"]["message"] == "only admins may do this, and 'alice' is not one"
    assert lab.activity() == before
    assert lab.events.calls == []


def test_import_list_remove_tell_the_scheduler(lab: Lab) -> None:
    imported = lab.post("/distros/import", json=IMPORT)
    assert imported.status_code == 201, imported.text
    tree = imported.json()
    assert (tree["name"], tree["family"], tree["variant"]) == (
        "RHEL-9.3.0",
        "RedHatEnterpriseLinux9",
        "BaseOS",
    )
    assert tree["kernel"] == URL + "images/pxeboot/vmlinuz"
    assert tree["tags"] == ["RELEASED"]
    image = lab.post("/distros", json=IMAGE)
    assert image.status_code == 201, image.text
    assert image.json()["family"] == "CentOSStream9"
    assert image.json()["kind"] == "image"
    listed = lab.get("/distros", who="bob").json()["trees"]
    assert [(t["name"], t["arch"]) for t in listed] == [
        ("RHEL-9.3.0", "aarch64"),
        ("centos-9.stream", "x86_64"),
    ]
    assert lab.get("/distros", lab="lab1").json()["trees"] == listed
    removed = lab.client.delete(
        API + "/distros/lab1/RHEL-9.3.0", params={"arch": "aarch64"}, headers=lab.auth("root")
    )
    assert removed.status_code == 200, removed.text
    assert [t["name"] for t in removed.json()["removed"]] == ["RHEL-9.3.0"]
    assert lab.events.calls == [(DistrosChanged("lab1"), True)] * 3


def test_unknown_lab_tree_and_duplicates(lab: Lab) -> None:
    assert lab.get("/distros", lab="nowhere").status_code == 404
    assert lab.post("/distros/import", json={**IMPORT, "lab": "nowhere"}).status_code == 404
    assert lab.post("/distros/import", json=IMPORT).status_code == 201
    again = lab.post("/distros/import", json=IMPORT)
    assert again.status_code == 409
    assert "already has a tree 'RHEL-9.3.0' for aarch64" in again.json()["error"]["message"]
    assert lab.post("/distros/import", json={**IMPORT, "replace": True}).status_code == 201
    gone = lab.client.delete(API + "/distros/lab1/nothing", headers=lab.auth("root"))
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "place", "words"),
    [
        ("/distros/import", {**IMPORT, "treeinfo": "[general]\n"}, "[general] family", "missing"),
        ("/distros/import", {**IMPORT, "treeinfo": "x = 1\n"}, None, "no [section]"),
        ("/distros/import", {**IMPORT, "url": "trees/rhel"}, "url", "is not a URL"),
        ("/distros/import", {**IMPORT, "name": "a b"}, "name", "is not a tree name"),
        ("/distros/import", {**IMPORT, "url": "http://u:pw@m/t/"}, "url", "user or password"),
        ("/distros", {**IMAGE, "arch": "x 86"}, "arch", "is not a name"),
        ("/distros", {**IMAGE, "kernel": "http://k/vmlinuz"}, "kernel", "both --kernel"),
        ("/distros", {**IMAGE, "repos": [{"name": "r", "url": "ftp:x"}]}, "repo r", "not a URL"),
        ("/distros", {**IMAGE, "colour": "red"}, "colour", "unknown field"),
    ],
)
def test_bad_input_is_422_naming_the_place(lab: Lab, path, body, place, words) -> None:
    before = lab.activity()
    answer = lab.post(path, json=body)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert words in error["message"]
    if place is not None:
        assert error.get("place") == place or place in error["message"]
    assert lab.activity() == before
    assert lab.get("/distros").json()["trees"] == []
