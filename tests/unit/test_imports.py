"""The import contracts of issue 23, so that ``pytest`` alone catches a broken one.

- The layers, as ``[tool.importlinter]`` in pyproject.toml says them, checked by
  ``lint-imports`` (scripts/test also runs it as a phase of its own).
- No import cycle between any two modules of labq, typing-only imports included:
  import-linter has no contract for that (``acyclic_siblings`` speaks of packages, not
  modules), so the cycles are found here, on grimp's graph of the package.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).absolute().parents[2]


def test_the_layer_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, _broken_part(run.stdout + run.stderr)


def test_no_module_of_labq_is_on_an_import_cycle() -> None:
    graph = grimp.build_graph("labq", exclude_type_checking_imports=False, cache_dir=None)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(describe(graph, group) for group in found)


def test_the_cycle_finder_finds_every_cycle_and_nothing_else() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [
        ("p.a", "p.b"),
        ("p.b", "p.c"),
        ("p.c", "p.a"),  # a → b → c → a
        ("p.c", "p.d"),  # d is imported by the circle, not on it
        ("p.e", "p.f"),
        ("p.f", "p.e"),  # a second, separate circle
        ("p.g", "p.a"),
    ]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == [["p.a", "p.b", "p.c"], ["p.e", "p.f"]]


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every group of modules that import each other, directly or not (the strongly
    connected components of more than one module), each sorted, in order of their first."""
    order: dict[str, int] = {}  # Tarjan's algorithm, without recursion
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in order:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(_imported(graph, root)))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, pending = work[-1]
            step = next(pending, None)
            if step is not None:
                if step not in order:
                    order[step] = low[step] = len(order)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(_imported(graph, step))))
                elif step in on_stack:
                    low[module] = min(low[module], order[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == order[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def describe(graph: grimp.ImportGraph, group: list[str]) -> str:
    """The modules of a cycle and the imports between them, with their lines."""
    members = set(group)
    lines = [f"- {' ↔ '.join(group)}"]
    for importer in group:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                where = f"line {detail['line_number']}: {detail['line_contents']}"
                lines.append(f"    {importer} → {imported} ({where})")
    return "\n".join(lines)


def _imported(graph: grimp.ImportGraph, module: str) -> list[str]:
    return sorted(graph.find_modules_directly_imported_by(module))


def _broken_part(report: str) -> str:
    """lint-imports' report from its list of broken contracts on (the banner says nothing)."""
    start = report.find("Broken contracts")
    return report[start:] if start >= 0 else report
