"""User runtime estimates for a trace that has none: Tsafrir, Etsion and Feitelson's model.

"Modeling User Runtime Estimates" (JSSPP 2005) found that users pick their
estimates from a small set of popular values: the 20 most popular serve about
89 % of the jobs, the system's maximal estimate is the most popular of all, and
the popularity of the others falls exponentially with their rank. The model
builds that histogram for a trace's size and maximal estimate, then deals its
estimates out to the jobs so that each job gets one at least as long as its run
time (longest jobs first, each drawing at random among the estimates still
long enough). The parameters below are the paper's defaults.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from labq.errors import InputError
from labq.sim.swf import open_trace, read_trace

MINUTE: Final = 60
HOUR: Final = 3600
TOP: Final = 20  # the head of the histogram: the most popular estimates
HEAD_SHARE: Final = 89.0  # percent of jobs using one of the TOP
# Popularity of head ranks 2..20 (percent): a * exp(b * rank) + c; rank 1 takes the rest.
HEAD_SIZE: Final = (14.0491, -0.177531, 0.462513)
# Popularity of tail ranks 21.. (percent, before scaling to 100 - HEAD_SHARE): a * rank^b.
TAIL_SIZE: Final = (795.6, -2.267)
# Estimates popular on all four logs the model was fitted on, shortest to longest.
JOINT: Final = tuple(m * MINUTE for m in (5, 10, 15, 20, 30)) + tuple(
    h * HOUR for h in (1, 2, 3, 4, 5, 6, 8, 10, 12, 18)
)
# Round values that complete the head, coarsest first, taken downwards from the maximum.
ROUND: Final = tuple(h * HOUR for h in (200, 100, 50, 10, 5, 2, 1)) + tuple(
    m * MINUTE for m in (20, 10, 5)
)
# How many distinct estimates a log of N jobs has: piecewise linear in N.
BINS_BY_JOBS: Final = ((0, 0), (20, 10), (200, 20), (1000, 35), (10000, 90), (70000, 340))
# For each time rank of the head (0 is the maximum, then shortest to longest), the
# popularity rank it had in each of the four logs (SDSC, CTC, KTH, Blue Horizon).
RANKS: Final = (
    (3, 1, 1, 1), (1, 3, 4, 6), (4, 4, 10, 5), (17, 2, 14, 3), (13, 12, 20, 7),
    (7, 9, 2, 2), (8, 8, 3, 18), (18, 18, 7, 19), (2, 6, 12, 4), (6, 7, 6, 11),
    (16, 11, 19, 20), (10, 20, 5, 9), (5, 16, 18, 10), (15, 5, 16, 14), (14, 14, 9, 13),
    (19, 13, 17, 16), (11, 10, 15, 15), (12, 15, 13, 17), (9, 17, 8, 8), (20, 19, 11, 12),
)  # fmt: skip


def histogram(jobs: int, max_estimate: int, rng: random.Random) -> dict[int, int]:
    """Estimate (seconds) -> how many of ``jobs`` use it, summing to ``jobs``."""
    if max_estimate < HOUR:
        raise InputError(f"the maximal estimate must be at least one hour, got {max_estimate} s")
    bins = max(TOP, _bin_count(jobs))
    head = _head(max_estimate, rng)
    tail = _tail(max_estimate, bins - len(head), set(head), rng)
    shares = head | tail
    counts = {t: max(1, round(share * jobs / 100)) for t, share in shares.items()}
    return _settle(counts, jobs)


def _bin_count(jobs: int) -> int:
    points = BINS_BY_JOBS
    if jobs >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if jobs <= x1:
            return y0 + round((jobs - x0) * (y1 - y0) / (x1 - x0))
    return points[-1][1]


def _head(max_estimate: int, rng: random.Random) -> dict[int, float]:
    """The TOP most popular estimates and their shares (percent)."""
    times = [t for t in JOINT if t < max_estimate]
    for step in ROUND:
        value = max_estimate // step * step
        while value > 0 and len(times) < TOP - 1:
            if value != max_estimate and value not in times:
                times.append(value)
            value -= step
    ranked = [max_estimate, *sorted(times)[: TOP - 1]]  # time rank 0 is the maximum
    a, b, c = HEAD_SIZE
    sizes = [a * math.exp(b * rank) + c for rank in range(2, len(ranked) + 1)]
    sizes = [HEAD_SHARE - sum(sizes), *sizes]  # popularity rank 1 first
    popularity = _time_to_popularity(len(ranked), rng)
    return {t: sizes[popularity[i] - 1] for i, t in enumerate(ranked)}


def _time_to_popularity(count: int, rng: random.Random) -> list[int]:
    """A popularity rank for each time rank, as the four logs had them.

    The maximum is the most popular. Each later time rank takes a rank that one
    of the logs gave it (two draws, the more popular kept), unless some rank is
    due: none of the logs gave it to a later time rank, so it is taken now.
    """
    last_seen = {}
    for time_rank, row in enumerate(RANKS):
        for rank in row:
            last_seen[rank] = time_rank
    chosen: list[int] = []
    pool: list[int] = []
    for time_rank in range(count):
        pool += [r for r in RANKS[time_rank] if r not in chosen and r <= count]
        due = [r for r in range(1, count + 1) if r not in chosen and last_seen[r] <= time_rank]
        if time_rank == 0:
            rank = 1
        elif due:
            rank = min(due)
        elif pool:
            rank = min(rng.choice(pool), rng.choice(pool))
        else:
            rank = min(r for r in range(1, count + 1) if r not in chosen)
        chosen.append(rank)
        pool = [r for r in pool if r != rank]
    return chosen


def _tail(max_estimate: int, count: int, taken: set[int], rng: random.Random) -> dict[int, float]:
    """The less popular estimates: times spread below the maximum, shares by a power law."""
    if count <= 0:
        return {}
    a = 1 + 12.1039 * (count + TOP) ** -0.6026
    times: list[int] = []
    for i in range(1, count + 1):
        x = i / count
        second = round((a - 1) * x / (a - x) * max_estimate / MINUTE) * MINUTE
        for offset in (0, 30, -30, 20, -20, 10, -10):
            value = second + offset
            if 0 < value < max_estimate and value not in taken and value not in times:
                times.append(value)
                break
    scale, power = TAIL_SIZE
    sizes = [scale * (TOP + 1 + i) ** power for i in range(len(times))]
    factor = (100 - HEAD_SHARE) / sum(sizes)
    rng.shuffle(times)
    return {t: s * factor for t, s in zip(times, sizes, strict=True)}


def _settle(counts: dict[int, int], jobs: int) -> dict[int, int]:
    """Make the counts sum to ``jobs``: the most popular estimates give or take the difference."""
    by_size = sorted(counts, key=lambda t: (-counts[t], t))
    diff = jobs - sum(counts.values())
    while diff != 0:
        moved = False
        for t in by_size:
            if diff > 0:
                counts[t] += 1
                diff -= 1
                moved = True
            elif counts[t] > 0:
                counts[t] -= 1
                diff += 1
                moved = True
            if diff == 0:
                break
        if not moved:
            break
    return {t: n for t, n in counts.items() if n > 0}


def assign(runtimes: Sequence[float], max_estimate: int | None, seed: int) -> list[float]:
    """An estimate for each run time, in the same order, never below it.

    ``max_estimate`` defaults to the longest run time rounded up to the hour. Longest jobs
    first, each draws among the estimates left that are long enough. Where none is (the
    histogram has fewer long estimates than the trace has long jobs: the paper's tool gives
    up there) the job declares the maximum, as a user whose job would be killed would.
    """
    if not runtimes:
        return []
    rng = random.Random(seed)  # noqa: S311 - a workload model, not a secret
    longest = max(runtimes)
    top = max_estimate or max(HOUR, math.ceil(longest / HOUR) * HOUR)
    if longest > top:
        raise InputError(f"a job runs {longest:.0f} s, longer than the maximal estimate {top} s")
    pool = sorted(
        (t for t, n in histogram(len(runtimes), top, rng).items() for _ in range(n)),
        reverse=True,
    )
    order = sorted(range(len(runtimes)), key=lambda i: -runtimes[i])
    out = [0.0] * len(runtimes)
    high = 0
    for place, job in enumerate(order):
        need = runtimes[job]
        if pool[place] < need:
            out[job] = float(top)
            continue
        high = max(high, place)
        while high + 1 < len(pool) and pool[high + 1] >= need:
            high += 1
        pick = rng.randint(place, high)
        out[job] = float(pool[pick])
        pool[place], pool[pick] = pool[pick], pool[place]
    return out


def write_estimated(
    source: str | Path, target: str | Path, *, max_estimate: int | None, seed: int
) -> int:
    """Copy an SWF trace with field 9 (requested time) drawn from the model; jobs that did
    not run (run time <= 0) keep theirs. The header gets a note; the number of jobs estimated.
    """
    _, jobs = read_trace(source)
    ran = [job for job in jobs if job.runtime > 0]
    drawn = assign([job.runtime for job in ran], max_estimate, seed)
    by_line = {job.line: estimate for job, estimate in zip(ran, drawn, strict=True)}
    note = f"; Note: field 9 drawn from Tsafrir's estimate model (labq.sim.estimates), seed={seed}"
    out = [note]
    with open_trace(source) as handle:
        for number, line in enumerate(handle, start=1):
            estimate = by_line.get(number)
            if estimate is None:
                out.append(line.rstrip("\n"))
                continue
            fields = line.split()
            fields[8] = f"{estimate:.0f}"
            out.append(" ".join(fields))
    Path(target).write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(ran)
