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
    from labq.scheduler.index import Queue

    queue, config, policy = Queue(), SchedulerConfig(), AccessPolicy()
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
