"""VMs made on demand by the libvirt provider: create → reachable over SSH → destroyed.

    .venv/bin/python bench/vms.py [--vms 5] [--at-once 1] [--domain-type auto|kvm|qemu]
        [--systems 2000] [--queued 20000] [--signatures 300] [--events 1000] [--vms-per-lab 8]
        [--rounds 2]

Boots ``--vms`` VMs of the small guest built from this host's Debian packages
(:mod:`labq.dispatch.vms.guest`), ``--at-once`` of them at a time, each with 1 vCPU
and 256 MiB, in a temporary state directory. Per VM it times ``create`` (files,
keys, the domain started), ``wait_reachable`` (the guest's SSH server greets) and
``destroy``, and prints the median and p90 of each and of the whole, also as
ratios to a reference taken in the same run (a fixed CPU-bound loop of Python,
timed before and after; its median): figures of a loaded machine compare only so. With
``--domain-type both`` it runs the same under KVM and under TCG (QEMU's software
emulation), where KVM runs stock kernels. Every VM is destroyed, also on failure.

Then it times the scheduling core's events with providers configured, next to the
same run without (``bench/vm_events.py``; median and p90 as ratios: the two runs
share the machine's load). ``--vms 0`` runs only that part; it needs no libvirt.

Needs libvirt (libvirtd and virtlogd running), QEMU and the guest's packages; see
"A libvirt VM provider" in docs/operations.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.scheduler_events

from bench import vm_events
from labq.dispatch.vms.libvirt import LibvirtProvider, kvm_usable
from labq.domain.vms import VmRequest, VmSize, vm_name

BOOT_DEADLINE = 900.0


@dataclass(frozen=True)
class Times:
    create: float
    reachable: float
    destroy: float

    @property
    def total(self) -> float:
        return self.create + self.reachable + self.destroy


def one(provider: LibvirtProvider, name: str) -> Times:
    began = time.monotonic()
    vm = provider.create(VmRequest(name, "bench", VmSize(vcpus=1, memory_mb=256)))
    created = time.monotonic()
    try:
        provider.wait_reachable(vm, created + BOOT_DEADLINE)
        reachable = time.monotonic()
    finally:
        provider.destroy(name)
    gone = time.monotonic()
    return Times(created - began, reachable - created, gone - reachable)


def reference() -> float:
    """Seconds of a fixed CPU-bound loop: the yardstick of this run's machine load."""
    began = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i % 7
    return time.perf_counter() - began


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def run(domain_type: str, count: int, at_once: int) -> list[Times]:
    with tempfile.TemporaryDirectory(prefix="labq-bench-vms-") as tmp:
        provider = LibvirtProvider(state_dir=Path(tmp) / "vms", domain_type=domain_type)
        names = [vm_name("bench", i, int(time.time())) for i in range(count)]
        try:
            with ThreadPoolExecutor(at_once) as pool:
                return list(pool.map(lambda n: one(provider, n), names))
        finally:
            for left in provider.list():
                provider.destroy(left)


def report(domain_type: str, times: list[Times], unit: float) -> None:
    print(f"{domain_type}: {len(times)} VMs (reference loop: {unit:.2f} s)")
    for part in ("create", "reachable", "destroy", "total"):
        values = [getattr(t, part) for t in times]
        med, high = statistics.median(values), p90(values)
        print(
            f"  {part:<10} median {med:6.2f} s ({med / unit:6.1f} x ref)"
            f"   p90 {high:6.2f} s ({high / unit:6.1f} x ref)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vms", type=int, default=5)
    parser.add_argument("--at-once", type=int, default=1)
    parser.add_argument("--domain-type", default="auto", choices=("auto", "kvm", "qemu", "both"))
    parser.add_argument("--systems", type=int, default=2000)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--signatures", type=int, default=300)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--vms-per-lab", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.vms < 0 or args.at_once < 1:
        print("bench/vms.py: --vms must be at least 0, --at-once at least 1", file=sys.stderr)
        return 2
    if min(args.systems, args.signatures, args.events, args.vms_per_lab, args.rounds) < 1:
        print("bench/vms.py: --systems, --signatures, --events, --vms-per-lab, --rounds: >= 1")
        return 2
    if args.vms:
        provider_times(args.domain_type, args.vms, args.at_once)
    vm_events.report(
        args.systems, args.queued, args.signatures, args.events, args.vms_per_lab, args.rounds
    )
    return 0


def provider_times(domain_type: str, count: int, at_once: int) -> None:
    kinds = [domain_type]
    if domain_type == "both":
        if not kvm_usable():
            print("bench/vms.py: --domain-type both: KVM cannot run a stock kernel here")
            sys.exit(2)
        kinds = ["kvm", "qemu"]
    for kind in kinds:
        shown = kind if kind != "auto" else f"auto ({'kvm' if kvm_usable() else 'qemu'})"
        before = reference()
        times = run(kind, count, at_once)
        unit = statistics.median([before, reference(), reference()])
        report(shown, times, unit)


if __name__ == "__main__":
    sys.exit(main())
