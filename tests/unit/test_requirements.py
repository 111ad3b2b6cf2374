import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain import requirements as req
from labq.domain.model import System

BOX = System(
    fqdn="a1.lab1",
    lab="lab1",
    arch="x86_64",
    attributes={"memory_mb": 65536, "machine_type": "smithi", "cpus": "16"},
    pools=frozenset({"perf", "shared"}),
    owner="alice",
)


def holds(native):
    return req.matches(req.parse(native), BOX.facts())


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        ({"arch": "x86_64"}, True),
        ({"arch": "aarch64"}, False),
        ({"memory_mb": {">=": 4096}}, True),
        ({"memory_mb": {">": 65536}}, False),
        ({"memory_mb": {">=": 4096, "<": 8192}}, False),
        ({"cpus": {">": 8}}, True),  # "16" is text on the system but compares as a number
        ({"cpus": {"<": 9}}, False),
        ({"fqdn": {"like": "A_.LAB%"}}, True),  # like is case-insensitive SQL LIKE
        ({"fqdn": {"like": "b%"}}, False),
        ({"pool": "perf"}, True),
        ({"pool": {"!=": "perf"}}, False),
        ({"pool": {"!=": "gpu"}}, True),
        ({"pool": {"like": "sha%"}}, True),
        ({"gpu": "yes"}, False),  # a missing property satisfies only !=
        ({"gpu": {"!=": "yes"}}, True),
        ({"arch": ["aarch64", "x86_64"]}, True),
        ({"or": [{"arch": "ppc64le"}, {"owner": "alice"}]}, True),
        ({"not": {"machine_type": "smithi"}}, False),
        ({"and": [{"lab": "lab1"}, {"not": {"pool": "gpu"}}]}, True),
        ({}, True),
        (None, True),
        ({"or": []}, False),
    ],
)
def test_evaluation(native, expected):
    assert holds(native) is expected


@pytest.mark.parametrize(
    ("native", "place", "problem"),
    [
        ({"arch": {"=~": "x"}}, "host.arch", "unknown operator '=~'"),
        ({"or": {"arch": "x"}}, "host.or", "takes a list of mappings"),
        (
            {"or": [{"arch": "x"}, {"cpus": {"<": []}}]},
            "host.or[1].cpus",
            "must be text or a number",
        ),
        ({"pool": {">": "a"}}, "host.pool", "only be compared with =, != or like"),
        ({"memory_mb": {"like": 5}}, "host.memory_mb", "needs a text pattern"),
        ({"arch": {}}, "host.arch", "at least one operator"),
        ("x86_64", "host", "expected a mapping"),
        ({"bad name!": 1}, "host.bad name!", "not a property name"),
    ],
)
def test_bad_expressions_name_the_place(native, place, problem):
    with pytest.raises(req.RequirementError) as caught:
        req.parse(native)
    assert caught.value.path == place
    assert problem in caught.value.problem


def test_signature_ignores_term_order_but_not_meaning():
    a = req.parse({"arch": "x86_64", "memory_mb": {">=": 4096}})
    b = req.parse({"memory_mb": {">=": 4096}, "arch": "x86_64"})
    c = req.parse({"memory_mb": {">": 4096}, "arch": "x86_64"})
    assert req.signature(a) == req.signature(b)
    assert req.signature(a) != req.signature(c)


def test_properties_lists_everything_read():
    expr = req.parse({"arch": "x", "or": [{"pool": "p"}, {"not": {"cpus": {">": 1}}}]})
    assert req.properties(expr) == {"arch", "pool", "cpus"}


leaves = st.builds(
    lambda prop, op, value: {prop: {op: value}},
    st.sampled_from(["arch", "memory_mb", "cpus", "machine_type", "gpu", "fqdn"]),
    st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
    st.one_of(st.integers(-10, 100000), st.sampled_from(["x86_64", "smithi", "16", "a1.lab1"])),
)
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: {"and": xs}),
        st.lists(inner, max_size=3).map(lambda xs: {"or": xs}),
        inner.map(lambda x: {"not": x}),
    ),
    max_leaves=8,
)


@given(trees)
def test_native_round_trip_keeps_meaning(native):
    expr = req.parse(native)
    again = req.parse(req.to_native(expr))
    assert req.signature(again) == req.signature(expr)
    assert req.matches(again, BOX.facts()) == req.matches(expr, BOX.facts())


@given(trees)
def test_negation_is_the_complement(native):
    expr = req.parse(native)
    assert req.matches(req.Negation(expr), BOX.facts()) is not req.matches(expr, BOX.facts())
