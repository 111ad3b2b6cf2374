"""The ``command`` VM provider: a lab's own hooks make, list and destroy its VMs.

For clouds labq does not speak to itself (OpenStack, AWS, oVirt): each hook is an
argv list run without a shell, with a timeout, its fields filled in (``{name}``,
``{lab}``, ``{cpus}``, ``{memory}``, ``{disk}``, ``{public_key}``: the file of the
per-VM public key). What the hooks print on standard output is JSON:

- ``create`` prints ``{"address": "...", "port": 22, "user": "root", "host_key":
  "ssh-ed25519 AAAA..."}`` (``port`` and ``user`` optional) once the VM exists;
  a non-zero exit is a failed creation, its last line of standard error the reason;
- ``destroy`` removes the VM, and exits 0 also when it is gone already;
- ``list`` prints the names of the VMs it knows (a list of strings, or of objects
  with a ``name``); labq keeps those starting ``labq-``.

labq makes an SSH key pair for every VM in its state directory (the private key
0600, never handed to a hook, a task or a log) and writes the VM's host key to a
known_hosts file of the VM's own, so the SSH backend checks it like any host's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import asyncssh

from labq.domain.vms import NAME_PREFIX, Vm, VmRequest, check_name
from labq.errors import ProviderError

_POLL: Final = 0.2


class Hooks(Protocol):
    """The hooks' settings (:class:`labq.vmconfig.CommandHooks`)."""

    @property
    def create(self) -> Sequence[str]: ...
    @property
    def destroy(self) -> Sequence[str]: ...
    @property
    def list(self) -> Sequence[str]: ...
    @property
    def timeout(self) -> float: ...


class CommandProvider:
    """VMs made and destroyed by the lab's hook commands."""

    kind: Final = "command"

    def __init__(self, hooks: Hooks, *, state_dir: Path, user: str = "root") -> None:
        self.hooks = hooks
        self.state_dir = state_dir
        self.user = user

    def create(self, request: VmRequest) -> Vm:
        """Make the VM through the create hook, with a key pair made for it."""
        name = check_name(request.name)
        home = self.state_dir / name
        if home.exists():
            raise ProviderError(f"VM {name} exists already")
        home.mkdir(parents=True, mode=0o700)
        key = asyncssh.generate_private_key("ssh-ed25519")
        identity = home / "id_ed25519"
        identity.write_bytes(key.export_private_key())
        identity.chmod(0o600)
        public = home / "id_ed25519.pub"
        public.write_bytes(key.export_public_key())
        fields = {
            "name": name,
            "lab": request.lab,
            "cpus": str(request.size.vcpus),
            "memory": str(request.size.memory_mb),
            "disk": str(request.size.disk_gb),
            "public_key": str(public),
            # the boot source, from the recipe's distro tree ("": the cloud's default)
            "image": request.image or "",
            "kernel": request.kernel or "",
            "initrd": request.initrd or "",
            "kernel_args": request.kernel_args,
        }
        try:
            made = _object(self._run("create", self.hooks.create, fields), "create")
            return self._vm(name, home, made)
        except ProviderError:
            with contextlib.suppress(ProviderError):
                self.destroy(name)  # a failed create leaves nothing behind
            raise

    def _vm(self, name: str, home: Path, made: Mapping[str, Any]) -> Vm:
        address, host_key = made.get("address"), made.get("host_key")
        port, user = made.get("port", 22), made.get("user", self.user)
        if not isinstance(address, str) or not address:
            raise ProviderError(f'create hook for {name}: no "address" in its output')
        if not isinstance(host_key, str) or len(host_key.split()) < 2:
            raise ProviderError(f'create hook for {name}: no "host_key" in its output')
        if not isinstance(port, int) or not 0 < port < 65536 or not isinstance(user, str):
            raise ProviderError(f'create hook for {name}: a bad "port" or "user"')
        where = address if port == 22 else f"[{address}]:{port}"
        known_hosts = home / "known_hosts"
        known_hosts.write_text(f"{where} {' '.join(host_key.split()[:2])}\n")
        return Vm(
            name,
            address,
            port,
            user,
            self.kind,
            identity_file=str(home / "id_ed25519"),
            known_hosts=str(known_hosts),
        )

    def wait_reachable(self, vm: Vm, deadline: float) -> None:
        """Return once the VM's sshd says hello."""
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((vm.address, vm.port), timeout=2) as conn:
                    conn.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
                    if conn.recv(4).startswith(b"SSH-"):
                        return
                    last = "not an SSH server"
            except OSError as exc:
                last = exc.strerror or type(exc).__name__
            time.sleep(_POLL)
        raise ProviderError(f"VM {vm.name} at {vm.address}:{vm.port} did not answer: {last}")

    def destroy(self, name: str) -> None:
        """Destroy the VM through the destroy hook, and forget its keys."""
        check_name(name)
        try:
            self._run("destroy", self.hooks.destroy, {"name": name})
        finally:
            shutil.rmtree(self.state_dir / name, ignore_errors=True)

    def list(self) -> list[str]:
        """The labq VMs the list hook reports."""
        found = json.loads(self._run("list", self.hooks.list, {}) or "[]")
        if not isinstance(found, list):
            raise ProviderError("list hook: its output is not a JSON list")
        names = [item.get("name") if isinstance(item, dict) else item for item in found]
        return sorted(n for n in names if isinstance(n, str) and n.startswith(NAME_PREFIX))

    def _run(self, what: str, argv: Sequence[str], fields: Mapping[str, str]) -> str:
        """Run one hook: its output, or a ProviderError with its reason."""
        try:
            args = [part.format_map(fields) for part in argv]
        except (KeyError, ValueError) as exc:
            raise ProviderError(f"{what} hook: unknown field {exc} in {list(argv)}") from None
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        env.update({f"LABQ_VM_{k.upper()}": v for k, v in fields.items()})
        try:
            done = subprocess.run(
                args,
                capture_output=True,
                text=True,
                timeout=self.hooks.timeout,
                check=False,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise ProviderError(f"{what} hook timed out after {self.hooks.timeout:g} s") from None
        except OSError as exc:
            raise ProviderError(f"{what} hook {args[0]}: {exc.strerror}") from None
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
            raise ProviderError(f"{what} hook failed: {lines[-1]}")
        return done.stdout


def _object(output: str, what: str) -> Mapping[str, Any]:
    try:
        found = json.loads(output)
    except ValueError:
        raise ProviderError(f"{what} hook: its output is not JSON") from None
    if not isinstance(found, dict):
        raise ProviderError(f"{what} hook: its output is not a JSON object")
    return found
