"""The shape issue 23 gave the house, kept: small modules, a store composed of parts, one
definition per scheduler event. (The import layers are `tests/unit/test_imports.py`'s.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import get_args

import labq
import labq.store
from labq.domain import events
from labq.store.tables.schema import Base

SRC = Path(labq.__file__).parent
MAX_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in SRC.rglob("*.py")
        if "migrations" not in path.parts
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_store_class_inherits_another_store_class() -> None:
    """Parts are composed (given to each other), never inherited; table models sit on the
    declarative ``Base`` and nothing else of the store."""
    inherited = []
    for found in pkgutil.walk_packages(labq.store.__path__, "labq.store."):
        if ".migrations" in found.name:
            continue
        module = importlib.import_module(found.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != found.name:
                continue
            for base in cls.__mro__[1:]:
                if base.__module__.startswith("labq.store") and base is not Base:
                    inherited.append(f"{found.name}.{name} <- {base.__module__}.{base.__name__}")
    assert inherited == []


def test_each_scheduler_event_is_defined_once_and_has_a_wire_name() -> None:
    kinds = get_args(events.Event)
    assert len(kinds) == len(set(kinds)) == 12
    for kind in kinds:
        assert kind.__module__ == "labq.domain.events"
        fields = list(inspect.signature(kind).parameters)
        sample = kind(*(1 if f in ("job_id", "set_id") else "x.lab" for f in fields))
        assert events.decode(events.encode(sample)) == sample
    defined_elsewhere = [
        f"{path.relative_to(SRC)}: {kind.__name__}"
        for path in SRC.rglob("*.py")
        if path.name != "events.py" or path.parent.name != "domain"
        for kind in kinds
        if f"class {kind.__name__}" in path.read_text(encoding="utf-8")
    ]
    assert defined_elsewhere == []
