"""Beaker job XML read into the canonical model.

The document is parsed safely (no DTD, no entities, no network), walked
strictly (an unknown element or attribute is an error, never dropped) and
translated into the native form, which is validated like any native job.
``docs/job-format-beaker.md`` is the reference.
"""

from __future__ import annotations

from typing import Any, Final

from lxml import etree

from labq.domain.job import JobSpec
from labq.domain.priority import Priority
from labq.errors import InputError
from labq.formats import beaker_host
from labq.formats.beaker_extras import EXTRAS, custom_distro, integer
from labq.formats.limits import Limits
from labq.formats.origins import Origins
from labq.formats.source import DocPath
from labq.formats.xmltree import XmlDoc, load_xml

RECIPE_SET_TAGS: Final = ("recipeSet", "RecipeSet")
_NOT_SUPPORTED: Final = frozenset({"guestname"})
_RECIPE_METADATA_ATTRS: Final = ("ks_meta", "kernel_options", "kernel_options_post")
_GUEST_ATTRS: Final = ("guestname", "guestargs")
_NO_ROLE: Final = "None"  # what Beaker writes for "no role" when it clones a job


def parse_beaker(text: str, *, source: str, limits: Limits | None = None) -> JobSpec:
    """Read a Beaker job XML document into a validated JobSpec, or raise InputError."""
    return read_beaker(text, source=source, limits=limits)[0]


def read_beaker(text: str, *, source: str, limits: Limits | None = None) -> tuple[JobSpec, Origins]:
    """``parse_beaker``, and where each part of the job came from in the XML."""
    limits = limits or Limits()
    doc = load_xml(text, source=source, max_depth=limits.depth)
    _check_counts(doc, limits)
    origins = Origins(source)
    return origins.validate(_Reader(doc, origins).job(doc.root)), origins


def _check_counts(doc: XmlDoc, limits: Limits) -> None:
    """Refuse too many sets, recipes or tasks, counted by lxml (in C, no object made per
    element) before the reader walks them in Python: 60,000 tasks cost seconds to read."""
    sets = [el for el in doc.root if el.tag in RECIPE_SET_TAGS]
    _refuse_past(doc, doc.root, len(sets), limits, "sets_per_job", "recipe_sets")
    for i, rset in enumerate(sets):
        place = f"recipe_sets[{i}].recipes"
        _refuse_past(doc, rset, _count(rset, "recipe"), limits, "recipes_per_set", place)
        for j, recipe in enumerate(rset.iterchildren("recipe")):
            # a guest's tasks are its host recipe's (stored and run with them)
            tasks = _count(recipe, "task") + _count(recipe, "guestrecipe/task")
            _refuse_past(doc, recipe, tasks, limits, "tasks_per_recipe", f"{place}[{j}].tasks")


def _refuse_past(
    doc: XmlDoc, el: etree._Element, count: int, limits: Limits, name: str, place: str
) -> None:
    limit: int = getattr(limits, name)
    if count > limit:
        what = {"sets_per_job": "recipe sets", "recipes_per_set": "recipes"}.get(name, "tasks")
        problem = f"{count} {what} is more than the limit of {limit} (limits.{name})"
        raise InputError(problem, source=doc.source, place=place, line=doc.line(el))


def _count(el: etree._Element, path: str) -> int:
    found = el.xpath(f"count({path})")
    return int(found) if isinstance(found, float) else 0


class _Reader:
    def __init__(self, doc: XmlDoc, origins: Origins) -> None:
        self.doc = doc
        self.origins = origins
        self.extensions: list[dict[str, str]] = []  # elements of other namespaces, in order

    def note(self, path: DocPath, el: etree._Element) -> None:
        self.origins.add(path, self.doc.line(el), self.doc.place(el))

    def job(self, el: etree._Element) -> dict[str, Any]:
        doc = self.doc
        if el.tag != "job":
            raise doc.error(el, f"the document must be a <job>, not <{el.tag}>")
        if "id" in el.attrib:
            raise doc.error(
                el,
                "<job id=...> is a document Beaker wrote about a job it ran (results, or a "
                "recipe served to its harness), not a job to submit; "
                "'bkr job-clone --xml J:ID' gives the job itself",
            )
        attrs = doc.attributes(el, ("group", "retention_tag", "product"))
        self.note((), el)
        data: dict[str, Any] = {"recipe_sets": []}
        metadata: dict[str, Any] = {k: attrs[k] for k in ("retention_tag", "product") if k in attrs}
        if "group" in attrs:
            data["group"] = attrs["group"]
        seen: set[str] = set()
        for child in doc.children(el):
            if child.tag in RECIPE_SET_TAGS:
                index = len(data["recipe_sets"])
                data["recipe_sets"].append(self.recipe_set(child, ("recipe_sets", index)))
                continue
            if self.foreign(child):
                continue
            doc.once(child, el, seen)
            if child.tag == "whiteboard":
                doc.attributes(child, ())
                data["whiteboard"] = doc.text(child) or None
            elif child.tag == "notify":
                metadata["cc"] = self.notify(child)
            else:
                raise doc.unknown(child)
        if not data["recipe_sets"]:
            raise doc.error(el, "<job> has no <recipeSet>")
        if self.extensions:
            metadata["extensions"] = self.extensions
        data["metadata"] = metadata
        return data

    def foreign(self, el: etree._Element) -> bool:
        """Keep an element of another XML namespace (Beaker's extension point) whole."""
        if etree.QName(el).namespace is None:
            return False
        xml = etree.tostring(el, encoding="unicode", with_tail=False)
        self.extensions.append({"place": self.doc.place(el), "xml": xml})
        return True

    def notify(self, el: etree._Element) -> list[str]:
        """The cc addresses, each once (Beaker collapses duplicates too)."""
        doc = self.doc
        doc.attributes(el, ())
        out: dict[str, None] = {}
        for child in doc.children(el):
            if child.tag != "cc":
                raise doc.unknown(child)
            doc.attributes(child, ())
            out.setdefault(doc.text(child))
        return list(out)

    def recipe_set(self, el: etree._Element, path: DocPath) -> dict[str, Any]:
        doc = self.doc
        attrs = doc.attributes(el, ("priority", "max_retries"))
        self.note(path, el)
        out: dict[str, Any] = {"recipes": []}
        if "priority" in attrs:
            out["priority"] = _priority(doc, el, attrs["priority"])
        if "max_retries" in attrs:
            out["max_retries"] = integer(doc, el, "max_retries", attrs["max_retries"])
        for child in doc.children(el):
            if self.foreign(child):
                continue
            if child.tag != "recipe":
                raise self.refuse(child)
            index = len(out["recipes"])
            out["recipes"].append(self.recipe(child, (*path, "recipes", index)))
        if not out["recipes"]:
            raise doc.error(el, f"<{el.tag}> has no <recipe>")
        return out

    def recipe(self, el: etree._Element, path: DocPath, *, guest: bool = False) -> dict[str, Any]:
        doc = self.doc
        extra = _GUEST_ATTRS if guest else ()
        attrs = doc.attributes(el, ("role", "whiteboard", *_RECIPE_METADATA_ATTRS, *extra))
        self.note(path, el)
        out: dict[str, Any] = {"tasks": [], "guests": []}
        if attrs.get("role", _NO_ROLE) != _NO_ROLE:
            out["role"] = attrs["role"]
        if "whiteboard" in attrs:
            out["whiteboard"] = attrs["whiteboard"]
        metadata: dict[str, Any] = {k: attrs[k] for k in _RECIPE_METADATA_ATTRS if k in attrs}
        host: dict[str, Any] = {}
        seen: set[str] = set()
        for child in doc.children(el):
            tag = str(child.tag)
            if tag == "task":
                index = len(out["tasks"])
                out["tasks"].append(self.task(child, (*path, "tasks", index)))
                continue
            if tag == "guestrecipe" and not guest:
                index = len(out["guests"])
                out["guests"].append(self.guest(child, (*path, "guests", index)))
                continue
            if self.foreign(child):
                continue
            doc.once(child, el, seen)
            if tag == "hostRequires":
                self.note((*path, "host"), child)
                host = self.host_requires(child, out)
            elif tag == "distroRequires":
                doc.attributes(child, ())
                _one_distro(doc, child, metadata)
                metadata["distro_requires"] = beaker_host.distro_requirement(doc, child)
            elif tag == "distro":
                _one_distro(doc, child, metadata)
                metadata["distro"] = custom_distro(doc, child)
            elif tag in EXTRAS:
                metadata[tag] = EXTRAS[tag](doc, child)
            else:
                raise self.refuse(child)
        distro = metadata.get("distro_requires") or metadata.get("distro")
        out["host"] = _with_distro_arch(host, distro, out)
        out["metadata"] = metadata
        if not out["guests"]:
            del out["guests"]
        return out

    def guest(self, el: etree._Element, path: DocPath) -> dict[str, Any]:
        """A <guestrecipe>: read as a recipe; its host requirements describe the guest (it
        takes no pool system), so they are kept in its metadata."""
        inner = self.recipe(el, path, guest=True)
        if "force" in inner:
            raise self.doc.error(el, "a <guestrecipe> runs on its host's guest: force= has no use")
        metadata = inner["metadata"]
        if inner["host"] not in ({}, {"and": []}):
            metadata["host_requires"] = inner["host"]
        out: dict[str, Any] = {k: inner[k] for k in ("tasks", "role", "whiteboard") if k in inner}
        out["metadata"] = metadata
        name, args = el.get("guestname", "").strip(), el.get("guestargs")
        if name:
            out["name"] = name
        if args is not None:
            out["args"] = args
        return out

    def host_requires(self, el: etree._Element, recipe: dict[str, Any]) -> dict[str, Any]:
        doc = self.doc
        attrs = doc.attributes(el, ("force",))
        if "force" not in attrs:
            return beaker_host.host_requirement(doc, el)
        force = doc.required(el, attrs, "force")
        if doc.children(el):
            raise doc.error(
                el, "<hostRequires force=...> cannot have other host requirements (nor in Beaker)"
            )
        recipe["force"] = force
        return {"fqdn": force}

    def task(self, el: etree._Element, path: DocPath) -> dict[str, Any]:
        doc = self.doc
        attrs = doc.attributes(el, ("name", "role"))
        self.note(path, el)
        out: dict[str, Any] = {}
        if "name" in attrs:
            out["name"] = attrs["name"]
        if attrs.get("role", _NO_ROLE) != _NO_ROLE:
            out["role"] = attrs["role"]
        seen: set[str] = set()
        for child in doc.children(el):
            if self.foreign(child):
                continue
            doc.once(child, el, seen)
            if child.tag == "params":
                self.note((*path, "params"), child)
                out["params"] = self.params(child)
            elif child.tag == "fetch":
                self.note((*path, "fetch"), child)
                fetch = doc.attributes(child, ("url", "subdir"))
                doc.leaf(child)
                out["fetch"] = {"url": doc.required(child, fetch, "url")}
                if "subdir" in fetch:
                    out["fetch"]["subdir"] = fetch["subdir"]
            else:
                raise doc.unknown(child)
        if "name" not in out and "fetch" not in out:
            raise doc.error(el, "<task> needs the attribute name (or a <fetch> to name it)")
        return out

    def params(self, el: etree._Element) -> dict[str, str]:
        doc = self.doc
        doc.attributes(el, ())
        out: dict[str, str] = {}
        for child in doc.children(el):
            if child.tag != "param":
                raise doc.unknown(child)
            attrs = doc.attributes(child, ("name", "value"))
            doc.leaf(child)
            name = doc.required(child, attrs, "name")
            if name in out:
                raise doc.error(child, f"parameter {name!r} is given twice")
            if "value" not in attrs:
                raise doc.error(child, "<param> needs the attribute value")
            out[name] = attrs["value"]
        return out

    def refuse(self, el: etree._Element) -> Exception:
        if el.tag in _NOT_SUPPORTED:
            return self.doc.error(el, f"<{el.tag}> is not supported yet")
        return self.doc.unknown(el)


def _priority(doc: XmlDoc, el: etree._Element, text: str) -> str:
    try:
        return Priority.parse(text).label
    except ValueError:
        names = ", ".join(p.name.capitalize() for p in Priority)
        raise doc.error(el, f"unknown priority {text!r} (expected one of {names})") from None


def _one_distro(doc: XmlDoc, el: etree._Element, metadata: dict[str, Any]) -> None:
    if "distro" in metadata or "distro_requires" in metadata:
        raise doc.error(el, "a recipe has <distroRequires> or a custom <distro>, not both")


def _with_distro_arch(
    host: dict[str, Any], distro: dict[str, Any] | None, recipe: dict[str, Any]
) -> dict[str, Any]:
    """A distro built for one arch needs a system of that arch (unless the system is forced)."""
    arch = beaker_host.plain_arch(distro) if distro else None
    if arch is None or "force" in recipe:
        return host
    return beaker_host.all_of([host, {"arch": arch}] if host else [{"arch": arch}])
