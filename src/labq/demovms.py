"""``labq demo --vms``: the demo lab with a libvirt VM provider, and a job that needs a VM.

The lab ``demo`` gets a quota of one small VM (its slot ``vm1.demo.vms``), booted
from the small Debian guest :func:`labq.dispatch.vms.guest.build` makes from this
host's packages (the libvirt provider's default boot source). The sample job asks
for one system more than the lab's machines, so one recipe runs in a VM made for
it, over SSH, and the VM is destroyed when the recipe ends. The demo watches the
provider and prints what happened.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from labq.client import Client
from labq.config import LabSettings
from labq.errors import LabqError
from labq.vmconfig import VmProvider, VmSize

SLOT_SUFFIX: Final = ".vms"
TASK: Final = "where"
BOOT_SECONDS: Final = 600.0  # under TCG (no usable KVM) a boot takes a minute or more
WATCH_SECONDS: Final = 900.0
INSTALL: Final = (
    "apt-get install qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients "
    "libvirt-dev pkg-config linux-image-amd64 busybox-static dropbear-bin openssh-sftp-server; "
    "pip install 'labq[vms]'; start libvirtd (docs/operations.md, A libvirt VM provider)"
)


def lab_settings(lab: str) -> dict[str, LabSettings]:
    """The demo lab's settings: a libvirt provider with room for one small VM."""
    provider = VmProvider(
        kind="libvirt",
        max_vms=1,
        max_vcpus=1,
        max_memory=512,
        sizes=[VmSize(name="small", cpus=1, memory=512)],
        user="root",
        create_timeout=BOOT_SECONDS,
    )
    return {lab: LabSettings(vms=provider)}


def check_libvirt(probe: Path) -> None:
    """Raise a one-line :class:`LabqError` naming what is missing and how to install it."""
    for program in ("qemu-system-x86_64", "qemu-img", "ssh-keygen"):
        if shutil.which(program) is None:
            raise LabqError(f"demo --vms: {program} is not installed: {INSTALL}")
    from labq.errors import ProviderError

    try:
        from labq.dispatch.vms.guest import build
        from labq.dispatch.vms.libvirt import LibvirtProvider

        LibvirtProvider(state_dir=probe).list()
        build()
    except ProviderError as exc:
        reason = " ".join(str(exc).split())  # one line, whatever the tool printed
        raise LabqError(f"demo --vms: {reason}: {INSTALL}") from None
    finally:
        shutil.rmtree(probe, ignore_errors=True)  # the probe's provider made nothing there


def vm_job(machines: int, group: str) -> str:
    """A job of ``machines + 1`` recipes started together: one of them needs a VM.
    ``group`` may use every machine (some are in a pool open to it alone)."""
    recipe = (
        "      - tasks:\n"
        f"          - name: {TASK}\n"
        "            run: 'echo \"on $LABQ_FQDN, kernel $(uname -r)\"'\n"
        "            timeout: 120\n"
    )
    return (
        "whiteboard: one system more than the lab has, so one recipe runs in a VM (demo)\n"
        f"group: {group}\nrecipe_sets:\n  - max_time: 1800\n    recipes:\n{recipe * (machines + 1)}"
    )


class Watch:
    """What the VM of the sample job did, as the demo saw it: its name, whether it was
    created, whether its recipe passed, whether it is gone."""

    def __init__(self, data_dir: Path, echo: Callable[[str], None]) -> None:
        from labq.dispatch.vms.libvirt import LibvirtProvider

        self.provider = LibvirtProvider(state_dir=data_dir / "vms")
        self.echo = echo
        self.name: str | None = None
        self.destroyed = False
        self.task: int | None = None  # the id of the task that ran in the VM

    def until_done(self, client: Client, job_id: int, stopped: Callable[[float], bool]) -> None:
        """Poll until the job has ended and its VM is gone (``WATCH_SECONDS`` at most)."""
        deadline = time.monotonic() + WATCH_SECONDS
        while time.monotonic() < deadline and not stopped(0.5):
            names = self.provider.list()
            if self.name is None and names:
                self.name = names[0]
                self.echo(f"labq demo: VM {self.name} created; booting it (TCG may take a minute)")
            job = client.get(f"/jobs/{job_id}")
            if job["state"] in ("completed", "cancelled", "aborted"):
                self._ran(job)
                if not names:
                    self.destroyed = self.name is not None
                    if self.destroyed:
                        self.echo(f"labq demo: VM {self.name} destroyed")
                    return
        self.echo("labq demo: the VM job did not end in time; see labq job show")

    def _ran(self, job: dict[str, Any]) -> None:
        if self.task is not None:
            return
        for recipe in _recipes(job):
            if str(recipe.get("system") or "").endswith(SLOT_SUFFIX):
                tasks = recipe.get("tasks") or [{}]
                self.task = tasks[0].get("id")
                result = tasks[0].get("result")
                self.echo(f"labq demo: task {TASK!r} ran in the VM on {recipe['system']}: {result}")


def _recipes(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for s in job["sets"] for r in s["recipes"]]


def summary(watch: Watch, job_id: int) -> str:
    """The announcement's lines about the VM job."""
    made = f"VM {watch.name}" if watch.name else "no VM (see labq job show)"
    gone = "destroyed when its recipe ended" if watch.destroyed else "not seen destroyed"
    return (
        f"  Job {job_id} asked for one system more than the lab's machines: {made} was\n"
        f"  created, ran task {TASK!r} over SSH and was {gone}."
    )


def commands(watch: Watch, job_id: int) -> list[str]:
    """Commands to look at the VM job, for the announcement."""
    shown = [f"labq job show {job_id}"]
    if watch.task is not None:
        shown.append(f"labq job logs {job_id} {watch.task}")
    return shown
