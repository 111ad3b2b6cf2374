from hypothesis import given, settings
from hypothesis import strategies as st

from labq.scheduler.placement import gang_match, is_complete


def reference_size(demands, candidates, taken=()):
    """Textbook Kuhn matching on single recipes, for comparison."""
    units = [k for k, n in demands.items() for _ in range(n)]
    owner = {}

    def try_unit(u, seen):
        for s in candidates.get(units[u], ()):
            if s in taken or s in seen:
                continue
            seen.add(s)
            if s not in owner or try_unit(owner[s], seen):
                owner[s] = u
                return True
        return False

    return sum(try_unit(u, set()) for u in range(len(units)))


def test_first_fit_would_fail_but_matching_places_the_set():
    # recipe a can use x or y, recipe b only x: first-fit gives x to a and strands b
    demands = {"a": 1, "b": 1}
    candidates = {"a": ["x", "y"], "b": ["x"]}
    given_ = gang_match(demands, candidates)
    assert is_complete(demands, given_)
    assert given_ == {"a": ["y"], "b": ["x"]}


def test_taken_systems_are_not_used():
    given_ = gang_match({"a": 2}, {"a": ["x", "y", "z"]}, taken=["y"])
    assert given_ == {"a": ["x", "z"]}


def test_preference_order_is_kept_when_it_costs_nothing():
    assert gang_match({"a": 2}, {"a": ["p", "q", "r"]}) == {"a": ["p", "q"]}


def test_a_wide_class_is_cheap():
    systems = [f"n{i}" for i in range(2000)]
    given_ = gang_match({"wide": 1500}, {"wide": systems})
    assert len(given_["wide"]) == 1500


problems = st.integers(1, 4).flatmap(
    lambda classes: st.tuples(
        st.fixed_dictionaries({k: st.integers(0, 3) for k in range(classes)}),
        st.fixed_dictionaries(
            {
                k: st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6)
                for k in range(classes)
            }
        ),
        st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=2),
    )
)


@settings(max_examples=300)
@given(problems)
def test_matching_is_valid_and_maximum(problem):
    demands, candidates, taken = problem
    result = gang_match(demands, candidates, taken=taken)
    used = [s for systems in result.values() for s in systems]
    assert len(used) == len(set(used)), "a system given twice"
    assert not set(used) & set(taken)
    for klass, systems in result.items():
        assert len(systems) <= demands[klass]
        assert set(systems) <= set(candidates[klass])
    assert len(used) == reference_size(demands, candidates, set(taken))


@st.composite
def _lab_of_kinds(draw):
    """Systems of a few kinds (the classes they meet), waiting counts per class, a subset
    free, some of it borrowed."""
    classes = ["c0", "c1", "c2"]
    n = draw(st.integers(2, 30))
    kinds = [frozenset(draw(st.sets(st.sampled_from(classes), max_size=3))) for _ in range(n)]
    waiting = {k: draw(st.integers(0, 4)) for k in classes}
    free = draw(st.sets(st.integers(0, n - 1), min_size=1))
    avoid = draw(st.sets(st.sampled_from(sorted(free))))
    count = draw(st.integers(1, len(free)))
    return kinds, waiting, {f"s{i:02}" for i in free}, {f"s{i:02}" for i in avoid}, count


@given(_lab_of_kinds())
@settings(max_examples=300, deadline=None)
def test_picking_by_kind_gives_the_order_of_picking_one_by_one(lab):
    from labq.domain.model import AccessPolicy
    from labq.scheduler.freshness import Freshness
    from labq.scheduler.index import ClassIndex
    from labq.scheduler.placement import Placer

    kinds, waiting, free, avoid, count = lab
    index = ClassIndex()
    for i, kind in enumerate(kinds):
        fqdn = f"s{i:02}"
        index.classes_of[fqdn] = set(kind)
        index._kind(fqdn)
    placer = Placer(index, {}, AccessPolicy(), waiting, Freshness())
    demand = {f: sum(waiting[c] for c in index.kinds_of[f]) for f in free}
    expected = sorted(free, key=lambda f: (f in avoid, demand[f], f))[:count]
    assert placer._best_by_kind(free, count, avoid) == expected
