"""``labq sim`` on a terminal and in a pipe: progress only on a terminal, tables never cut
to 80 columns, written files named, stuck sets counted in a comparison."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

from tests.sim.test_command import ROOT, labq_script

TRACE = ROOT / "examples" / "traces" / "lublin_256.swf.gz"
ABBA = ROOT / "examples" / "sim" / "abba-legacy.yaml"
ANSI = "\x1b["
# what a terminal setting in the test's own environment could add: each must be unset
TERMINAL_HINTS = ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CI")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_HINTS}
    env.update(TERM="xterm-256color", **extra)
    return env


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*labq_script(), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(**env),
        timeout=300,
        check=False,
    )


def test_piped_run_draws_no_progress_and_names_the_plots(tmp_path):
    done = _run(
        "sim", "--swf", str(TRACE), "--limit", "150", "--compare", "labq,easy",
        "--plot", "plots/", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ANSI not in done.stdout
    assert ANSI not in done.stderr
    assert "simulating" not in done.stderr  # the bar's label: nothing of it when piped
    assert done.stderr.splitlines() == [
        "plots written to plots/: wait_distribution.png, utilisation.png,"
        " gantt-labq.png, gantt-easy.png"
    ]
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "gantt-easy.png",
        "gantt-labq.png",
        "utilisation.png",
        "wait_distribution.png",
    ]
    assert "labq sim — policies compared" in done.stdout


def test_json_run_names_the_plots_on_stderr_only(tmp_path):
    done = _run("sim", str(ABBA), "--json", "--plot", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["policy"] == "labq"  # stdout is the JSON alone
    assert done.stderr.startswith("plots written to out/: wait_distribution.png")


def _read_until_exit(master: int, proc: subprocess.Popen[str], deadline: float) -> str:
    """Everything written to the terminal until the process ends (and the pty drains)."""
    chunks = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: nobody holds the terminal's other end any more
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_terminal_gets_a_progress_bar_and_the_report_stays_clean(tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [*labq_script(), "sim", "--swf", str(TRACE), "--limit", "400", "--compare", "labq,easy"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    os.close(slave)
    try:
        drawn = _read_until_exit(master, proc, time.monotonic() + 300)
        report, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0, drawn
    assert "simulating labq" in drawn
    assert "simulating easy" in drawn
    assert "━" in drawn  # the bar itself
    assert ANSI in drawn  # drawn in place, then erased
    assert ANSI not in report
    assert "simulating" not in report
    assert "labq sim — policies compared" in report


ALL = "labq,beaker-batch,easy,teuthology-dispatcher,teuthology-workers"


def test_a_wide_table_is_not_cut_when_piped_and_fits_columns(tmp_path):
    wide = _run("sim", str(ABBA), "--compare", ALL, cwd=tmp_path)
    assert wide.returncode == 0, wide.stderr
    lines = wide.stdout.splitlines()
    assert max(len(line) for line in lines) > 100  # at 80 columns rich would have wrapped it
    row = next(line for line in lines if "lock waits refused (deadlock)" in line)
    assert row.count("│") == 7  # the whole row on one line: six columns
    narrow = _run("sim", str(ABBA), "--compare", ALL, cwd=tmp_path, COLUMNS="70")
    assert narrow.returncode == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 70
    assert "teuthology-workers"[:8] in narrow.stdout


def test_compare_counts_stuck_sets_in_wait_and_makespan(tmp_path):
    done = _run("sim", str(ABBA), "--compare", "labq,beaker-batch", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = {row["policy"]: row for row in report["policies"]}
    labq, batch = rows["labq"], rows["beaker-batch"]
    assert (labq["stuck"], batch["stuck"]) == (0, 2)
    until = report["stuck_wait_until"]
    # `first` (submitted at 10) and `urgent` (at 70) wait until the longest run's end
    assert batch["max_wait"] == until - 10
    assert batch["mean_wait"] == ((until - 10) + (until - 70)) / 4  # busy-a, busy-b: 0 s
    assert batch["makespan"] == until
    assert until >= labq["makespan"]
    assert batch["mean_wait"] > labq["mean_wait"]
    assert batch["makespan"] >= labq["makespan"]
    table = _run("sim", str(ABBA), "--compare", "labq,beaker-batch", cwd=tmp_path).stdout
    stuck_row = next(line for line in table.splitlines() if "stuck sets" in line)
    assert [cell.strip() for cell in stuck_row.split("│")[1:-1]] == ["stuck sets", "0", "2"]
    assert "≥" in next(line for line in table.splitlines() if "mean wait" in line)


def _on_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal: (exit status, what the terminal got, stdout)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [*labq_script(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        cwd=cwd,
        env=_env(),
    )
    os.close(slave)
    try:
        drawn = _read_until_exit(master, proc, time.monotonic() + 120)
        report, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return proc.returncode, drawn, report


NOWHERE = ["--url", "http://127.0.0.1:9", "--token", "lq_test"]  # nothing listens on port 9


def test_a_bulk_change_spins_on_a_terminal_only_and_the_error_stands_alone(tmp_path):
    args = [*NOWHERE, "job", "cancel", "--owner", "bob", "--yes"]
    code, drawn, _ = _on_terminal(args, tmp_path)
    assert code == 2
    assert "cancel: changing the jobs" in drawn  # the spinner's label, then erased
    assert drawn.rstrip().endswith("labq: cannot reach labq at http://127.0.0.1:9"
                                   " ([Errno 111] Connection refused)")  # fmt: skip
    piped = _run(*args, cwd=tmp_path)
    assert piped.returncode == 2
    assert piped.stderr == (
        "labq: cannot reach labq at http://127.0.0.1:9 ([Errno 111] Connection refused)\n"
    )
    assert piped.stdout == ""
