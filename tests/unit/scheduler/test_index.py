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
