import threading

import pytest

from labq.dispatch.logs import MaskedLog
from labq.dispatch.plan import PlanError, Workspace
from labq.dispatch.procs import process_alive

from .conftest import system


def test_reimage_wipes_the_workspace(local, data_dir, tmp_path):
    host = system("h.test")
    local.provision(host, Workspace(tmp_path / "logs"), cancel_event=threading.Event())
    ws = data_dir / "workspaces" / "h.test"
    (ws / "left-over").write_text("x")
    local.provision(host, Workspace(tmp_path / "logs"), cancel_event=threading.Event())
    assert sorted(p.name for p in ws.iterdir()) == ["logs"]


@pytest.mark.parametrize("fqdn", ["..", ".", "a/b", "../../etc", ""])
def test_reimage_refuses_anything_outside_the_workspaces_root(fqdn, local, tmp_path):
    with pytest.raises(PlanError):
        local.provision(system(fqdn), Workspace(tmp_path / "logs"), cancel_event=threading.Event())


def test_a_symlinked_workspace_is_unlinked_not_followed(local, data_dir, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("x")
    (data_dir / "workspaces").mkdir(parents=True)
    (data_dir / "workspaces" / "h.test").symlink_to(precious)
    with pytest.raises(PlanError):
        local.provision(system("h.test"), Workspace(tmp_path / "l"), cancel_event=threading.Event())
    assert (precious / "keep").exists()


def test_leftover_background_processes_are_ended_when_the_task_exits(local, data_dir, tmp_path):
    host = system("h.test")
    local.provision(host, Workspace(tmp_path / "logs"), cancel_event=threading.Event())
    out = local.run(
        host,
        "sleep 100 & echo $! > bg.pid",
        env={},
        cwd=None,
        timeout=10,
        log_path=tmp_path / "t.log",
        cancel_event=threading.Event(),
    )
    assert out.exit_code == 0
    assert not out.timed_out
    assert not process_alive(int((data_dir / "workspaces" / "h.test" / "bg.pid").read_text()))


def test_task_environment_does_not_inherit_the_supervisors_secrets(local, tmp_path, monkeypatch):
    monkeypatch.setenv("LABQ_DB", "postgresql://labq:hunter2@db/labq")
    host = system("h.test")
    local.provision(host, Workspace(tmp_path / "logs"), cancel_event=threading.Event())
    log = tmp_path / "t.log"
    local.run(
        host,
        "env",
        env={"X": "1"},
        cwd=None,
        timeout=10,
        log_path=log,
        cancel_event=threading.Event(),
    )
    text = log.read_text()
    assert "X=1" in text
    assert "PATH=" in text
    assert "hunter2" not in text


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_masked_log_masks_secrets_cut_across_chunks(tmp_path, size):
    secret = "abcdef-secret"
    data = f"start {secret} middle {secret}{secret} end ab".encode()
    path = tmp_path / "log"
    with MaskedLog(path, [secret, "other-secret"]) as log:
        for i in range(0, len(data), size):
            log.write(data[i : i + size])
    assert path.read_text() == "start [secret] middle [secret][secret] end ab"
