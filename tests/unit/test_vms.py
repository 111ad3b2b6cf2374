"""The VM contract's own rules: names, sizes, boot sources."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.vms import NAME_PREFIX, VmRequest, VmSize, check_name, name_for, set_of, vm_name
from labq.errors import ProviderError


@given(st.lists(st.one_of(st.text(max_size=12), st.integers(0, 10**6)), min_size=1, max_size=3))
def test_vm_name_is_valid_or_refused_in_one_line(parts):
    try:
        name = vm_name(*parts)
    except ProviderError as exc:
        error = str(exc)
        name = None
    if name is None:
        assert "\n" not in error
    else:
        assert name.startswith(NAME_PREFIX)
        assert check_name(name) == name


def test_vm_name_of_a_recipe():
    assert vm_name("r", 42) == "labq-r-42"
    assert vm_name("Lab A", "x_1") == "labq-lab-a-x-1"


@pytest.mark.parametrize("name", ["r-1", "labq-", "labq-UPPER", "labq-a/b", "labq-" + "a" * 60])
def test_bad_names_are_refused(name):
    with pytest.raises(ProviderError, match="VM name"):
        VmRequest(name, "lab")


def test_size_is_checked():
    with pytest.raises(ProviderError, match="memory_mb is 8, at least 64"):
        VmSize(memory_mb=8)


def test_boot_source_is_one_of_image_or_kernel():
    with pytest.raises(ProviderError, match="not both"):
        VmRequest("labq-a", "lab", image="x.qcow2", kernel="k", initrd="i")
    with pytest.raises(ProviderError, match="needs an initrd"):
        VmRequest("labq-a", "lab", kernel="k")
    assert VmRequest("labq-a", "lab").image is None


@given(st.sampled_from(["vm1.lab1.vms", "vm12.east.vms", "a"]), st.integers(1, 10**9))
def test_a_vms_name_gives_back_its_set(slot, set_id):
    assert set_of(name_for(slot, set_id)) == set_id
    assert set_of(vm_name("someone", "else")) is None
