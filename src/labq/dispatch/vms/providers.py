"""A lab's VM provider from its settings (``labs.NAME.vms``)."""

from __future__ import annotations

from pathlib import Path

from labq.domain.vms import VmProvider
from labq.vmconfig import VmProvider as ProviderSettings


def provider_for(settings: ProviderSettings, data_dir: Path) -> VmProvider:
    """The provider the settings describe; its keys and disks under ``data_dir/vms``."""
    state_dir = data_dir / "vms"
    if settings.kind == "command":
        from labq.dispatch.vms.command import CommandProvider

        assert settings.command is not None  # the settings check it
        return CommandProvider(settings.command, state_dir=state_dir, user=settings.user)
    from labq.dispatch.vms.libvirt import LibvirtProvider

    options = {k: v for k, v in settings.options.items() if k not in ("user", "state_dir")}
    return LibvirtProvider(state_dir=state_dir, user=settings.user, **options)  # type: ignore[arg-type]
