"""The third-party corpus the project reads but does not ship: ``../shared`` beside the
repository root, with real job files (``real-jobs/``) and workload traces (``traces/``).

One rule for every test that reads it: where it is missing the test is skipped, and under
``CI=true`` it fails. Nothing searches further up: a ``shared`` folder of some other
project must not stand in for it. ``LABQ_REAL_JOBS`` names the real job files outright.
Everything else a test needs is written by the project (``tests/data``) or by the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).absolute().parents[1]
SHARED = ROOT.parent / "shared"
REAL_JOBS = Path(os.environ.get("LABQ_REAL_JOBS") or SHARED / "real-jobs")
TRACES = SHARED / "traces"


def require(path: Path) -> Path:
    """``path`` if it is there; else skip the test, or fail it under ``CI=true``."""
    if path.exists():
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{path} is missing: CI needs the shared data beside the checkout")
    pytest.skip(f"{path} is not here (the shared data sits beside the checkout as ../shared)")
