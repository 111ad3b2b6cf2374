"""Inventory facts and Beaker's meaning of requirements on them.

A ``<device>`` is met by one device that has every attribute asked; an empty
value is a missing one; ``last_inventoried`` compares by day and empty means never.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain import requirements as req
from labq.domain.inventory import Inventory, InventoryError, parse_inventory
from labq.domain.model import System

NIC = {"bus": "pci", "driver": "e1000e", "vendor_id": "8086", "device_id": "10d3", "type": "NET"}
HBA = {"bus": "pci", "driver": "mpt3sas", "vendor_id": "1000", "device_id": "0097", "type": "SCSI"}
INVENTORY = {
    "devices": [NIC, HBA],
    "disks": [
        {"size": 500_107_862_016, "sector_size": 512, "phys_sector_size": 4096, "model": "WD5003"},
        {
            "size": 240_057_409_536,
            "sector_size": 512,
            "phys_sector_size": 512,
            "model": "Intel SSD",
        },
    ],
    "cpu_flags": ["sse2", "vmx", "avx2"],
    "last_inventoried": "2013-10-10T14:30:00+02:00",
}


def box(inventory=None, **attributes):
    inv = parse_inventory(inventory) if inventory is not None else Inventory()
    return System(fqdn="a.lab", lab="lab", attributes=attributes, inventory=inv)


def holds(native, system):
    return req.matches(req.parse(native), system.facts())


INVENTORIED = box(INVENTORY)
BARE = box()


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        ({"device": {"driver": "e1000e"}}, True),
        ({"device": {"driver": "e1000e", "vendor_id": "8086"}}, True),
        # any one device must have *all* the attributes: the NIC's driver with the HBA's vendor
        ({"device": {"driver": "e1000e", "vendor_id": "1000"}}, False),
        ({"device": {"driver": {"like": "mpt%"}, "type": "SCSI"}}, True),
        ({"not": {"device": {"driver": "igb"}}}, True),
        ({"not": {"device": {"driver": "e1000e", "bus": "pci"}}}, False),
        ({"device": {}}, True),  # some device at all
        ({"disk": {"size": {">": 400_000_000_000}, "phys_sector_size": 4096}}, True),
        ({"disk": {"size": {">": 400_000_000_000}, "model": {"like": "intel%"}}}, False),
        ({"disk_count": 2}, True),
        ({"disk_space": {">=": 740_165_271_552}}, True),
        ({"disk_space": {">": 740_165_271_552}}, False),
        ({"cpu_flag": "vmx"}, True),
        ({"cpu_flag": {"!=": "vmx"}}, False),
        ({"cpu_flag": {"!=": "svm"}}, True),
        # stored in UTC: 14:30 at +02:00 is 12:30 UTC the same day
        ({"last_inventoried": "2013-10-10"}, True),
        ({"last_inventoried": {"!=": "2013-10-10"}}, False),
        ({"last_inventoried": {">": "2013-10-09"}}, True),
        ({"last_inventoried": {">": "2013-10-10"}}, False),
        ({"last_inventoried": {"<=": "2013-10-10"}}, True),
        ({"last_inventoried": {"<": "2013-10-10"}}, False),
        ({"last_inventoried": {">=": "2013-10-10"}}, True),
        ({"last_inventoried": ""}, False),  # empty means never inventoried
        ({"last_inventoried": {"!=": ""}}, True),
    ],
)
def test_requirements_on_an_inventoried_system(native, expected):
    assert holds(native, INVENTORIED) is expected


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        ({"device": {}}, False),
        ({"device": {"driver": "e1000e"}}, False),
        ({"not": {"device": {"driver": "e1000e"}}}, True),
        ({"disk": {}}, False),
        ({"disk_count": {">=": 0}}, False),  # never counted is not zero
        ({"cpu_flag": "vmx"}, False),
        ({"last_inventoried": ""}, True),
        ({"last_inventoried": {"!=": ""}}, False),
        ({"last_inventoried": {"<": "2030-01-01"}}, False),
        ({"last_inventoried": {">": "2000-01-01"}}, False),
    ],
)
def test_requirements_on_a_system_never_inventoried(native, expected):
    assert holds(native, BARE) is expected


@pytest.mark.parametrize(
    ("hypervisor", "bare_metal"),
    [(None, True), ("", True), ("KVM", False)],
)
def test_an_empty_value_equals_a_missing_property(hypervisor, bare_metal):
    system = box() if hypervisor is None else box(hypervisor=hypervisor)
    assert holds({"hypervisor": ""}, system) is bare_metal
    assert holds({"hypervisor": {"!=": ""}}, system) is not bare_metal
    assert holds({"hypervisor": {"like": ""}}, system) is bare_metal
    assert holds({"hypervisor": {">": ""}}, system) is False
    assert holds({"hypervisor": {"!=": "KVM"}}, system) is bare_metal


def test_an_inventory_with_no_disks_counts_zero():
    empty = box({"disks": [], "devices": [], "cpu_flags": []})
    assert holds({"disk_count": 0}, empty)
    assert holds({"disk_space": 0}, empty)
    assert not holds({"disk": {}}, empty)
    assert not holds({"device": {}}, empty)
    assert holds({"cpu_flag": ""}, empty)  # no flags is an empty value


def test_the_inventory_wins_over_an_attribute_of_the_same_name():
    system = box({"disks": []}, disk_count=3)
    assert holds({"disk_count": 0}, system)


def test_the_document_round_trips():
    inventory = parse_inventory(INVENTORY)
    assert inventory.last_inventoried == "2013-10-10T12:30:00Z"
    assert parse_inventory(inventory.to_json()) == inventory
    assert parse_inventory({}) == Inventory()


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ([], "expected a mapping"),
        ({"gpus": []}, "unknown key 'gpus'"),
        ({"devices": {}}, "inventory.devices: expected a list"),
        ({"devices": [{"colour": "red"}]}, "inventory.devices[0]: unknown device field 'colour'"),
        ({"devices": [{"driver": 7}]}, "inventory.devices[0].driver: expected text"),
        ({"disks": [{"model": "x"}]}, "inventory.disks[0]: a disk needs its size"),
        ({"disks": [{"size": "1TB"}]}, "inventory.disks[0].size: expected a whole number"),
        ({"disks": [{"size": -1}]}, "expected a whole number"),
        ({"disks": [{"size": True}]}, "expected a whole number"),
        ({"cpu_flags": "sse2"}, "inventory.cpu_flags: expected a list"),
        ({"last_inventoried": "yesterday"}, "expected an ISO date-time, got 'yesterday'"),
        ({"last_inventoried": 5}, "expected an ISO date-time"),
    ],
)
def test_bad_documents_say_where_and_what(doc, words):
    with pytest.raises(InventoryError) as caught:
        parse_inventory(doc)
    assert words in str(caught.value)


def test_collections_read_and_write_in_the_native_form():
    native = {"and": [{"device": {"driver": "e1000e"}}, {"not": {"disk": {"size": {">": 1}}}}]}
    parsed = req.parse(native)
    assert req.to_native(parsed) == native
    assert req.parse(req.to_native(parsed)) == parsed
    assert req.properties(parsed) == frozenset({"device", "disk"})
    other_order = {"and": [native["and"][1], native["and"][0]]}
    assert req.signature(req.parse(other_order)) == req.signature(parsed)
    with pytest.raises(req.RequirementError, match="'device' takes a mapping"):
        req.parse({"device": "e1000e"})


# --- a device requirement against an independent evaluation -----------------------

FIELDS = ["driver", "vendor_id", "type"]
WORDS = ["e1000e", "igb", "8086", "15b3", "NET", ""]
devices = st.lists(
    st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(WORDS[:-1])), max_size=4
)
wanted = st.dictionaries(
    st.sampled_from(FIELDS), st.tuples(st.sampled_from(["=", "!=", "like"]), st.sampled_from(WORDS))
)


def one_device_meets(device, asked):
    """Beaker's reading, restated: every asked attribute holds on this one device."""
    for field, (op, value) in asked.items():
        have = device.get(field) or None
        if value == "":
            ok = (have is None) if op in ("=", "like") else (have is not None)
        elif have is None:
            ok = op == "!="
        elif op == "like":
            ok = have.lower() == value.lower()  # no wildcards among WORDS
        else:
            ok = (have == value) is (op == "=")
        if not ok:
            return False
    return True


@given(devices, wanted, st.booleans())
def test_a_device_requirement_is_one_device_meeting_all_of_it(devs, asked, negated):
    system = box({"devices": devs})
    term = {"device": {f: {op: v} for f, (op, v) in asked.items()}}
    expected = any(one_device_meets(d, asked) for d in devs)
    if negated:
        term, expected = {"not": term}, not expected
    assert holds(term, system) is expected


def test_no_pool_at_all_is_an_empty_value_as_beakers_group_has_it():
    pooled = System(fqdn="p.lab", lab="lab", pools=frozenset({"perf"}))
    assert holds({"pool": ""}, BARE)
    assert not holds({"pool": ""}, pooled)
    assert holds({"pool": {"!=": ""}}, pooled)
    assert not holds({"pool": {"!=": ""}}, BARE)
