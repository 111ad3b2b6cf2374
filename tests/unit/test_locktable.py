"""The lock service's rules, in memory: conflicts, all-or-nothing, FIFO, deadlock refusal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from labq.domain.contention import LockNeeds
from labq.domain.locks import parse_locks
from labq.domain.locktable import ALL, Grant, LockTable, declared_grants

X = Grant("storage", "nfs1", exclusive=True)
S = Grant("storage", "nfs1")
NET = Grant("network", "vlan7", exclusive=True)


def test_conflicts_need_the_same_resource_and_one_exclusive_side() -> None:
    assert X.conflicts(S)
    assert not S.conflicts(Grant("storage", "nfs1"))
    assert not X.conflicts(Grant("storage", "nfs2", exclusive=True))
    assert not X.conflicts(Grant("network", "nfs1", exclusive=True))
    assert Grant("storage", ALL).conflicts(X)  # every name of the level


def test_a_set_takes_its_declared_named_locks_and_its_lab_shared_or_whole() -> None:
    needs = LockNeeds.of(
        parse_locks({"storage": {"exclusive": ["nfs1"]}, "network": {"shared": "all"}})
    )
    assert declared_grants(needs, "lab1") == (
        Grant("network", ALL),
        Grant("storage", "nfs1", exclusive=True),
        Grant("whole_lab", "lab1"),
    )
    whole = LockNeeds.of(parse_locks({"whole_lab": True, "pool": {"shared": "unknown"}}))
    assert declared_grants(whole, "lab1") == (Grant("whole_lab", "lab1", exclusive=True),)


def test_two_requests_of_one_set_wait_side_by_side_and_keep_their_places() -> None:
    table = LockTable()
    assert table.acquire(1, [X, NET], 0).granted
    assert not table.acquire(2, [X], 1).granted  # one task of set 2
    assert not table.acquire(2, [NET], 2).granted  # another task of set 2, elsewhere
    assert not table.acquire(3, [S], 3).granted
    assert not table.acquire(2, [X], 4).granted  # asking again keeps the first place
    assert [(w.owner, w.grants) for w in table.waiters] == [(2, (X,)), (2, (NET,)), (3, (S,))]
    served = table.release(1)
    assert [(r.owner, r.grants) for r in served] == [(2, (X,)), (2, (NET,))]
    assert table.waiting_on(3)[0].owner == 2
    assert [(r.owner, r.grants) for r in table.release(2, [X])] == [(3, (S,))]


OWNERS = st.integers(1, 4)
GRANTS = st.lists(
    st.builds(Grant, st.sampled_from(["storage", "network"]), st.sampled_from(["a", "b", ALL]),
              st.booleans()),
    min_size=1,
    max_size=3,
)  # fmt: skip
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), OWNERS, GRANTS, st.booleans()),
        st.tuples(st.just("release"), OWNERS, st.none(), st.just(False)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS)
def test_no_two_owners_ever_hold_conflicting_locks_and_nobody_waits_in_a_cycle(steps) -> None:
    table = LockTable()
    for now, (action, owner, grants, wait) in enumerate(steps):
        if action == "acquire":
            outcome = table.acquire(owner, grants, float(now), wait=wait)
            if outcome.granted:
                assert set(grants) <= table.held[owner]  # all of it
        else:
            table.release(owner)
        held = [(o, g) for o, gs in table.held.items() for g in gs]
        for o1, g1 in held:
            for o2, g2 in held:
                assert o1 == o2 or not g1.conflicts(g2), (o1, g1, o2, g2)
        # the waits-for graph has no cycle
        edges = {
            o: {b.owner for b in table.waiting_on(o)} for o in {w.owner for w in table.waiters}
        }
        assert all(o not in _reachable(edges, o) for o in edges)


def _reachable(edges: dict[int, set[int]], start: int) -> set[int]:
    seen: set[int] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen
