"""Hooks of a ``command`` VM provider for tests: "a VM" is a real sshd on a free port of
127.0.0.1 with a directory of its own (its host key, the per-VM key labq hands in).

    python tests/vmhooks.py create STATE NAME PUBLIC_KEY_FILE
    python tests/vmhooks.py destroy STATE NAME
    python tests/vmhooks.py list STATE

A file ``STATE/fail`` makes ``create`` fail with its text as the reason; ``STATE/slow``
makes it wait that many seconds first (a server may be killed meanwhile). While a
file ``STATE/stuck`` exists, ``destroy`` hangs (a cloud that does not answer).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def create(state: Path, name: str, public_key: Path) -> None:
    if (state / "fail").exists():
        sys.exit(f"quota exceeded in the cloud: {(state / 'fail').read_text().strip()}")
    if (state / "slow").exists():
        time.sleep(float((state / "slow").read_text()))
    home = state / name
    home.mkdir(parents=True)
    host_key = home / "host_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)],
        check=True,
        capture_output=True,
    )
    (home / "authorized_keys").write_text(public_key.read_text())
    port = _free_port()
    config = home / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"PidFile {home / 'sshd.pid'}\nAuthorizedKeysFile {home / 'authorized_keys'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    with (home / "sshd.err").open("wb") as err:
        proc = subprocess.Popen(
            [str(SSHD), "-f", str(config), "-D", "-e"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    (home / "pid").write_text(str(proc.pid))
    host_pub = " ".join((home / "host_key.pub").read_text().split()[:2])
    print(
        json.dumps(
            {"address": "127.0.0.1", "port": port, "user": getpass.getuser(), "host_key": host_pub}
        )
    )


def destroy(state: Path, name: str) -> None:
    while (state / "stuck").exists():
        time.sleep(0.1)
    home = state / name
    pid_file = home / "pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        try:
            os.killpg(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.05)
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(home, ignore_errors=True)


def listing(state: Path) -> None:
    names = sorted(p.name for p in state.iterdir() if p.is_dir()) if state.exists() else []
    print(json.dumps(names))


if __name__ == "__main__":
    verb, state = sys.argv[1], Path(sys.argv[2])
    if verb == "create":
        create(state, sys.argv[3], Path(sys.argv[4]))
    elif verb == "destroy":
        destroy(state, sys.argv[3])
    else:
        listing(state)
