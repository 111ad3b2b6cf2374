"""A lab's VM provider in the settings file: refused in one line naming the place."""

from __future__ import annotations

import pytest

from labq.config import load_settings
from labq.errors import InputError

GOOD = """
labs:
  east:
    vms:
      kind: command
      max_vms: 3
      max_vcpus: 4
      max_memory: 4096
      sizes: [{name: small, cpus: 1, memory: 1024}, {name: big, cpus: 2, memory: 2048, count: 1}]
      command: {create: [mk, "{name}"], destroy: [rm, "{name}"], list: [ls]}
"""


def test_a_provider_is_read_with_its_quota(tmp_path):
    path = tmp_path / "labq.yaml"
    path.write_text(GOOD)
    vms = load_settings(path).lab("east").vms
    assert vms is not None
    assert vms.kind == "command"
    assert vms.quota("east").max_vcpus == 4


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("count: 1", "count: 3"), "the sizes' counts need 3 VMs, 6 vCPUs"),
        (("kind: command", "kind: ovirt"), "kind"),
        (("      command: {", "      hooks: {"), "hooks"),
        (("max_vms: 3", "max_vms: 0"), "max_vms"),
    ],
)
def test_a_bad_provider_is_refused_in_one_line_naming_the_place(tmp_path, change, problem):
    path = tmp_path / "labq.yaml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(InputError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert "\n" not in message
    assert "labs.east.vms" in message
    assert problem in message
