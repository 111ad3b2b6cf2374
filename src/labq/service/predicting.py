"""Run-time predictions for the sets the scheduler takes, from the history the store keeps.

A set is predicted once, when it first goes to the core (submitted, resumed, or a retry's
clone): the last runs of each of its keys are read back (bounded: ``PER_KEY`` per key, one
query per batch), a :class:`~labq.domain.prediction.Predictor` learns them, and the
prediction is kept with the set (``recipe_sets.prediction``). A rebuild reads the kept
ones, so a restart does not change what the core planned with, and the forecasts shown
say what the prediction rested on then. Running sets that outlive their prediction are
raised by the core itself (EASY++); the watchdog still ends a set at its ``max_time``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from labq.domain.prediction import (
    DECLARED,
    WINDOW,
    PastRun,
    Prediction,
    Predictor,
    Signature,
    service_signature,
)
from labq.store import Repository, UnfinishedSet, epoch
from labq.store.history import PastRunRecord, SetKeys

PER_KEY: Final = WINDOW  # runs read back per key: as many as the predictor keeps
# the predictor's level names as the API spells the basis
BASES: Final = {
    "job source": "source",
    "task list and hosts": "work",
    "owner and task list": "owner_work",
    "owner": "owner",
    "group": "group",
    DECLARED: "max_time",
}

Kept = Mapping[str, Any]  # a prediction as kept with its set: seconds, spread, runs, median, basis
# kept for a set with no history and no max_time: it was predicted, to nothing (a rebuild
# must not predict it anew from runs that ended since)
NOTHING: Final[Kept] = {"seconds": None, "spread": None, "runs": 0, "median": None, "basis": "none"}


def signature(keys: SetKeys, set_id: int) -> Signature:
    """A set's signature from its keys. The work key is already a digest of the task list
    and host requirements; a set stored before labq kept keys matches no other."""
    work = keys.work or f"set:{set_id}"
    return service_signature(keys.source, (), work, keys.owner, keys.group)


def past_run(record: PastRunRecord) -> PastRun:
    """A history row as the predictor learns it."""
    keys = SetKeys(record.source, record.work, record.owner, record.group)
    outcome: Any = record.outcome
    return PastRun(
        signature(keys, record.set_id), record.seconds, outcome, epoch(record.finished_at)
    )


def predict_sets(
    repo: Repository, stored: Sequence[UnfinishedSet], *, keep: bool = True
) -> dict[int, Kept]:
    """Each set's prediction: the one kept with it, else one made now from the history of
    its keys (and kept, unless ``keep`` is False: a reader's rebuild)."""
    fresh = [u for u in stored if u.prediction is None]
    made: dict[int, Kept] = {}
    if fresh:
        keys = {u.id: SetKeys(u.source_key, u.work_key, u.owner, u.group) for u in fresh}
        predictor = Predictor()
        predictor.learn_all(past_run(r) for r in repo.history.for_keys(keys.values(), PER_KEY))
        for u in fresh:
            found = predictor.predict(signature(keys[u.id], u.id), _float(u.max_time))
            made[u.id] = NOTHING if found is None else kept(found)
        if keep:
            repo.history.keep_predictions(made)
    return {u.id: u.prediction if u.prediction is not None else made[u.id] for u in stored}


def kept(prediction: Prediction) -> dict[str, Any]:
    """A prediction as it is kept with its set (and shown by the API)."""
    return {
        "seconds": round(prediction.seconds, 1),
        "spread": round(prediction.spread, 1),
        "runs": prediction.runs,
        "median": round(prediction.median, 1),
        "basis": BASES.get(prediction.basis, prediction.basis),
    }


def seconds(prediction: Kept | None) -> float | None:
    """The predicted run time in a kept prediction (None: none)."""
    value = None if prediction is None else prediction.get("seconds")
    return None if value is None else float(value)


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)
