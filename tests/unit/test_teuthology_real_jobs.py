"""Every teuthology file of ../shared/real-jobs: read as teuthology would, or refused in one line.

The files are read where they are, never copied into the project; without them
(a checkout elsewhere) the test is skipped, and fails in CI.
"""

import pytest

from labq.errors import InputError
from labq.formats.loader import detect_format, load_job
from tests.realjobs import REAL_JOBS, require

FOLDER = REAL_JOBS / "teuthology"
# fragments: no roles, no targets, no tasks; teuthology-suite merges them into jobs
FRAGMENTS = {
    "ceph-teuthology-no-ceph-distros-vps.yaml",  # machine_type only: a distro facet
    "teuthology-containerized-node-overrides.yaml",  # overrides only
}
WITH_TARGETS = {
    "teuthology-doc-detailed-test-config.yaml": [
        "host07.example.com",
        "host08.example.com",
        "host09.example.com",
    ],
    "teuthology-example-3node-ceph.yaml": ["<host1>", "<host2>", "<host3>"],
    "teuthology-example-3node-rgw.yaml": ["<host1>", "<host2>", "<host3>"],
    "teuthology-example-parallel.yaml": ["<host1>", "<host2>", "<host3>"],
}
NAMES = sorted(p.name for p in FOLDER.iterdir()) if FOLDER.is_dir() else []


@pytest.fixture(autouse=True)
def _files_are_there() -> None:
    require(FOLDER)


def test_every_file_has_a_verdict():
    assert len(NAMES) == 31
    assert set(NAMES) >= FRAGMENTS
    assert set(NAMES) >= set(WITH_TARGETS)


@pytest.mark.parametrize("name", NAMES)
def test_each_real_file(name):
    path = FOLDER / name
    assert detect_format(path.read_text()) == "teuthology"
    if name in FRAGMENTS:
        with pytest.raises(InputError) as caught:
            load_job(path)
        message = str(caught.value)
        assert message.startswith(f"{path}:1: a fragment, not a whole job")
        assert "\n" not in message
        return
    spec = load_job(path)
    (recipe_set,) = spec.recipe_sets
    forced = [r.force for r in recipe_set.recipes]
    assert forced == WITH_TARGETS.get(name, [None] * len(forced))
