"""The UI's JUnit download, systems summary and log follow (in-process, a logged-in user)."""

from __future__ import annotations

from lxml import etree

from tests.api.conftest import Lab, submit
from tests.ui.test_pages import log_in

UI = "/ui"


def test_summary_junit_and_follow_pages(lab: Lab) -> None:
    log_in(lab, "bob")
    summary = lab.client.get(f"{UI}/systems-summary")
    assert summary.status_code == 200
    assert "(no pool)" in summary.text
    assert "perf" in summary.text
    job_id = submit(lab)
    junit = lab.client.get(f"{UI}/jobs/{job_id}/junit")
    assert junit.status_code == 200
    (case,) = etree.fromstring(junit.content).iter("testcase")
    assert case.find("skipped").get("type") == "not run"  # queued: nothing ran yet
    assert "JUnit XML" in lab.client.get(f"{UI}/jobs/{job_id}").text
    missing = lab.client.get(f"{UI}/jobs/{job_id}/logs/follow", params={"name": "nosuch"})
    assert missing.status_code == 404
