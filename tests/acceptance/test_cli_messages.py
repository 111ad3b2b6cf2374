"""Messages that name the place (issue 22), as a person at a terminal meets them: a refusal
at submission names the file, line, field and problem; ``labq validate`` warns about host
properties no system records when it can ask a server; a verb that changed nothing says
why and exits 1."""

from __future__ import annotations

import json

import pytest

from tests.acceptance.test_cli_api import PASSING, one_line_refusal

MISSPELT = """\
whiteboard: misspelt
recipe_sets:
  - recipes:
      - tasks:
          - {name: hello, run: 'true'}
        host:
          memroy_mb: {'>=': 4096}
"""
NAMED = """\
recipe_sets:
  - recipes:
      - host: {fqdn: s9.lab1}
        tasks: [{name: hello, run: 'true'}]
"""
TOO_BIG = """\
recipe_sets:
  - recipes:
      - host:
          memory_mb: {'>=': 999999}
        tasks: [{name: hello, run: 'true'}]
"""


@pytest.fixture
def as_admin(labq, live_server):
    """``labq`` against the live server as its admin; a lab with one system of 16 GiB."""

    def run(*args: str, ok: bool = True):
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
        result = labq(*args, env=env, timeout=60)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr
        return result

    run("lab", "add", "lab1")
    run("system", "add", "s1.lab1", "--lab", "lab1", "--attr", "memory_mb=16384")
    return run


REFUSALS = {
    "misspelt.yaml": (
        MISSPELT,
        "labq: misspelt.yaml:7: recipe_sets[0].recipes[0].host.memroy_mb: can never run: "
        "memroy_mb: no system records this property; did you mean memory_mb? "
        "(systems record memory_mb besides the built-in ones)",
    ),
    "named.yaml": (
        NAMED,
        "labq: named.yaml:3: recipe_sets[0].recipes[0].host.fqdn: can never run: "
        "fqdn = s9.lab1: no such system",
    ),
    "too-big.yaml": (
        TOO_BIG,
        "labq: too-big.yaml:4: recipe_sets[0].recipes[0].host.memory_mb: can never run: "
        "memory_mb >= 999999: no system has it (largest 16384)",
    ),
}


def test_a_job_no_system_can_run_is_refused_naming_file_line_field_and_problem(
    as_admin, tmp_path
) -> None:
    for name, (text, expected) in REFUSALS.items():
        (tmp_path / name).write_text(text)
        refused = as_admin("job", "submit", name, ok=False)
        one_line_refusal(refused)
        assert refused.returncode == 2
        assert refused.stderr.strip() == expected
    assert json.loads(as_admin("job", "list", "--json").stdout)["total"] == 0


def test_validate_warns_about_properties_no_system_records_when_a_server_answers(
    as_admin, labq, tmp_path
) -> None:
    (tmp_path / "misspelt.yaml").write_text(MISSPELT)
    checked = as_admin("validate", "misspelt.yaml")
    assert json.loads(checked.stdout)["recipe_sets"][0]["recipes"][0]["host"] == {
        "memroy_mb": {">=": 4096}
    }
    assert checked.stderr == (
        "labq: warning: misspelt.yaml:7: recipe_sets[0].recipes[0].host.memroy_mb: "
        "memroy_mb: no system records this property; did you mean memory_mb? "
        "(systems record memory_mb besides the built-in ones)\n"
    )
    alone = labq("validate", "misspelt.yaml")  # no server configured: the document only
    assert (alone.returncode, alone.stderr) == (0, "")
    told = labq("validate", "-v", "misspelt.yaml")
    assert told.returncode == 0
    assert told.stderr == (
        "labq: host properties not checked against a server: "
        "no server is configured (LABQ_URL and LABQ_TOKEN)\n"
    )
    gone = labq(
        "validate", "-v", "misspelt.yaml", env={"LABQ_URL": "http://127.0.0.1:9", "LABQ_TOKEN": "x"}
    )
    assert gone.returncode == 0
    assert gone.stderr.startswith(
        "labq: host properties not checked against a server: cannot reach"
    )


def test_verbs_that_change_nothing_say_why_and_exit_1(as_admin, tmp_path) -> None:
    (tmp_path / "pass.yaml").write_text(PASSING)
    done = json.loads(as_admin("job", "submit", "pass.yaml", "--wait", "--json").stdout)
    assert (done["state"], done["result"]) == ("completed", "pass")
    job = done["id"]
    again = as_admin("job", "cancel", str(job), ok=False)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == f"labq: job {job} is already completed (pass): nothing to cancel\n"
    as_json = as_admin("job", "cancel", str(job), "--json", ok=False)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["cancelled"] == 0
    both = as_admin("job", "cancel", str(job), str(job), ok=False)  # named, not swept for
    assert both.returncode == 1
    assert "no job cancelled" in both.stdout
    later = as_admin("job", "priority", str(job), "low", ok=False)
    assert later.returncode == 1
    assert later.stderr == (
        f"labq: job {job} is already completed (pass): no set waits, so no priority changed\n"
    )
    extended = as_admin("job", "extend", str(job), "--by", "1h", ok=False)
    assert extended.returncode == 2
    assert extended.stderr == f"labq: job {job} has ended: nothing to extend\n"
    released = as_admin("system", "release", "s1.lab1", ok=False)
    assert released.returncode == 2
    assert released.stderr == "labq: s1.lab1 is neither reserved nor loaned\n"
