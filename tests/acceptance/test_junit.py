"""``labq job results ID --junit FILE``: a report that validates against the JUnit schema."""

from __future__ import annotations

import json
from pathlib import Path

from lxml import etree

from tests.acceptance.conftest import cli, wait_for

SCHEMA = Path(__file__).parents[1] / "data" / "junit" / "junit-10.xsd"
MIXED = """
whiteboard: junit <mixed> & more
recipe_sets:
  - recipes:
      - tasks:
          - {name: passes, run: 'echo "fine <ok> & \\"done\\""', timeout: 30}
          - {name: fails, run: 'printf "bad\\001byte\\n"; exit 3', timeout: 30}
  - recipes:
      - tasks:
          - {name: alone, run: 'echo second set', timeout: 30}
"""
NEVER = """
whiteboard: junit never runs
recipe_sets:
  - recipes:
      - host: {arch: s390x}
        tasks:
          - {name: waits, run: 'true', timeout: 30}
"""


def _schema() -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(SCHEMA)))


def _submit(env, tmp_path, name, text):
    (tmp_path / f"{name}.yaml").write_text(text)
    done = cli(env, "job", "submit", str(tmp_path / f"{name}.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def test_junit_validates_and_says_what_happened(server, tmp_path):
    client, _, env = server
    assert cli(env, "lab", "add", "lab1").returncode == 0
    assert cli(env, "system", "add", "a.lab1", "--lab", "lab1").returncode == 0
    assert cli(env, "system", "add", "z.lab1", "--lab", "lab1", "--arch", "s390x").returncode == 0
    assert cli(env, "system", "condition", "z.lab1", "manual", "--reason", "kept").returncode == 0
    mixed = _submit(env, tmp_path, "mixed", MIXED)
    never = _submit(env, tmp_path, "never", NEVER)
    assert wait_for(client, mixed)["result"] == "fail"
    assert cli(env, "job", "cancel", str(never)).returncode == 0
    wait_for(client, never)
    schema = _schema()

    out = tmp_path / "mixed.xml"
    wrote = cli(env, "job", "results", str(mixed), "--junit", str(out), "--json")
    assert wrote.returncode == 0, wrote.stderr
    summary = json.loads(wrote.stdout)
    assert summary == {
        "id": mixed,
        "junit": str(out),
        "suites": 2,
        "tests": 3,
        "failures": 1,
        "errors": 0,
    }
    report = etree.parse(str(out))
    schema.assertValid(report)
    suites = report.getroot().findall("testsuite")
    assert [s.get("tests") for s in suites] == ["2", "1"]
    passes, fails = suites[0].findall("testcase")
    assert passes.find("failure") is None
    assert 'fine <ok> & "done"' in passes.findtext("system-out")
    failure = fails.find("failure")
    assert failure.get("type") == "fail"
    assert failure.text == "exit code 3"
    assert "bad\ufffdbyte" in fails.findtext("system-out")  # a control byte XML cannot hold
    assert suites[0].get("hostname") == "a.lab1"
    props = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert props["attempt"] == "1"
    assert props["result"] == "fail"

    # the API's form is the same document; a cancelled job's tasks are skipped
    api = client.get(f"/jobs/{mixed}/results", params={"format": "junit"})
    assert api.headers["content-type"].startswith("application/xml")
    assert api.content == out.read_bytes()
    skipped = cli(env, "job", "results", str(never), "--junit", "-")
    assert skipped.returncode == 0
    doc = etree.fromstring(skipped.stdout.encode())
    schema.assertValid(doc)
    (case,) = doc.iter("testcase")
    assert case.find("skipped").get("type") == "cancelled"
    assert doc.find("testsuite").get("skipped") == "1"

    bad = client.get(f"/jobs/{mixed}/results", params={"format": "tap"})
    assert bad.status_code == 422
    unwritable = cli(env, "job", "results", str(mixed), "--junit", str(tmp_path / "no" / "x.xml"))
    assert unwritable.returncode != 0
    assert unwritable.stderr.count("\n") == 1
    assert "cannot write it" in unwritable.stderr
