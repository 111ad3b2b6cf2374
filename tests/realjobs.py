"""Where ``../shared/real-jobs`` is: beside the checkout, or further up for a worktree
(``LABQ_REAL_JOBS`` says it outright). Under CI the files must be there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _find() -> Path:
    given = os.environ.get("LABQ_REAL_JOBS")
    if given:
        return Path(given)
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "real-jobs").is_dir():
            return parent / "shared" / "real-jobs"
    return Path("shared") / "real-jobs"


REAL_JOBS = _find()


def require(folder: Path) -> None:
    """Skip where the real job files are not next to this checkout; fail under CI."""
    if folder.is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{folder} is missing")
    pytest.skip(f"{folder} is not next to this checkout")
