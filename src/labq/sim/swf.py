"""Reading Standard Workload Format traces into scenarios (reference: docs/simulation.md).

Each node of the traced machine becomes one system (``node-1`` … ``node-N`` in
lab ``swf``); each job becomes one recipe set of as many identical recipes as it
used processors, running for the job's run time.
"""

from __future__ import annotations

import gzip
import io
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from labq.domain.prediction import swf_signature
from labq.errors import InputError
from labq.sim.scenario import Scenario, SimConfig, SimJob, SimRecipe, SimRecipeSet, SystemSpec

FIELDS: Final = 18
LAB: Final = "swf"
CONSISTENCY_EVERY: Final = 7 * 86400.0  # seconds of trace time (see _config)
_HEADER = re.compile(r"^;\s*(MaxNodes|MaxProcs)\s*:\s*(\d+)", re.IGNORECASE)
_ESTIMATE = re.compile(r"^x(\d+(?:\.\d*)?|\.\d+)$")


@dataclass(frozen=True)
class TraceJob:
    """The fields of one SWF line that the simulation uses."""

    number: int
    line: int
    submit: float
    runtime: float
    processors: int
    requested_time: float
    user: int
    group: int
    executable: int = -1  # field 14: with the user and the width, the job's kind


def load_swf(path: str | Path, *, nodes: int | None, limit: int | None, estimate: str) -> Scenario:
    """A scenario replaying an SWF trace (``.swf`` or ``.swf.gz``).

    ``nodes`` defaults to the header's ``MaxNodes`` (else ``MaxProcs``, else the
    largest job). Jobs with no run time or no processors, or wider than
    ``nodes``, are skipped; ``limit`` keeps the first J jobs that remain.
    """
    source = str(path)
    factor = parse_estimate(estimate)
    if nodes is not None and nodes < 1:
        raise InputError(f"--nodes must be at least 1, got {nodes}", source=source)
    if limit is not None and limit < 0:
        raise InputError(f"--limit must not be negative, got {limit}", source=source)
    header, jobs = read_trace(path)
    size = nodes or header or max((j.processors for j in jobs), default=1)
    kept = [j for j in jobs if j.runtime > 0 and 0 < j.processors <= size]
    if limit is not None:
        kept = kept[:limit]
    return Scenario.model_construct(
        config=_config(),
        labs=[LAB],
        pools=[],
        systems=[SystemSpec(fqdn="node", lab=LAB, count=size)],
        jobs=_sim_jobs(kept, factor),
        events=[],
    )


def parse_estimate(estimate: str) -> float | None:
    """``runtime`` gives None (the run time itself); ``xK`` gives K (a number, at least 1)."""
    text = estimate.strip().lower()
    if text == "runtime":
        return None
    match = _ESTIMATE.match(text)
    factor = float(match.group(1)) if match else math.nan
    if not factor >= 1 or math.isinf(factor):
        raise InputError(
            f"--estimate must be 'runtime' or xK with K >= 1 (x1.5, x3), got {estimate!r}"
        )
    return factor


def read_trace(path: str | Path) -> tuple[int | None, list[TraceJob]]:
    """The header's node count (MaxNodes, else MaxProcs) and every job line, in file order."""
    source = str(path)
    header: dict[str, int] = {}
    jobs: list[TraceJob] = []
    try:
        with open_trace(path) as handle:
            for number, line in _numbered(handle):
                text = line.strip()
                if not text:
                    continue
                if text.startswith(";"):
                    found = _HEADER.match(text)
                    if found:
                        header.setdefault(found.group(1).lower(), int(found.group(2)))
                    continue
                jobs.append(_job(text, source, number))
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a trace", source=source) from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot be read as an SWF trace: {exc}", source=source) from None
    return header.get("maxnodes") or header.get("maxprocs"), jobs


def open_trace(path: str | Path) -> TextIO:
    """The trace's text, gzipped or not."""
    if str(path).endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _numbered(handle: TextIO) -> Iterator[tuple[int, str]]:
    return enumerate(handle, start=1)


def _job(text: str, source: str, line: int) -> TraceJob:
    fields = text.split()
    if len(fields) != FIELDS:
        raise InputError(f"expected {FIELDS} fields, found {len(fields)}", source=source, line=line)
    try:
        values = [float(f) for f in fields]
    except ValueError:
        place = next(i for i, f in enumerate(fields, start=1) if not _is_number(f))
        problem = f"field {place} is not a number: {fields[place - 1]!r}"
        raise InputError(problem, source=source, line=line) from None
    if not all(math.isfinite(v) for v in values):
        raise InputError("fields must be finite numbers", source=source, line=line)
    if values[1] < 0:
        raise InputError("submit time (field 2) must not be negative", source=source, line=line)
    allocated, requested = int(values[4]), int(values[7])
    return TraceJob(
        number=int(values[0]),
        line=line,
        submit=values[1],
        runtime=values[3],
        processors=allocated if allocated > 0 else requested,
        requested_time=values[8],
        user=int(values[11]),
        group=int(values[12]),
        executable=int(values[13]),
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _config() -> SimConfig:
    # A trace is a batch machine: nothing to provision, no system ever changes
    # condition, no hold has a time limit, so the consistency pass can find
    # nothing to repair. It still runs (weekly) because the simulator ends a run
    # from it; at the default 600 s it would cost labq over an hour on lublin_256.
    return SimConfig(consistency_every=CONSISTENCY_EVERY)


def _sim_jobs(jobs: list[TraceJob], factor: float | None) -> list[SimJob]:
    """One SimJob per trace job.

    Built by copying validated prototypes: the reader checked every field, and
    validating (or even default-filling) 10,000 jobs of up to 256 recipes costs seconds.
    """
    recipe_proto = SimRecipe(host={})
    set_proto = SimRecipeSet(recipes=[recipe_proto])
    job_proto = SimJob(id="proto", recipe_sets=[set_proto])
    out: list[SimJob] = []
    seen: set[str] = set()
    for job in jobs:
        ident = f"j{job.number}"
        if ident in seen:
            ident = f"{ident}@{job.line}"
        seen.add(ident)
        recipe = recipe_proto.model_copy(update={"duration": job.runtime})
        recipe_set = set_proto.model_copy(
            update={
                "max_time": _max_time(job, factor),
                "recipes": [recipe] * job.processors,  # identical and immutable: one will do
            }
        )
        update = {
            "id": ident,
            "submit_at": job.submit,
            "group": _group(job),
            "signature": list(swf_signature(job.user, job.executable, job.processors)),
        }
        out.append(job_proto.model_copy(update={**update, "recipe_sets": [recipe_set]}))
    return out


def _max_time(job: TraceJob, factor: float | None) -> float:
    """The declared maximum time: the trace's own request wins when it has one.

    Never below the run time: the traced machine let the job finish, so the
    replay must not have the watchdog kill it.
    """
    if job.requested_time > 0:
        return max(job.requested_time, job.runtime)
    return job.runtime * (factor or 1.0)


def _group(job: TraceJob) -> str | None:
    """Field 13 (group) as ``g<N>``, else field 12 (user) as ``u<N>``, else everybody."""
    if job.group >= 0:
        return f"g{job.group}"
    if job.user >= 0:
        return f"u{job.user}"
    return None
