"""``labq job results ID --junit FILE``: the job's results as a JUnit XML report."""

from __future__ import annotations

import sys
from pathlib import Path

from lxml import etree

from labq.client import Client
from labq.commands import show
from labq.errors import InputError


def write_junit(client: Client, job_id: int, file: Path, as_json: bool) -> None:
    """Fetch the report and write it to ``file`` (``-``: stdout), then say what it holds."""
    document = client.get_bytes(f"/jobs/{job_id}/results", {"format": "junit"})
    if str(file) == "-":
        sys.stdout.buffer.write(document)
        sys.stdout.buffer.flush()
        return
    try:
        file.write_bytes(document)
    except OSError as exc:
        raise InputError(f"cannot write it: {exc.strerror}", source=str(file)) from None
    root = etree.fromstring(document)
    summary = {
        "id": job_id,
        "junit": str(file),
        "suites": len(root),
        **{key: int(root.get(key, "0")) for key in ("tests", "failures", "errors")},
    }
    show(
        summary,
        as_json,
        lambda d: (
            f"wrote {d['junit']}: {d['suites']} suite(s), {d['tests']} test(s), "
            f"{d['failures']} failure(s), {d['errors']} error(s)"
        ),
    )
