import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labq.domain.requirements import matches, parse
from labq.scheduler.entries import SystemEntry, ViabilityClass
from labq.scheduler.index import ClassIndex

values = st.sampled_from(["x", "y", "16", 16, 16.0, 8, True, "true"])
facts = st.fixed_dictionaries({"kind": values, "cpus": values})
requirements = st.lists(
    st.tuples(
        st.sampled_from(["kind", "cpus", "fqdn"]), st.sampled_from(["=", "!=", ">="]), values
    ),
    max_size=3,
).map(lambda terms: parse({"and": [{p: {op: v}} for p, op, v in terms]}))


@settings(max_examples=200)
@given(
    st.lists(facts, min_size=1, max_size=8),
    st.lists(requirements, min_size=1, max_size=6),
    st.booleans(),
)
def test_indexed_membership_equals_evaluating_everything(all_facts, reqs, classes_first):
    systems = [
        SystemEntry(f"s{i}", "lab", {**f, "fqdn": f"s{i}"}, frozenset())
        for i, f in enumerate(all_facts)
    ]
    index = ClassIndex()
    classes = [ViabilityClass(r) for r in reqs]
    if classes_first:
        keys = [index.add_class(k) for k in classes]
        for system in systems:
            index.add_system(system)
    else:
        for system in systems:
            index.add_system(system)
        keys = [index.add_class(k) for k in classes]
    for key, klass in zip(keys, classes, strict=True):
        expected = {s.fqdn for s in systems if matches(klass.requirement, s.facts)}
        assert index.systems_of[key] == expected


def test_a_queue_refuses_a_walk_inside_a_walk_of_it_and_loses_nothing() -> None:
    # a nested walk would prune heaps the outer walk had emptied for a while: sets vanished
    from labq.domain.model import AccessPolicy
    from labq.domain.priority import Priority
    from labq.scheduler.entries import RecipeEntry, SchedulerConfig, SetEntry
    from labq.scheduler.freshness import Freshness
    from labq.scheduler.index import Queue

    queue, config, policy = Queue(Freshness()), SchedulerConfig(), AccessPolicy()
    system = SystemEntry(fqdn="s1", lab="lab1", facts={}, pools=frozenset())
    sets = {}
    for i in (1, 2):
        recipe = RecipeEntry(i, i, 0, "k")
        sets[i] = SetEntry(
            id=i, job=i, priority=Priority.NORMAL, submitted=float(i), recipes=[recipe]
        )
        queue.push(sets[i], "k")
    outer = queue.candidates(system, {"k"}, sets, policy, 0.0, config)
    assert next(outer)[0].id == 1
    inner = queue.candidates(system, {"k"}, sets, policy, 0.0, config)
    with pytest.raises(RuntimeError, match="under way"):
        next(inner)
    outer.close()
    again = queue.candidates(system, {"k"}, sets, policy, 0.0, config)
    assert [entry.id for entry, _ in again] == [1, 2]


# Inventory facts and the terms that must not be looked up by value: an empty value
# (it matches a system without the property), a date (any time of that day), a device.
inventory_values = st.sampled_from(["", "KVM", "2013-10-10", "2013-10-10T08:00:00Z", 3])
inventory_facts = st.fixed_dictionaries(
    {},
    optional={
        "hypervisor": inventory_values,
        "last_inventoried": inventory_values,
        "device": st.lists(
            st.fixed_dictionaries({}, optional={"driver": st.sampled_from(["e1000e", "igb"])}),
            max_size=2,
        ).map(tuple),
        "cpu_flag": st.frozensets(st.sampled_from(["vmx", "sse2"])),
    },
)
inventory_terms = st.one_of(
    st.tuples(
        st.sampled_from(["hypervisor", "last_inventoried"]),
        st.sampled_from(["=", "!=", "<"]),
        inventory_values,
    ).map(lambda t: {t[0]: {t[1]: t[2]}}),
    st.sampled_from(["", "vmx"]).map(lambda v: {"cpu_flag": v}),
    st.sampled_from(["e1000e", "igb"]).map(lambda v: {"device": {"driver": v}}),
    st.just({"not": {"device": {}}}),
)


@settings(max_examples=300)
@given(
    st.lists(inventory_facts, min_size=1, max_size=8),
    st.lists(st.lists(inventory_terms, max_size=3), min_size=1, max_size=6),
    st.booleans(),
)
def test_inventory_requirements_are_indexed_correctly(all_facts, term_lists, classes_first):
    systems = [SystemEntry(f"s{i}", "lab", f, frozenset()) for i, f in enumerate(all_facts)]
    classes = [ViabilityClass(parse({"and": terms})) for terms in term_lists]
    index = ClassIndex()
    if classes_first:
        keys = [index.add_class(k) for k in classes]
        for system in systems:
            index.add_system(system)
    else:
        for system in systems:
            index.add_system(system)
        keys = [index.add_class(k) for k in classes]
    for key, klass in zip(keys, classes, strict=True):
        expected = {s.fqdn for s in systems if matches(klass.requirement, s.facts)}
        assert index.systems_of[key] == expected
