"""Per-lab command hooks: power on/off, reimage, clean-up and guests, around any backend.

A hook is a command template such as ``ipmitool -H {attr_bmc} chassis power on``.
It is split into arguments with :func:`shlex.split` *first*, then each argument
is filled in on its own, and the result runs without a shell: a value holding
``; rm -rf /`` stays one harmless argument. Placeholders: ``{fqdn}``, ``{lab}``,
``{arch}`` and ``{attr_<name>}`` (a system attribute); ``{{`` and ``}}`` are
literal braces. The guest hooks (``guest_create``, ``guest_destroy``) also know
``{guestname}``, ``{hostfqdn}`` and ``{guestargs}``; an argument that is
exactly ``{guestargs}`` becomes the guest recipe's ``guestargs`` split as a
shell would split them (never interpreted), so ``virt-install {guestargs}``
gets ``--ram=1024 --vcpus=2`` as two arguments.
"""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from labq.dispatch.backends import Backend
from labq.dispatch.backends.local import base_environment
from labq.dispatch.backends.routed import Routed
from labq.dispatch.logs import MaskedLog, stamp
from labq.dispatch.plan import SystemInfo, Workspace, scalar_text
from labq.dispatch.procs import DEFAULT_GRACE, StartError, run_process
from labq.errors import LabqError

HookName = Literal["power_on", "power_off", "reimage", "cleanup", "guest_create", "guest_destroy"]
HOOK_NAMES: Final[tuple[HookName, ...]] = (
    "power_on",
    "power_off",
    "reimage",
    "cleanup",
    "guest_create",
    "guest_destroy",
)
_GUEST_HOOKS: Final = frozenset({"guest_create", "guest_destroy"})
_GUEST_PLAIN: Final = frozenset({"guestname", "guestargs", "hostfqdn"})
DEFAULT_HOOK_TIMEOUT: Final = 1800.0
_TOKEN: Final = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PLAIN: Final = frozenset({"fqdn", "lab", "arch"})
_ATTR: Final = re.compile(r"^attr_([A-Za-z0-9_.-]+)$")


class HookError(LabqError):
    """A hook that could not be filled in, could not start, failed or timed out."""

    def __init__(self, hook: str, fqdn: str, problem: str, exit_code: int | None = None):
        self.hook = hook
        self.fqdn = fqdn
        self.exit_code = exit_code
        super().__init__(f"hook {hook} for {fqdn} {problem}")


class HookTemplates(Protocol):
    """Anything with the four templates, such as :class:`labq.config.Hooks`."""

    @property
    def power_on(self) -> str | None: ...
    @property
    def power_off(self) -> str | None: ...
    @property
    def reimage(self) -> str | None: ...
    @property
    def cleanup(self) -> str | None: ...
    @property
    def guest_create(self) -> str | None: ...
    @property
    def guest_destroy(self) -> str | None: ...


@dataclass(frozen=True)
class HookSet:
    """A lab's hook templates (None: no hook) and how long each may take."""

    power_on: str | None = None
    power_off: str | None = None
    reimage: str | None = None
    cleanup: str | None = None
    timeout: float = DEFAULT_HOOK_TIMEOUT
    guest_create: str | None = None
    guest_destroy: str | None = None

    def __post_init__(self) -> None:
        for name in HOOK_NAMES:
            template = self.template(name)
            if template is not None:
                check_template(name, template)

    @classmethod
    def from_settings(cls, hooks: HookTemplates, timeout: float = DEFAULT_HOOK_TIMEOUT) -> HookSet:
        """The hooks of a lab's settings."""
        return cls(
            hooks.power_on,
            hooks.power_off,
            hooks.reimage,
            hooks.cleanup,
            timeout,
            hooks.guest_create,
            hooks.guest_destroy,
        )

    def template(self, name: HookName) -> str | None:
        """The template of one hook."""
        value: str | None = getattr(self, name)
        return value


def check_template(hook: str, template: str) -> list[str]:
    """The template's arguments; raises :class:`HookError` for bad quoting or placeholders."""
    try:
        args = shlex.split(template)
    except ValueError as exc:
        raise HookError(hook, "any system", f"has a template that cannot be split: {exc}") from None
    if not args:
        raise HookError(hook, "any system", "has an empty template")
    for arg in args:
        for match in _TOKEN.finditer(arg):
            token, name = match.group(0), match.group(1)
            if token in ("{{", "}}"):
                continue
            if name is None:
                raise HookError(hook, "any system", f"has an unpaired brace in {arg!r}")
            if name in _GUEST_PLAIN and hook in _GUEST_HOOKS:
                continue
            if name not in _PLAIN and not _ATTR.match(name):
                guest = ", {guestname}, {guestargs}, {hostfqdn}" if hook in _GUEST_HOOKS else ""
                raise HookError(
                    hook,
                    "any system",
                    f"has an unknown placeholder {{{name}}} "
                    f"(known: {{fqdn}}, {{lab}}, {{arch}}, {{attr_<name>}}{guest})",
                )
    return args


def render(hook: str, template: str, system: SystemInfo) -> list[str]:
    """The argv of a hook for one system: split first, then each argument filled in."""
    args = check_template(hook, template)

    def value(match: re.Match[str]) -> str:
        text, name = match.group(0), match.group(1)
        if text in ("{{", "}}"):
            return text[0]
        if name in _PLAIN:
            plain: str = getattr(system, name)
            return plain
        if name in _GUEST_PLAIN:
            return _guest_value(system, name)
        attr = _ATTR.match(name)
        assert attr is not None  # check_template saw to it
        key = attr.group(1)
        if key not in system.attributes:
            raise HookError(hook, system.fqdn, f"needs attribute {key!r}, which the system lacks")
        return scalar_text(system.attributes[key])

    out: list[str] = []
    for arg in args:
        if arg == "{guestargs}":  # the guest's own arguments, as several
            out.extend(shlex.split(system.guest_args or ""))
        else:
            out.append(_TOKEN.sub(value, arg))
    return out


def _guest_value(system: SystemInfo, name: str) -> str:
    if name == "guestname":
        return system.fqdn
    if name == "hostfqdn":
        return system.guest_of or ""
    return system.guest_args or ""


def run_hook(
    hook: str,
    template: str,
    system: SystemInfo,
    *,
    timeout: float,
    log_path: Path,
    cancel_event: threading.Event | None = None,
    grace: float = DEFAULT_GRACE,
    extra_env: Mapping[str, str] | None = None,
) -> None:
    """Run one hook for one system, without a shell; raise :class:`HookError` unless it exits 0.

    ``extra_env``: more variables (the recipe's provisioning request, for ``reimage``).
    """
    argv = render(hook, template, system)
    env = base_environment()
    env.update(extra_env or {})
    env.update(LABQ_HOOK=hook, LABQ_FQDN=system.fqdn, LABQ_LAB=system.lab, LABQ_ARCH=system.arch)
    if system.guest_of is not None:
        env.update(LABQ_HOST_FQDN=system.guest_of, LABQ_GUEST_ARGS=system.guest_args or "")
    with MaskedLog(log_path) as log:
        log.line(f"== {stamp()} hook {hook} for {system.fqdn}: {shlex.join(argv)}")
        try:
            outcome = run_process(
                argv,
                cwd=log_path.parent,
                env=env,
                timeout=timeout,
                log=log,
                cancel_event=cancel_event,
                grace=grace,
            )
        except StartError as exc:
            log.line(f"== could not start: {exc.strerror}")
            raise HookError(hook, system.fqdn, f"could not start: {exc.strerror}") from None
        log.line(f"== exit code {outcome.exit_code}")
    if outcome.timed_out:
        raise HookError(hook, system.fqdn, f"timed out after {timeout:g} s", outcome.exit_code)
    if outcome.cancelled:
        raise HookError(hook, system.fqdn, "was stopped (the set was cancelled or timed out)")
    if outcome.exit_code != 0:
        raise HookError(
            hook,
            system.fqdn,
            f"failed with exit code {outcome.exit_code} (see {log_path.name})",
            outcome.exit_code,
        )


class HookedBackend(Routed):
    """A backend with a lab's hooks around it.

    ``provision`` runs ``power_on`` then ``reimage``, then the backend's own
    provisioning; ``cleanup`` runs the ``cleanup`` hook, then the backend's own.
    ``power_off`` is for the supervisor glue (a system leaving service).
    """

    def __init__(self, inner: Backend, hooks: HookSet, *, grace: float = DEFAULT_GRACE) -> None:
        self.inner = inner
        self.hooks = hooks
        self.grace = grace

    def _hook(
        self,
        name: HookName,
        system: SystemInfo,
        log_dir: Path,
        cancel_event: threading.Event | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        template = self.hooks.template(name)
        if template is not None:
            run_hook(
                name,
                template,
                system,
                timeout=self.hooks.timeout,
                log_path=log_dir / f"hook-{name}.log",
                cancel_event=cancel_event,
                grace=self.grace,
                extra_env=extra_env,
            )

    def provision(
        self, system: SystemInfo, workspace: Workspace, *, cancel_event: threading.Event
    ) -> None:
        """Power on, reimage (told what the recipe asks: a custom distro, say), then lay out;
        a guest is created instead."""
        if system.guest_of is not None:
            self._hook("guest_create", system, workspace.log_dir, cancel_event)
        else:
            self._hook("power_on", system, workspace.log_dir, cancel_event)
            self._hook("reimage", system, workspace.log_dir, cancel_event, workspace.provision)
        self.inner.provision(system, workspace, cancel_event=cancel_event)

    def route(self, system: SystemInfo) -> tuple[Backend, SystemInfo]:
        """Every system, as it is: tasks and logs are the backend's own."""
        return self.inner, system

    def cleanup(self, system: SystemInfo, *, log_dir: Path) -> None:
        """The ``cleanup`` hook (a guest: ``guest_destroy``), then the backend's own clean-up
        (even if the hook failed)."""
        try:
            self._hook("guest_destroy" if system.guest_of else "cleanup", system, log_dir)
        finally:
            self.inner.cleanup(system, log_dir=log_dir)

    def power_off(self, system: SystemInfo, *, log_dir: Path) -> None:
        """Run the ``power_off`` hook, if the lab has one."""
        self._hook("power_off", system, log_dir)
