import pytest

from labq.config import Hooks
from labq.dispatch.hooks import HookError, HookSet, render, run_hook

from .conftest import system


def test_a_placeholder_value_stays_one_argument_and_no_shell_sees_it(tmp_path):
    fqdn = f"x; touch {tmp_path}/pwned"
    host = system(fqdn, bmc="bmc $(touch pwned2)")
    template = "/usr/bin/printf '[%s]' {fqdn} --bmc={attr_bmc} {lab}"

    assert render("power_on", template, host) == [
        "/usr/bin/printf",
        "[%s]",
        fqdn,
        "--bmc=bmc $(touch pwned2)",
        "lab1",
    ]
    log = tmp_path / "hook.log"
    run_hook("power_on", template, host, timeout=10, log_path=log)
    assert f"[{fqdn}][--bmc=bmc $(touch pwned2)][lab1]" in log.read_text()
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


def test_a_failing_hook_names_the_hook_the_system_and_the_exit_code(tmp_path):
    with pytest.raises(HookError) as caught:
        run_hook(
            "reimage", "/bin/sh -c 'exit 4'", system("h.test"), timeout=10, log_path=tmp_path / "l"
        )
    assert str(caught.value) == "hook reimage for h.test failed with exit code 4 (see l)"
    assert caught.value.exit_code == 4


def test_a_hook_that_overruns_is_killed(tmp_path):
    with pytest.raises(HookError, match=r"hook power_on for h\.test timed out after 0\.3 s"):
        run_hook(
            "power_on",
            "sleep 100",
            system("h.test"),
            timeout=0.3,
            log_path=tmp_path / "l",
            grace=0.2,
        )


def test_a_missing_program_is_reported(tmp_path):
    with pytest.raises(HookError, match=r"hook cleanup for h\.test could not start"):
        run_hook(
            "cleanup",
            "/no/such/fog-cli {fqdn}",
            system("h.test"),
            timeout=5,
            log_path=tmp_path / "l",
        )


def test_hook_variables_are_given(tmp_path):
    log = tmp_path / "l"
    run_hook(
        "power_on",
        "/bin/sh -c 'echo $LABQ_HOOK $LABQ_FQDN'",
        system("h.test"),
        timeout=5,
        log_path=log,
    )
    assert "power_on h.test" in log.read_text()


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("ipmitool {host}", "unknown placeholder {host}"),
        ("ipmitool {fqdn", "unpaired brace"),
        ("ipmitool 'unterminated", "cannot be split"),
        ("", "empty template"),
    ],
)
def test_bad_templates_are_refused_when_the_hooks_are_made(template, problem):
    with pytest.raises(HookError, match=problem):
        HookSet(reimage=template)


def test_braces_can_be_escaped_and_attributes_are_filled_in():
    host = system("h.test", bmc="10.0.0.9", port=623, ipv6=False)
    args = render("power_on", "x {{literal}} {attr_bmc}:{attr_port} {attr_ipv6}", host)
    assert args == ["x", "{literal}", "10.0.0.9:623", "false"]


def test_a_missing_attribute_is_an_error_naming_it():
    with pytest.raises(HookError, match="needs attribute 'bmc'"):
        render("power_on", "ipmitool -H {attr_bmc}", system("h.test"))


def test_hooks_come_from_the_lab_settings():
    hooks = HookSet.from_settings(Hooks(reimage="fog deploy {fqdn}"), timeout=60)
    assert hooks.reimage == "fog deploy {fqdn}"
    assert hooks.power_on is None
    assert hooks.timeout == 60
