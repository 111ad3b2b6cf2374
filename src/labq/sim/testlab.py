"""A synthetic test-lab workload in the Standard Workload Format (docs/simulation.md).

A test lab runs the same work over and over: a few hundred *kinds* of job (a
suite, a task list on a kind of host), each with a stable run time, submitted
by a nightly scheduler in one burst and by commits during the working day. The
limits users declare are not the run times: half the kinds declare a padded
guess rounded up to a popular value, the other half leave the lab's one flat
default. Field 12 is the owner, 13 their group, 14 the kind ("executable").
The same model and seed give the same trace, byte for byte.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from labq.errors import InputError

HOUR: Final = 3600.0
DAY: Final = 24 * HOUR
POPULAR_LIMITS: Final = (1800.0, HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR, 24 * HOUR)
# Commits per hour of a working day, relative: quiet at night, a peak before and after lunch.
COMMIT_PROFILE: Final = (
    0.05, 0.03, 0.02, 0.02, 0.03, 0.05, 0.15, 0.4, 0.8, 1.0, 1.0, 0.9,
    0.7, 0.9, 1.0, 1.0, 0.9, 0.7, 0.45, 0.3, 0.2, 0.15, 0.1, 0.07,
)  # fmt: skip
WEEKEND: Final = 0.2  # a weekend day's commits, relative to a weekday's


@dataclass(frozen=True)
class TestLabModel:
    """The parameters of the model (defaults: a 64-host lab over a week)."""

    __test__ = False  # not a pytest class, whatever its name

    hosts: int = 64  # systems in the lab
    days: int = 7  # length of the trace: one week, weekend included
    kinds: int = 240  # recurring kinds of job
    users: int = 40
    groups: int = 8
    nightly_share: float = 0.35  # kinds run by the nightly scheduler (the rest run on commits)
    nightly_runs: int = 4  # runs of each nightly kind a night (distributions, architectures)
    nightly_at: float = 1 * HOUR  # when the nightly burst begins (time of day)
    nightly_spread: float = 1800.0  # the burst's submissions spread over this long
    load: float = 0.7  # offered load: work submitted / (hosts x time)
    median_run: float = 600.0  # the median kind's median run time (s)
    run_sigma: float = 1.5  # spread of the kinds' median run times (log scale)
    kind_sigma: tuple[float, float] = (0.03, 0.15)  # a kind's own spread (log scale), drawn
    padded_share: float = 0.5  # kinds whose limit is padded and rounded; the rest: default
    padding: tuple[float, float] = (1.3, 3.0)  # padding factor over the kind's median, drawn
    default_limit: float = 24 * HOUR  # the lab's flat default limit
    wide_share: float = 0.15  # kinds wider than 4 hosts
    max_width_share: float = 0.5  # the widest kind, as a share of the hosts

    def check(self) -> None:
        """Raise InputError naming the first parameter out of range."""
        positive = (
            "hosts",
            "days",
            "kinds",
            "users",
            "groups",
            "load",
            "median_run",
            "nightly_runs",
        )
        for name in positive:
            if not getattr(self, name) > 0:
                raise InputError(
                    f"test-lab model: {name} must be positive, got {getattr(self, name)}"
                )
        for name in ("nightly_share", "padded_share", "wide_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"test-lab model: {name} must be between 0 and 1")
        if self.groups > self.users:
            raise InputError("test-lab model: groups must not outnumber users")


@dataclass(frozen=True)
class Kind:
    """One recurring kind of job: who runs it, how wide, how long, what it declares."""

    number: int
    user: int
    group: int
    width: int
    median: float  # seconds
    sigma: float  # log-scale spread of its run times
    limit: float  # the declared limit (seconds)
    nightly: bool


@dataclass(frozen=True)
class TraceLine:
    """One job of the trace (the SWF fields the model sets)."""

    submit: float
    runtime: float
    width: int
    limit: float
    kind: Kind

    def swf(self, number: int) -> str:
        """The SWF line: 18 fields, -1 where the model says nothing."""
        k = self.kind
        queue = 1 if k.nightly else 2
        return (
            f"{number} {self.submit:.0f} -1 {self.runtime:.0f} {self.width} -1 -1 {self.width}"
            f" {self.limit:.0f} -1 1 {k.user} {k.group} {k.number} {queue} -1 -1 -1"
        )


def kinds(model: TestLabModel, rng: random.Random) -> list[Kind]:
    """The lab's kinds of job, drawn once per trace."""
    owners = [rng.randrange(model.users) for _ in range(model.kinds)]
    out = []
    for number, user in enumerate(owners, start=1):
        median = min(
            20 * HOUR, max(60.0, rng.lognormvariate(math.log(model.median_run), model.run_sigma))
        )
        sigma = rng.uniform(*model.kind_sigma)
        out.append(
            Kind(
                number=number,
                user=user + 1,
                group=user % model.groups + 1,
                width=_width(model, rng),
                median=median,
                sigma=sigma,
                limit=_limit(model, rng, median),
                nightly=rng.random() < model.nightly_share,
            )
        )
    return out


def _width(model: TestLabModel, rng: random.Random) -> int:
    """Mostly one or two hosts, some three or four, a few wide."""
    draw = rng.random()
    if draw < model.wide_share:
        widest = max(5, int(model.hosts * model.max_width_share))
        width = rng.randint(5, widest)
    elif draw < model.wide_share + 0.12:
        width = rng.choice((3, 4))
    elif draw < model.wide_share + 0.37:
        width = 2
    else:
        width = 1
    return min(width, model.hosts)


def _limit(model: TestLabModel, rng: random.Random, median: float) -> float:
    """A padded guess rounded up to a popular value, or the lab's flat default."""
    if rng.random() >= model.padded_share:
        return model.default_limit
    guess = median * rng.uniform(*model.padding)
    return next((v for v in POPULAR_LIMITS if v >= guess), max(POPULAR_LIMITS))


def generate(model: TestLabModel, seed: int) -> list[TraceLine]:
    """Every job of the trace, by submit time."""
    model.check()
    rng = random.Random(seed)  # noqa: S311 - a workload model, not a secret
    lab = kinds(model, rng)
    nightly = [k for k in lab if k.nightly]
    daily = [k for k in lab if not k.nightly]
    night_work = model.nightly_runs * sum(k.width * k.median for k in nightly)
    budget = model.load * model.hosts * DAY - night_work
    commit_work = _mean_work(daily) * 2 if daily else math.inf  # two kinds a commit, on average
    commits_per_day = max(1.0, budget / commit_work) if daily else 0.0
    jobs: list[TraceLine] = []
    for day in range(model.days):
        start = day * DAY
        for kind in nightly:
            for _ in range(model.nightly_runs):
                at = start + model.nightly_at + rng.uniform(0, model.nightly_spread)
                jobs.append(_run(kind, at, rng))
        weight = WEEKEND if day % 7 in (5, 6) else 1.0
        for at in _commits(rng, start, commits_per_day * weight / _weekly_mean()):
            for kind in rng.sample(daily, min(len(daily), rng.choice((1, 2, 3)))):
                jobs.append(_run(kind, at + rng.uniform(0, 60), rng))
    jobs.sort(key=lambda j: (j.submit, j.kind.number))
    return jobs


def _mean_work(lab: Sequence[Kind]) -> float:
    return sum(k.width * k.median for k in lab) / len(lab)


def _weekly_mean() -> float:
    """The mean day's weight over a week (five working days, two weekend days)."""
    return (5 + 2 * WEEKEND) / 7


def _commits(rng: random.Random, start: float, per_day: float) -> Iterable[float]:
    """Poisson commits over one day, their rate following the hour of the day."""
    total = sum(COMMIT_PROFILE)
    for hour, share in enumerate(COMMIT_PROFILE):
        rate = per_day * share / total / HOUR  # commits per second in this hour
        at = start + hour * HOUR
        end = at + HOUR
        while rate > 0:
            at += rng.expovariate(rate)
            if at >= end:
                break
            yield at


def _run(kind: Kind, at: float, rng: random.Random) -> TraceLine:
    """One run of a kind: its run time drawn around its median, cut at its limit
    (the watchdog of the traced lab would have stopped it there)."""
    runtime = max(
        1.0, round(min(kind.limit, rng.lognormvariate(math.log(kind.median), kind.sigma)))
    )
    return TraceLine(
        submit=round(at), runtime=runtime, width=kind.width, limit=kind.limit, kind=kind
    )


def swf_text(model: TestLabModel, seed: int) -> str:
    """The whole trace as SWF: a header naming the model and seed, then one line per job."""
    jobs = generate(model, seed)
    params = ", ".join(f"{f.name}={getattr(model, f.name)}" for f in fields(model))
    header = [
        "; Version: 2.2",
        "; Computer: labq test-lab model (src/labq/sim/testlab.py)",
        f"; Note: seed={seed}; {params}",
        f"; MaxJobs: {len(jobs)}",
        f"; MaxRecords: {len(jobs)}",
        f"; MaxNodes: {model.hosts}",
        f"; MaxProcs: {model.hosts}",
        "; Queues: 1 nightly suite, 2 a run on a commit",
    ]
    lines = [job.swf(number) for number, job in enumerate(jobs, start=1)]
    return "\n".join(header + lines) + "\n"


def write(path: str | Path, model: TestLabModel, seed: int) -> int:
    """Write the trace to ``path``; the number of jobs written."""
    text = swf_text(model, seed)
    Path(path).write_text(text, encoding="utf-8")
    return text.count("\n") - 8
