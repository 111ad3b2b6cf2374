"""Queue filter rules and reason rate limits, pure: predicates, the deciding rule, buckets."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.filters import (
    ACTIONS,
    FilterError,
    JobFacts,
    Predicate,
    Rule,
    check_reason,
    check_rule,
    decide,
    make_predicate,
    parse_predicate,
    reason_buckets,
)

JOB = JobFacts(12, "alice", "kernel-qe", "nightly kernel run", "cron rate-limit:2:nightly")
LONE = JobFacts(3, "bob")  # no group (everybody), no whiteboard, no reason


@pytest.mark.parametrize(
    ("text", "job", "holds"),
    [
        ("job=12", JOB, True),
        ("job!=12", JOB, False),
        ("job<12", JOB, False),
        ("job<=12", JOB, True),
        ("job>3", JOB, True),
        ("job >= 13", JOB, False),
        ("owner=alice", JOB, True),
        ("owner!=alice", JOB, False),
        ("group=kernel-qe", JOB, True),
        ("group=everybody", LONE, True),
        ("whiteboard~nightly*", JOB, True),
        ("whiteboard~*kernel*", JOB, True),
        ("whiteboard~Nightly*", JOB, False),  # globs are case-sensitive
        ("whiteboard=", LONE, True),  # missing text is empty
        ("whiteboard~*", LONE, True),
        ("reason~*rate-limit:2:*", JOB, True),
        ("reason!=", JOB, True),
        ("owner=a=b", JOB, False),  # the value is everything after the first operator
    ],
)
def test_predicates(text: str, job: JobFacts, holds: bool) -> None:
    predicate = parse_predicate(text)
    assert predicate.holds(job) is holds
    assert parse_predicate(str(predicate)) == predicate
    assert make_predicate(**predicate.to_native()) == predicate  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("colour=red", "unknown field 'colour'"),
        ("owner", "is not a predicate"),
        ("=alice", "is not a predicate"),
        ("job~1*", "job takes one of = != < <= > >="),
        ("job=first", "job compares with a job id"),
        ("owner<alice", "owner takes one of = != ~"),
    ],
)
def test_bad_predicates(text: str, problem: str) -> None:
    with pytest.raises(FilterError, match=problem):
        parse_predicate(text)


def rule(
    rule_id: int, action: str, *where: str, priority: int = 0, rate: int | None = None
) -> Rule:
    return Rule(rule_id, priority, action, tuple(parse_predicate(w) for w in where), rate, "why")


def test_the_first_matching_rule_that_is_not_continue_decides() -> None:
    rules = [
        rule(1, "pause", priority=10),
        rule(2, "continue", "owner=alice", priority=0),
        rule(3, "accept", "owner=alice", priority=5),
        rule(4, "reject", "owner=bob", priority=5),
    ]
    alice = decide(rules, JOB)
    assert (alice.action, alice.rule) == ("accept", rules[2])
    bob = decide(rules, LONE)
    assert bob.rejected == "rejected by filter 4: why"
    assert bob.blocked is None
    carol = decide(rules, JobFacts(5, "carol"))
    assert carol.blocked == "paused by filter 1: why"
    assert decide([], JOB).action == "accept"
    assert decide([rule(9, "continue")], JOB).rule is None


def test_ties_go_to_the_older_rule() -> None:
    assert decide([rule(8, "reject"), rule(7, "pause")], JOB).action == "pause"


def test_rate_limit_gives_its_bucket() -> None:
    limited = decide([rule(3, "rate-limit", "group=kernel-qe", rate=2)], JOB)
    assert limited.buckets == (("filter:3", 2),)
    assert limited.blocked is None
    assert decide([rule(3, "rate-limit", "group=qe", rate=2)], JOB).buckets == ()


def test_rules_must_be_whole() -> None:
    check_rule("rate-limit", 1, 0)
    for action, rate, priority, problem in [
        ("hold", None, 0, "unknown action 'hold'"),
        ("rate-limit", None, 0, "needs a rate of at least 1"),
        ("rate-limit", 0, 0, "needs a rate of at least 1"),
        ("pause", 3, 0, "only rate-limit takes a rate"),
        ("pause", None, -1, "a priority is 0 or more"),
    ]:
        with pytest.raises(FilterError, match=problem):
            check_rule(action, rate, priority)


def test_reason_rate_limits() -> None:
    assert reason_buckets(None) == ()
    assert reason_buckets("nightly run") == ()
    assert reason_buckets("a rate-limit:2:nightly b rate-limit:1:nightly rate-limit:5:x") == (
        ("reason:nightly", 1),
        ("reason:x", 5),
    )
    assert reason_buckets("rate-limit:3:a:b") == (("reason:a:b", 3),)
    check_reason("nightly rate-limit:2:nightly ratelimit:x")
    for bad in (
        "rate-limit:0:x",
        "rate-limit:two:x",
        "rate-limit:2:",
        "rate-limit:2",
        "rate-limit:",
    ):
        with pytest.raises(FilterError, match="is not a rate limit"):
            check_reason(f"nightly {bad}")


fields = st.sampled_from(["owner=alice", "owner=bob", "group=everybody", "job>5", "job<=3"])


@given(
    st.lists(
        st.tuples(st.sampled_from(ACTIONS), st.integers(0, 3), st.lists(fields, max_size=2)),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_the_decision_does_not_depend_on_the_order_rules_are_listed(
    specs: list[tuple[str, int, list[str]]], shuffle: random.Random
) -> None:
    rules = [
        rule(i + 1, action, *where, priority=priority, rate=2 if action == "rate-limit" else None)
        for i, (action, priority, where) in enumerate(specs)
    ]
    for job in (JOB, LONE):
        first = decide(rules, job)
        shuffled = list(rules)
        shuffle.shuffle(shuffled)
        assert decide(shuffled, job) == first
        # the decider matches, and no earlier rule that matches decides otherwise
        if first.rule is not None:
            assert first.rule.matches(job)
            assert first.action != "continue"
            earlier = [
                r for r in rules if (r.priority, r.id) < (first.rule.priority, first.rule.id)
            ]
            assert all(r.action == "continue" or not r.matches(job) for r in earlier)
        else:
            assert all(r.action == "continue" or not r.matches(job) for r in rules)


def test_predicate_values_are_typed() -> None:
    assert make_predicate("job", ">=", "12") == Predicate("job", ">=", 12)
    with pytest.raises(FilterError, match="compares with text"):
        make_predicate("owner", "=", 3)
