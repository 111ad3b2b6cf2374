"""labq's settings: one typed class, read from a YAML file and the environment.

Precedence: command-line options, then ``LABQ_*`` environment variables, then
the file given with ``--config`` (or ``LABQ_CONFIG``), then the defaults here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from labq.domain.job import PriorityField
from labq.domain.locks import DEFAULT_LEVELS
from labq.domain.priority import Priority
from labq.errors import InputError
from labq.formats.limits import Limits
from labq.formats.source import LineMap, load_yaml, read_document, validation_error
from labq.scheduler.entries import SchedulerConfig
from labq.vmconfig import VmProvider

Seconds = Annotated[float, Field(gt=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Aging(_Section):
    bump_after: Seconds | None = 3600.0
    ceiling: PriorityField = Priority.HIGH


class Retry(_Section):
    hard_limit: Annotated[int, Field(ge=0, le=100)] = 3


class Holds(_Section):
    per_lab: Annotated[int, Field(ge=0)] = 1
    max_age: Seconds | None = None  # a hold older than this is released by the consistency pass


class Health(_Section):
    max_consecutive_aborts: Annotated[int, Field(ge=1)] = 3
    heartbeat_timeout: Seconds = 60.0


class Hooks(_Section):
    """Shell command templates run for a system of the lab; ``{fqdn}`` etc. are filled in."""

    power_on: str | None = None
    power_off: str | None = None
    reimage: str | None = None
    cleanup: str | None = None
    guest_create: str | None = None  # make a guest recipe's guest: {guestname}, {guestargs}
    guest_destroy: str | None = None


class SshBackend(_Section):
    user: str = "root"
    port: Annotated[int, Field(ge=1, le=65535)] = 22
    identity_file: str | None = None
    known_hosts: str | None = None  # None: the user's known_hosts; never "accept anything"


class LocalBackend(_Section):
    """Who tasks run as on the local backend (see ``labq.dispatch.identity``)."""

    # None: the server's user; a user name or uid; "dynamic": a user id per running set
    run_as: (
        Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")] | None
    ) = None
    dynamic_uids: Annotated[str, Field(pattern=r"^[0-9]+-[0-9]+$")] = "61184-65519"


class GuestHosts(_Section):
    """A lab whose systems are libvirt hypervisors: each ``<guestrecipe>`` becomes a VM on
    its host recipe's system, made through libvirt's SSH transport with the lab's ``ssh``
    settings (docs/operations.md § Guests on their host's hypervisor)."""

    dir: Annotated[str, Field(pattern=r"^/[^/]+/[^/]+")] = "/var/lib/labq/guests"  # on the host
    session: bool = False  # the login user's own libvirt (qemu:///session), else the system's
    domain_type: Literal["auto", "kvm", "qemu"] = "auto"
    user: Annotated[str, Field(min_length=1)] = "root"  # who tasks log in as in a guest
    vcpus: Annotated[int, Field(ge=1)] = 1  # a guest's size unless its guestargs say
    memory: Annotated[int, Field(ge=64)] = 512  # MiB
    boot_timeout: Seconds = 900.0
    workspace: Annotated[str, Field(min_length=1)] = "labq-workspace"  # in a guest


class LabSettings(_Section):
    backend: Literal["local", "ssh"] = "local"
    hooks: Hooks = Hooks()
    ssh: SshBackend = SshBackend()
    local: LocalBackend = LocalBackend()
    vms: VmProvider | None = None  # VMs made on demand (docs/operations.md § VM providers)
    guests: GuestHosts | None = None  # guests on their host's hypervisor, over SSH

    @model_validator(mode="after")
    def _guests_over_ssh(self) -> LabSettings:
        if self.guests is not None and self.backend != "ssh":
            raise ValueError("guests: the lab's systems are reached over SSH (backend: ssh)")
        return self


class Fetch(_Section):
    """How supervisors fetch tasks named by URL (``<fetch url=…>``)."""

    # URL prefix -> replacement, the longest prefix wins (like git's insteadOf): a mirror
    rewrite: dict[str, str] = Field(default_factory=dict)
    # may a job's own file:// URLs be read? None: yes, unless the lab runs tasks as
    # another user (run_as), whom the server's files must not be copied to
    file_urls: bool | None = None


class Server(_Section):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8080
    # how tasks reach the API (``LABQ_URL``); default http://HOST:PORT of this server
    public_url: str | None = None
    # slow clients: a request head within header_timeout of waiting for it, a body within
    # body_timeout of its head and, after body_grace, at body_min_rate bytes/s at least; a
    # body only with a valid credential (checked before it is read), from at most
    # body_share of max_connections at once, bodies_per_credential of one credential; at
    # most max_connections at once (see labq.serving)
    header_timeout: Seconds = 10.0
    body_timeout: Seconds = 60.0
    body_min_rate: Annotated[float, Field(ge=0)] = 500.0
    body_grace: Seconds = 5.0
    body_share: Annotated[float, Field(gt=0, le=0.9)] = 0.5
    bodies_per_credential: Annotated[int, Field(ge=1)] = 32
    keep_alive: Annotated[int, Field(ge=1)] = 5  # seconds an idle connection stays open
    max_connections: Annotated[int, Field(ge=16, le=1_000_000)] = 1000


class Queue(_Section):
    """The predictive queue (seed 004) and the running limits."""

    predictive: bool = True  # False: every weight is 0, the queue is FIFO within a priority
    spv_base: Annotated[float, Field(ge=0)] = 1.0
    tick: Annotated[float, Field(gt=0)] = 30.0  # seconds per tick of age
    aging_ticks: Annotated[int, Field(ge=1)] = 30  # K: after K ticks every weight is 0
    lock_levels: tuple[str, ...] = DEFAULT_LEVELS
    running_limit: Annotated[int, Field(ge=1)] | None = None  # sets waiting/installing/running
    lab_running_limits: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    # plan backfill and reservations on predicted run times (docs/scheduling.md § Predictions)
    backfill_on_predictions: bool = True


class Smtp(_Section):
    """Where job-end emails go out; no ``host``: no email is sent (the default)."""

    host: str | None = None
    port: Annotated[int, Field(ge=1, le=65535)] = 25
    sender: str = "labq@localhost"  # the From: address
    starttls: bool = False
    username: str | None = None
    password: str | None = None
    timeout: Seconds = 10.0
    # the owner's address: the user name when it has an @, else NAME@owner_domain; neither:
    # only the job's <cc>s are written to
    owner_domain: str | None = None


class Notify(_Section):
    """Job-end notifications: email (``smtp``) and webhooks, sent by a thread of the server."""

    smtp: Smtp = Smtp()
    every: Seconds = 5.0  # how often the sender looks for ended jobs and due sends
    attempts: Annotated[int, Field(ge=1, le=100)] = 6  # then a notification is failed
    backoff: Seconds = 30.0  # first retry after this, doubling each time
    backoff_max: Seconds = 3600.0
    timeout: Seconds = 10.0  # one webhook POST


# a lifetime in days; None: kept forever
Lifetime = Annotated[float, Field(gt=0)] | None


def _default_tags() -> dict[str, float | None]:
    return {"scratch": 30.0, "60days": 60.0, "120days": 120.0, "audit": None}


class Retention(_Section):
    """How long a job's logs are kept after it ends, by its retention tag (Beaker's)."""

    tags: dict[str, Lifetime] = Field(default_factory=_default_tags)
    default: str = "scratch"  # the tag of a job that names none
    prune_every: Seconds = 3600.0  # how often the server prunes expired logs

    @model_validator(mode="after")
    def _default_is_a_tag(self) -> Retention:
        if self.default not in self.tags:
            raise ValueError(f"default {self.default!r} is not one of the tags")
        return self


def scheduler_config(
    aging: Aging, retry: Retry, holds: Holds, queue: Queue | None = None
) -> SchedulerConfig:
    """The core's configuration from the policy sections (the service's and a scenario's)."""
    queue = queue or Queue()
    return SchedulerConfig(
        aging_bump_after=aging.bump_after,
        aging_ceiling=aging.ceiling,
        retry_hard_limit=retry.hard_limit,
        holds_per_lab=holds.per_lab,
        holds_max_age=holds.max_age,
        predictive=queue.predictive,
        spv_base=queue.spv_base,
        tick=queue.tick,
        aging_ticks=queue.aging_ticks,
        lock_levels=queue.lock_levels,
        running_limit=queue.running_limit,
        lab_running_limits=tuple(sorted(queue.lab_running_limits.items())),
        backfill_on_predictions=queue.backfill_on_predictions,
    )


class Settings(_Section):
    """Everything a labq process can be told."""

    database: str | None = None
    data_dir: str | None = None  # workspaces and archived logs live under it
    server: Server = Server()
    limits: Limits = Limits()
    aging: Aging = Aging()
    retry: Retry = Retry()
    holds: Holds = Holds()
    queue: Queue = Queue()
    health: Health = Health()
    consistency_every: Seconds = 60.0
    heartbeat_every: Seconds = 5.0
    labs: dict[str, LabSettings] = Field(default_factory=dict)
    fetch: Fetch = Fetch()
    notify: Notify = Notify()
    retention: Retention = Retention()

    def scheduler(self) -> SchedulerConfig:
        """What the scheduling core needs of these settings."""
        return scheduler_config(self.aging, self.retry, self.holds, self.queue)

    def lab(self, name: str) -> LabSettings:
        """A lab's settings, the defaults when the file says nothing of it."""
        return self.labs.get(name, LabSettings())

    def data_path(self) -> Path:
        """Where workspaces and logs go."""
        base = (
            self.data_dir or os.environ.get("LABQ_DATA_DIR") or platformdirs.user_data_dir("labq")
        )
        return Path(base)


def load_settings(path: str | Path | None = None) -> Settings:
    """Settings from a file (or ``LABQ_CONFIG``), with ``LABQ_DB``/``LABQ_DATA_DIR`` on top."""
    path = path or os.environ.get("LABQ_CONFIG")
    data: object = {}
    lines = LineMap()
    source = str(path) if path else "defaults"
    if path:
        data, lines = load_yaml(read_document(path), source=source)
        if data is None:
            data = {}
    if not isinstance(data, dict):
        raise InputError("a settings file is a mapping", source=source, line=1)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source=source, lines=lines) from None
    overrides: dict[str, object] = {}
    if os.environ.get("LABQ_DB"):
        overrides["database"] = os.environ["LABQ_DB"]
    if os.environ.get("LABQ_DATA_DIR"):
        overrides["data_dir"] = os.environ["LABQ_DATA_DIR"]
    return settings.model_copy(update=overrides) if overrides else settings
