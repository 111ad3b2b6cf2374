"""The seeds' problem cases, and the core's rules, on small scenarios."""

import pytest

from tests.unit.scheduler.helpers import rows, run, started_at, stuck_jobs, systems


def two_host(job_id, at, first, second, **extra):
    return {
        "id": job_id,
        "submit_at": at,
        "recipe_sets": [
            {
                "max_time": 600,
                **extra,
                "recipes": [
                    {"role": "server", "host": {"fqdn": first}, "duration": 300},
                    {"role": "client", "host": {"fqdn": second}, "duration": 300},
                ],
            }
        ],
    }


ABBA = {
    "labs": ["lab1"],
    "systems": [{"fqdn": "a", "lab": "lab1"}, {"fqdn": "b", "lab": "lab1"}],
    "jobs": [
        {
            "id": "warmup",
            "submit_at": 0,
            "recipe_sets": [
                {
                    "recipes": [
                        {"host": {"fqdn": "a"}, "duration": 100},
                        {"host": {"fqdn": "b"}, "duration": 60},
                    ]
                }
            ],
        },
        two_host("first", 10, "a", "b"),
        two_host("second", 20, "b", "a"),
    ],
}


def test_abba_sets_both_finish_in_rank_order():
    result = run(ABBA)
    assert stuck_jobs(result) == []
    assert started_at(result, "first") == 100
    assert started_at(result, "second") == 400


def test_a_set_starts_all_together():
    result = run(ABBA)
    for job in ("first", "second"):
        starts = {r["started"] for r in rows(result, job)}
        assert len(starts) == 1


RARE = {
    "labs": ["lab1"],
    "systems": [
        {"fqdn": "rare", "lab": "lab1", "attrs": {"gpu": "yes"}},
        {"fqdn": "plain", "lab": "lab1"},
    ],
    "jobs": [
        {
            "id": "busy",
            "submit_at": 0,
            "recipe_sets": [{"recipes": [{"host": {"gpu": "yes"}, "duration": 100}]}],
        },
        {
            "id": "urgent",
            "submit_at": 10,
            "recipe_sets": [
                {"priority": "urgent", "recipes": [{"host": {"gpu": "yes"}, "duration": 50}]}
            ],
        },
        {
            "id": "low",
            "submit_at": 100,
            "recipe_sets": [{"priority": "low", "recipes": [{"duration": 50}]}],
        },
    ],
}


def test_a_rare_system_goes_to_the_best_waiting_recipe_not_the_newcomer():
    result = run(RARE)
    assert started_at(result, "urgent") == 100
    assert rows(result, "urgent")[0]["system"] == "rare"
    assert rows(result, "low")[0]["system"] == "plain"


def seed002_lab():
    jobs = [
        {
            "id": "hold",
            "submit_at": 0,
            "recipe_sets": [{"recipes": [{"duration": 100}]}],
        }
    ]
    order = [
        ("qe", "urgent"),
        ("qe", "high"),
        ("qe", "normal"),
        ("other", "urgent"),
        ("other", "high"),
        ("other", "normal"),
        ("other", "medium"),
        ("qe", "low"),
    ]
    # submitted in reverse of the expected order, so FIFO alone would get it wrong
    for i, (group, priority) in enumerate(reversed(order)):
        jobs.append(
            {
                "id": f"{group}-{priority}",
                "submit_at": 10 + i,
                "group": group,
                "recipe_sets": [{"priority": priority, "recipes": [{"duration": 10}]}],
            }
        )
    scenario = {
        "config": {"aging": {"bump_after": None}},
        "labs": ["lab1"],
        "pools": [{"name": "owned", "access": {"qe": "urgent", "everybody": "medium"}}],
        "systems": [{"fqdn": "box", "lab": "lab1", "pools": ["owned"]}],
        "jobs": jobs,
    }
    return scenario, [f"{g}-{p}" for g, p in order]


def test_effective_priority_order_table_of_seed_002():
    scenario, expected = seed002_lab()
    result = run(scenario)
    order = sorted(expected, key=lambda job: started_at(result, job))
    assert order == expected


def test_without_a_pool_rule_a_group_cannot_use_the_system():
    scenario = {
        "labs": ["lab1"],
        "pools": [{"name": "private", "access": {"qe": "urgent"}}],
        "systems": [{"fqdn": "box", "lab": "lab1", "pools": ["private"]}],
        "jobs": [
            {"id": "outsider", "group": "other", "recipe_sets": [{"recipes": [{}]}]},
        ],
    }
    result = run(scenario)
    assert stuck_jobs(result) == []  # aborted by the consistency pass, not left hanging
    (row,) = rows(result, "outsider")
    assert row["state"] == "aborted"


def retry_scenario(max_retries, lab_size=3, abort_on=("s1.lab1",)):
    return {
        "config": {"retry": {"hard_limit": 5}},
        "labs": ["lab1"],
        "systems": systems(lab_size),
        "jobs": [
            {
                "id": "flaky",
                "recipe_sets": [
                    {
                        "max_retries": max_retries,
                        "recipes": [{"duration": 30, "outcome": {"abort_on": list(abort_on)}}],
                    }
                ],
            }
        ],
    }


def test_an_aborted_set_is_retried_on_another_system():
    result = run(retry_scenario(2))
    attempts = rows(result, "flaky")
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert attempts[0]["system"] == "s1.lab1"
    assert attempts[0]["state"] == "aborted"
    assert attempts[1]["system"] != "s1.lab1"
    assert attempts[1]["state"] == "completed"
    sets = [s for s in result.world.sets.values() if s.job == "flaky"]
    assert sets[1].retry_of == sets[0].id


def test_excludes_accumulate_and_retries_stop_at_max_retries():
    result = run(retry_scenario(2, lab_size=4, abort_on=("s1.lab1", "s2.lab1", "s3.lab1")))
    attempts = rows(result, "flaky")
    assert len(attempts) == 3  # the first try and two retries
    assert len({a["system"] for a in attempts}) == 3
    assert all(a["state"] == "aborted" for a in attempts)


def test_no_retry_when_no_other_system_fits_and_the_error_says_why():
    result = run(retry_scenario(3, lab_size=1))
    attempts = rows(result, "flaky")
    assert len(attempts) == 1
    (entry,) = [s for s in result.world.sets.values() if s.job == "flaky"]
    assert entry.error is not None
    assert "s1.lab1" in entry.error
    assert "no other system" in entry.error


def test_the_hard_limit_stops_retries_and_the_error_says_so():
    scenario = retry_scenario(3, lab_size=4, abort_on=("s1.lab1", "s2.lab1", "s3.lab1"))
    scenario["config"]["retry"]["hard_limit"] = 1
    result = run(scenario)
    assert len(rows(result, "flaky")) == 2  # the first try and one retry
    last = max((s for s in result.world.sets.values() if s.job == "flaky"), key=lambda s: s.id)
    assert last.error == "not re-scheduled: the retry limit is reached (retry.hard_limit = 1)"


def test_failed_tests_and_cancelled_sets_are_not_retried():
    scenario = retry_scenario(3)
    scenario["jobs"][0]["recipe_sets"][0]["recipes"][0]["outcome"] = "fail"
    assert len(rows(run(scenario), "flaky")) == 1
    scenario = retry_scenario(3)
    scenario["events"] = [{"at": 5, "cancel": "flaky"}]
    result = run(scenario)
    (row,) = rows(result, "flaky")
    assert row["state"] == "cancelled"


def test_the_five_node_low_job_is_not_starved_by_a_stream_of_one_node_jobs():
    stream = [
        {
            "id": f"small{i}",
            "submit_at": 5 * i,
            "recipe_sets": [{"max_time": 60, "recipes": [{"duration": 60}]}],
        }
        for i in range(200)
    ]
    big = {
        "id": "big",
        "submit_at": 1,
        "recipe_sets": [{"max_time": 600, "recipes": [{"duration": 300} for _ in range(5)]}],
    }
    scenario = {
        "config": {"aging": {"bump_after": None}},
        "labs": ["lab1"],
        "systems": systems(6),
        "jobs": [*stream, big],
    }
    result = run(scenario)
    began = started_at(result, "big")
    assert began is not None
    assert began < 200  # not after the stream (which lasts ~1000 s)


def backfill_scenario(candidate_max_time):
    """`big` (high, but capped to low on the pool) holds s1 and needs s2 and s3.

    s2 frees at 100, s3 at 200. `cand` (normal, uncapped) is better ordered for
    s2 but ranks below big, so it may only use s2 if it ends by 200.
    """

    def busy(job_id, fqdn, until):
        return {
            "id": job_id,
            "recipe_sets": [
                {"max_time": until, "recipes": [{"host": {"fqdn": fqdn}, "duration": until}]}
            ],
        }

    return {
        "config": {"aging": {"bump_after": None}},
        "labs": ["lab1"],
        "pools": [{"name": "p", "access": {"kernel": "urgent", "everybody": "low"}}],
        "systems": [{"fqdn": f"s{i}", "lab": "lab1", "pools": ["p"]} for i in (1, 2, 3)],
        "jobs": [
            busy("b2", "s2", 100),
            busy("b3", "s3", 200),
            {
                "id": "big",
                "submit_at": 1,
                "recipe_sets": [
                    {"priority": "high", "max_time": 100, "recipes": [{"duration": 50}] * 3}
                ],
            },
            {
                "id": "cand",
                "submit_at": 2,
                "group": "kernel",
                "recipe_sets": [
                    {
                        "priority": "normal",
                        "max_time": candidate_max_time,
                        "recipes": [{"duration": candidate_max_time}],
                    }
                ],
            },
        ],
    }


def test_backfill_is_allowed_when_it_ends_before_the_holder_can_start():
    result = run(backfill_scenario(50))
    # big holds s1 from t=1 and cannot start before 200: cand borrows s1 at once
    assert started_at(result, "cand") == 2
    assert rows(result, "cand")[0]["system"] == "s1"
    assert started_at(result, "big") == 200


def test_backfill_is_refused_when_it_would_delay_the_holder():
    result = run(backfill_scenario(500))
    assert started_at(result, "big") == 200
    assert started_at(result, "cand") >= 250


def test_a_set_without_max_time_never_backfills():
    scenario = backfill_scenario(50)
    del scenario["jobs"][3]["recipe_sets"][0]["max_time"]
    result = run(scenario)
    assert started_at(result, "big") == 200
    assert started_at(result, "cand") >= 250


def only_system_scenario(condition):
    return {
        "labs": ["lab1"],
        "systems": [{"fqdn": "only", "lab": "lab1"}],
        "jobs": [
            {"id": "first", "recipe_sets": [{"recipes": [{"duration": 100}]}]},
            {
                "id": "second",
                "submit_at": 1,
                "recipe_sets": [{"recipes": [{"host": {"fqdn": "only"}}]}],
            },
        ],
        "events": [{"at": 50, "system": "only", "condition": condition}],
    }


def test_a_system_that_breaks_leaves_the_recipes_that_need_it_waiting():
    result = run(only_system_scenario("broken"))  # it may be repaired
    (row,) = rows(result, "second")
    assert row["state"] == "queued"
    (entry,) = [s for s in result.world.sets.values() if s.job == "second"]
    assert entry.error is None


def test_a_set_waiting_for_a_broken_system_holds_nothing_meanwhile():
    scenario = {
        "labs": ["lab1"],
        "systems": systems(3),
        "jobs": [
            {"id": "wide", "recipe_sets": [{"recipes": [{"duration": 10}] * 3}]},
            {"id": "small", "submit_at": 1, "recipe_sets": [{"recipes": [{"duration": 10}]}]},
        ],
        "events": [{"at": 0, "system": "s1.lab1", "condition": "broken"}],
    }
    result = run(scenario)
    assert [row["state"] for row in rows(result, "small")] == ["completed"]
    assert {row["state"] for row in rows(result, "wide")} == {"queued"}  # s1 may come back


def test_a_removed_system_ends_queued_recipes_that_needed_only_it():
    result = run(only_system_scenario("removed"))
    (row,) = rows(result, "second")
    assert row["state"] == "aborted"
    (entry,) = [s for s in result.world.sets.values() if s.job == "second"]
    assert "every matching system is removed: only (removed)" in entry.error


def test_aging_lifts_a_low_job_over_later_normal_ones():
    stream = [
        {"id": f"n{i}", "submit_at": 10 * i, "recipe_sets": [{"recipes": [{"duration": 10}]}]}
        for i in range(1, 100)
    ]
    scenario = {
        "config": {"aging": {"bump_after": 100, "ceiling": "high"}},
        "labs": ["lab1"],
        "systems": systems(1),
        "jobs": [
            {
                "id": "low",
                "submit_at": 0,
                "recipe_sets": [{"priority": "low", "recipes": [{"duration": 10}]}],
            },
            *stream,
        ],
    }
    result = run(scenario)
    # low reaches normal after 200 s and is then the oldest normal job
    assert started_at(result, "low") <= 220


def test_priority_change_reorders_the_queue():
    scenario = {
        "config": {"aging": {"bump_after": None}},
        "labs": ["lab1"],
        "systems": systems(1),
        "jobs": [
            {"id": "running", "recipe_sets": [{"recipes": [{"duration": 100}]}]},
            {"id": "a", "submit_at": 1, "recipe_sets": [{"recipes": [{"duration": 10}]}]},
            {"id": "b", "submit_at": 2, "recipe_sets": [{"recipes": [{"duration": 10}]}]},
        ],
        "events": [{"at": 50, "job": "b", "priority": "high"}],
    }
    result = run(scenario)
    assert started_at(result, "b") == 100
    assert started_at(result, "a") == 110


@pytest.mark.parametrize("legacy", ["beaker-batch", "easy"])
def test_legacy_policies_ignore_effective_priority(legacy):
    scenario, expected = seed002_lab()
    result = run(scenario, legacy)
    order = sorted(expected, key=lambda job: started_at(result, job))
    assert order != expected
    # the capped group's urgent job goes before the owners' normal one
    assert started_at(result, "other-urgent") < started_at(result, "qe-normal")
