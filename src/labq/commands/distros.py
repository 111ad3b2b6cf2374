"""``labq distro``: each lab's distro trees (changes need an admin).

``import`` reads a tree's ``.treeinfo`` here, from a URL or a directory, and sends
its text: the server never fetches anything itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import click
import httpx

from labq.commands import api, cell, json_option, show, table
from labq.errors import InputError
from labq.formats.treeinfo import MAX_BYTES

FETCH_SECONDS: Final = 30.0


@click.group()
def distro() -> None:
    """Distro trees: what each lab can install (changes need an admin)."""


@distro.command("import")
@click.argument("location", metavar="URL|DIR")
@click.option("--lab", required=True, help="The lab whose catalogue gets the tree.")
@click.option("--name", default=None, help="The tree's name (default: from its .treeinfo).")
@click.option("--tag", "tags", multiple=True, help="A tag, as Beaker's RELEASED (repeat).")
@click.option("--replace", is_flag=True, help="Replace a tree of the same name and arch.")
@json_option
@click.pass_context
def import_distro(
    ctx: click.Context,
    location: str,
    lab: str,
    name: str | None,
    tags: tuple[str, ...],
    replace: bool,
    as_json: bool,
) -> None:
    """Import the tree at URL (http or https) or in the directory DIR from its .treeinfo."""
    text, base = read_treeinfo_at(location)
    body: dict[str, Any] = {"lab": lab, "url": base, "treeinfo": text, "tags": list(tags)}
    if name is not None:
        body["name"] = name
    if replace:
        body["replace"] = True
    tree = api(ctx).post("/distros/import", body)
    show(tree, as_json, lambda t: f"imported {describe(t)} into lab {t['lab']!r}")


@distro.command("add")
@click.option("--lab", required=True, help="The lab whose catalogue gets the tree.")
@click.option("--name", required=True, help="The tree's name.")
@click.option("--os-type", required=True, help="As Teuthology names it: rhel, centos, ubuntu.")
@click.option("--os-version", required=True, help="As Teuthology names it: 9.3, 9.stream.")
@click.option("--arch", required=True, help="The arch it installs on.")
@click.option("--machine-type", "machine_types", multiple=True, help="Only for these (repeat).")
@click.option("--family", default=None, help="Beaker's family (default: from os type/version).")
@click.option("--variant", default=None, help="The variant, as Beaker's BaseOS.")
@click.option("--kernel", default=None, help="The kernel's URL or path.")
@click.option("--initrd", default=None, help="The initrd's URL or path.")
@click.option("--repo", "repos", multiple=True, metavar="NAME=URL", help="A repository (repeat).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeat).")
@click.option("--replace", is_flag=True, help="Replace a tree of the same name and arch.")
@json_option
@click.pass_context
def add_distro(ctx: click.Context, /, **given: Any) -> None:
    """Add a tree that has no .treeinfo (a Teuthology-style image)."""
    as_json = given.pop("as_json")
    body = {k: v for k, v in given.items() if v not in (None, (), False)}
    for key in ("machine_types", "tags"):
        if key in body:
            body[key] = list(body[key])
    if "repos" in body:
        body["repos"] = [_repo(text) for text in body["repos"]]
    tree = api(ctx).post("/distros", body)
    show(tree, as_json, lambda t: f"added {describe(t)} to lab {t['lab']!r}")


@distro.command("list")
@click.option("--lab", default=None, help="Only this lab's trees.")
@json_option
@click.pass_context
def list_distros(ctx: click.Context, lab: str | None, as_json: bool) -> None:
    """List each lab's trees."""
    found = api(ctx).get("/distros", {"lab": lab} if lab else None)

    def render(data: dict[str, Any]) -> Any:
        rows = [
            [
                t["lab"],
                t["name"],
                t["arch"],
                t["family"],
                t["variant"] or None,
                f"{t['os_type']}/{t['os_version']}" if t["os_type"] else None,
                cell(t["machine_types"]) if t["machine_types"] else None,
                cell(t["tags"]) if t["tags"] else None,
            ]
            for t in data["trees"]
        ]
        headers = ["lab", "name", "arch", "family", "variant", "os", "machine types", "tags"]
        return table(headers, rows)

    show(found, as_json, render)


@distro.command("remove")
@click.argument("name")
@click.option("--lab", required=True, help="The lab whose tree it is.")
@click.option("--arch", default=None, help="Only this arch (default: every arch).")
@json_option
@click.pass_context
def remove_distro(ctx: click.Context, name: str, lab: str, arch: str | None, as_json: bool) -> None:
    """Remove a lab's tree NAME."""
    path = f"/distros/{_segment(lab)}/{_segment(name)}"
    if arch:
        path += f"?arch={_segment(arch)}"
    gone = api(ctx).delete(path)
    show(gone, as_json, lambda d: "\n".join(f"removed {describe(t)}" for t in d["removed"]))


def describe(tree: dict[str, Any]) -> str:
    """``RHEL-9.3.0 (RedHatEnterpriseLinux9 BaseOS aarch64)``."""
    facts = " ".join(p for p in (tree["family"], tree["variant"], tree["arch"]) if p)
    return f"{tree['name']} ({facts})"


def read_treeinfo_at(location: str) -> tuple[str, str]:
    """The ``.treeinfo`` text of the tree at a URL or in a directory, and the tree's root."""
    if location.startswith(("http://", "https://")):
        base = location if location.endswith("/") else location + "/"
        return _fetch(base + ".treeinfo"), base
    if "://" in location:
        raise InputError("only http, https or a directory", source=location)
    root = Path(location).expanduser().resolve()
    found = root / ".treeinfo"
    if not found.is_file():
        raise InputError(f"no .treeinfo in {root}", source=location)
    if found.stat().st_size > MAX_BYTES:
        raise InputError(
            f"too large (a .treeinfo has at most {MAX_BYTES} bytes)", source=str(found)
        )
    return _text(found.read_bytes(), str(found)), str(root)


def _fetch(url: str) -> str:
    """GET ``url`` with a timeout, reading at most MAX_BYTES."""
    try:
        with httpx.stream("GET", url, timeout=FETCH_SECONDS, follow_redirects=True) as answer:
            if answer.status_code != 200:
                raise InputError(f"the server answered {answer.status_code}", source=url)
            data = b""
            for chunk in answer.iter_bytes():
                data += chunk
                if len(data) > MAX_BYTES:
                    raise InputError(f"larger than {MAX_BYTES} bytes", source=url)
    except httpx.HTTPError as exc:
        raise InputError(f"cannot fetch it: {exc}".splitlines()[0], source=url) from None
    return _text(data, url)


def _text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=source) from None


def _repo(text: str) -> dict[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name.strip() or not url.strip():
        raise InputError(f"{text!r} is not NAME=URL", place="--repo")
    return {"name": name.strip(), "url": url.strip()}


def _segment(text: str) -> str:
    return quote(text, safe="")
