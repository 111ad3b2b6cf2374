import pytest

from labq.config import load_settings
from labq.domain.priority import Priority
from labq.errors import InputError


def test_defaults_without_a_file(monkeypatch):
    monkeypatch.delenv("LABQ_CONFIG", raising=False)
    monkeypatch.delenv("LABQ_DB", raising=False)
    settings = load_settings()
    assert settings.server.port == 8080
    assert settings.scheduler().holds_per_lab == 1
    assert settings.lab("anything").backend == "local"


def test_a_file_and_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "labq.yaml"
    path.write_text(
        "aging: {bump_after: 600, ceiling: urgent}\n"
        "labs:\n  lab1: {backend: ssh, hooks: {reimage: 'fog-deploy {fqdn}'}}\n"
    )
    monkeypatch.setenv("LABQ_DB", "sqlite:///x.db")
    settings = load_settings(path)
    assert settings.scheduler().aging_ceiling is Priority.URGENT
    assert settings.scheduler().aging_bump_after == 600
    assert settings.lab("lab1").backend == "ssh"
    assert settings.lab("lab1").hooks.reimage == "fog-deploy {fqdn}"
    assert settings.database == "sqlite:///x.db"


@pytest.mark.parametrize(
    ("text", "line", "place", "problem"),
    [
        ("holds: {per_lab: -1}\n", 1, "holds.per_lab", "greater than or equal to 0"),
        ("server:\n  prot: 80\n", 2, "server.prot", "unknown key 'prot'"),
        ("labs:\n  lab1: {backend: telnet}\n", 2, "labs.lab1.backend", "'local' or 'ssh'"),
        ("- a list\n", 1, "", "a settings file is a mapping"),
    ],
)
def test_bad_settings_name_the_place(tmp_path, text, line, place, problem):
    path = tmp_path / "labq.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_settings(path)
    assert caught.value.line == line
    assert caught.value.place == place
    assert problem in caught.value.problem
