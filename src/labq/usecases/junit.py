"""A job's results as JUnit XML, the report every CI reads: sets are test suites, tasks
test cases, each with its log as ``system-out``.

Only each set's current attempt is reported (a retried set's earlier attempts are
history, not results, as ``labq job results`` marks them ``current: false``); the
suite's properties say which attempt it is. Outcomes:

- ``fail`` → ``<failure>``; ``warn`` or a task ``aborted`` → ``<error>``;
- ``cancelled``, or not run yet (queued, running) → ``<skipped>``; ``pass`` → nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Final

from lxml import etree

from labq.domain.states import Result
from labq.store import JobView, RecipeSetView, RecipeView, TaskView

MAX_LOG_CHARS: Final = 1 << 20  # a log's tail beyond this is what a report keeps
# characters XML 1.0 cannot hold, even escaped
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

ReadLog = Callable[[str], str | None]  # a stored log path -> its text (None: gone)


def junit_xml(job: JobView, read_log: ReadLog) -> bytes:
    """The job as a ``<testsuites>`` document (UTF-8, with an XML declaration)."""
    root = etree.Element("testsuites", name=_clean(f"job {job.id}: {job.spec.whiteboard or ''}"))
    totals = {"tests": 0, "failures": 0, "errors": 0}
    seconds = 0.0
    for rset in job.current_sets:
        suite, counts = _suite(job, rset, read_log)
        root.append(suite)
        for key in totals:
            totals[key] += counts[key]
        seconds += _seconds(rset.started_at, rset.finished_at)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    return bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True))


def _suite(
    job: JobView, rset: RecipeSetView, read_log: ReadLog
) -> tuple[etree._Element, dict[str, int]]:
    suite = etree.Element("testsuite", name=f"set {rset.id}", id=str(rset.id))
    suite.set("package", f"job{job.id}")
    systems = sorted({r.system for r in rset.recipes if r.system})
    if systems:
        suite.set("hostname", " ".join(systems))
    if rset.started_at is not None:
        suite.set("timestamp", rset.started_at.strftime("%Y-%m-%dT%H:%M:%S"))
    suite.set("time", f"{_seconds(rset.started_at, rset.finished_at):.3f}")
    props = etree.SubElement(suite, "properties")
    facts = {
        "job": job.id,
        "owner": job.owner,
        "set": rset.id,
        "attempt": rset.attempt,
        "retry_of": rset.retry_of,
        "lab": rset.lab,
        "state": rset.state.value,
        "result": None if rset.result is None else rset.result.value,
        "stop_reason": rset.stop_reason,
        "error": rset.error,
    }
    for name, value in facts.items():
        if value is not None:
            etree.SubElement(props, "property", name=name, value=_clean(str(value)))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for recipe in rset.recipes:
        for task in recipe.tasks:
            suite.append(_case(job, recipe, task, read_log, counts))
    for key, value in counts.items():
        suite.set(key, str(value))
    return suite, counts


def _case(
    job: JobView, recipe: RecipeView, task: TaskView, read_log: ReadLog, counts: dict[str, int]
) -> etree._Element:
    case = etree.Element("testcase", name=_clean(task.name))
    where = f"recipe{recipe.id}" if task.guest is None else f"recipe{recipe.id}.{task.guest}"
    case.set("classname", _clean(f"job{job.id}.set{recipe.recipe_set_id}.{where}"))
    case.set("time", f"{_seconds(task.started_at, task.finished_at):.3f}")
    counts["tests"] += 1
    outcome = _outcome(task)
    if outcome is not None:
        tag, kind, message = outcome
        counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[tag]] += 1
        mark = etree.SubElement(case, tag, type=kind, message=_clean(message))
        if tag != "skipped" and task.exit_code is not None:
            mark.text = f"exit code {task.exit_code}"
    text = None if task.log_path is None else read_log(task.log_path)
    if text:
        etree.SubElement(case, "system-out").text = _clean(_tail(text))
    return case


def _outcome(task: TaskView) -> tuple[str, str, str] | None:
    """(element, type, message) for anything but a pass."""
    message = task.message or ""
    if task.status not in ("completed", "cancelled", "aborted"):
        return "skipped", "not run", message or f"still {task.status} when reported"
    if task.status == "cancelled":
        return "skipped", "cancelled", message or "cancelled"
    if task.status == "aborted":
        return "error", "aborted", message or "aborted"
    if task.result is Result.FAIL:
        return "failure", "fail", message or "failed"
    if task.result is Result.WARN:
        return "error", "warn", message or "warned"
    if task.result is None:
        return "skipped", "no result", message or "ended without a result"
    return None


def _tail(text: str) -> str:
    if len(text) <= MAX_LOG_CHARS:
        return text
    cut = len(text) - MAX_LOG_CHARS
    return f"[labq: the first {cut} characters are left out]\n" + text[cut:]


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _seconds(start: datetime | None, end: datetime | None) -> float:
    if start is None or end is None:
        return 0.0
    return max((end - start).total_seconds(), 0.0)
