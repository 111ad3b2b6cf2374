"""A lab's VM provider: its kind, quota, sizes and options (``labs.NAME.vms`` in settings).

See docs/operations.md § VM providers and docs/scheduling.md § VMs made on demand.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from labq.scheduler.vms import VmQuota, VmShape, slot_plan

Positive = Annotated[int, Field(ge=1)]
Seconds = Annotated[float, Field(gt=0)]
Argv = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VmSize(_Section):
    """A size the provider offers; ``count`` slots of it (none: what the quota leaves)."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    cpus: Positive
    memory: Positive  # MiB
    count: Annotated[int, Field(ge=0)] | None = None


class VmQuotaSettings(_Section):
    """What a provider may make at once, and what its VMs look like to host requirements."""

    hypervisor: Annotated[str, Field(min_length=1)] = "KVM"
    arch: Annotated[str, Field(min_length=1)] = "x86_64"
    max_vms: Positive
    max_vcpus: Positive
    max_memory: Positive  # MiB
    sizes: Annotated[list[VmSize], Field(min_length=1)]
    pools: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _fits(self) -> VmQuotaSettings:
        names = [s.name for s in self.sizes]
        if len(set(names)) != len(names):
            raise ValueError("sizes: a size name is listed twice")
        plan = slot_plan(self.quota("lab"))  # raises ValueError when counts exceed it
        if not plan:
            raise ValueError("the quota leaves room for no VM of any size")
        return self

    def quota(self, lab: str) -> VmQuota:
        """The core's view of this quota for ``lab``."""
        return VmQuota(
            lab=lab,
            hypervisor=self.hypervisor,
            max_vms=self.max_vms,
            max_vcpus=self.max_vcpus,
            max_memory=self.max_memory,
            sizes=tuple(VmShape(s.name, s.cpus, s.memory, s.count) for s in self.sizes),
            arch=self.arch,
            pools=frozenset(self.pools),
        )


class CommandHooks(_Section):
    """The ``command`` provider's hooks: argv lists, run without a shell, printing JSON.

    ``{name}``, ``{size}``, ``{cpus}``, ``{memory}``, ``{lab}``, ``{public_key}`` (a
    file) and the boot source (``{image}``, ``{kernel}``, ``{initrd}``, ``{kernel_args}``;
    empty for the cloud's default) are filled in; see :mod:`labq.dispatch.vms.command`.
    """

    create: Argv
    destroy: Argv
    list: Argv
    timeout: Seconds = 600.0


class VmProvider(VmQuotaSettings):
    """A lab's VM provider (``kind``) with its quota and how labq reaches its VMs."""

    kind: Literal["libvirt", "command"]
    user: Annotated[str, Field(min_length=1)] = "root"  # who tasks log in as in a VM
    workspace: Annotated[str, Field(min_length=1)] = "labq-workspace"  # in the VM, as ssh's
    create_timeout: Seconds = 600.0  # create + reachable, then the creation failed
    command: CommandHooks | None = None
    # the libvirt provider's options (uri, image, ...: see docs/operations.md)
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _hooks_given(self) -> VmProvider:
        if self.kind == "command" and self.command is None:
            raise ValueError("the command provider needs command: {create, destroy, list}")
        return self
