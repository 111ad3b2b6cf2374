"""``labq suite``: each operator of a teuthology suite tree, against teuthology's own examples
(its ``suite/test/test_build_matrix.py``) and against trees built from the real fragments in
``../shared/real-jobs/teuthology`` (skipped where they are not, failed under ``CI=true``)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from labq.errors import InputError
from labq.formats.suite import Subset, SuiteJob, deep_merge, expand, split_words, suite_name
from tests.realjobs import REAL_JOBS, require

Tree = dict[str, Any]


def make(root: Path, tree: Tree) -> Path:
    """Files and directories from a nested dict (None: an empty file; str: its text)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, value in tree.items():
        if isinstance(value, dict):
            make(root / name, value)
        else:
            (root / name).write_text(value or "")
    return root


def share(jobs: list[SuiteJob], fragment: str) -> float:
    """The fraction of jobs that include ``fragment``."""
    return sum(any(p.name == fragment for p in j.paths) for j in jobs) / len(jobs)


def suite(tmp_path: Path, tree: Tree, **kw: Any) -> list[SuiteJob]:
    (name,) = tree
    make(tmp_path, tree)
    return expand(tmp_path / name, seed=kw.pop("seed", 1), **kw)


def facet(prefix: str, n: int) -> Tree:
    return {f"{prefix}_{i}.yaml": None for i in range(n)}


# --- teuthology's documented examples -------------------------------------------------


def test_concatenate_1x2x3_is_one_job_with_every_fragment(tmp_path: Path) -> None:
    tree = {"d0_0": {"+": None, "d1_0": facet("d1_0", 1), "d1_1": facet("d1_1", 2)}}
    tree["d0_0"]["d1_2"] = facet("d1_2", 3)
    jobs = suite(tmp_path, tree)
    assert len(jobs) == 1
    assert len(jobs[0].paths) == 6
    assert jobs[0].description == (
        "d0_0/{d1_0/d1_0_0.yaml d1_1/d1_1_0.yaml d1_1/d1_1_1.yaml"
        " d1_2/d1_2_0.yaml d1_2/d1_2_1.yaml d1_2/d1_2_2.yaml}"
    )


@pytest.mark.parametrize(
    ("sizes", "jobs_expected", "fragment", "fraction"),
    [
        ((2, 2), 4, "d1_1_1.yaml", 0.5),
        ((2, 2, 2), 8, "d1_2_0.yaml", 0.5),
        ((1, 2, 4), 8, "d1_2_2.yaml", 0.25),
    ],
)
def test_convolve_is_the_product_of_the_facets(
    tmp_path: Path, sizes: tuple[int, ...], jobs_expected: int, fragment: str, fraction: float
) -> None:
    tree: Tree = {"d0_0": {"%": None}}
    for n, size in enumerate(sizes):
        tree["d0_0"][f"d1_{n}"] = facet(f"d1_{n}", size)
    jobs = suite(tmp_path, tree)
    assert len(jobs) == jobs_expected
    assert share(jobs, fragment) == fraction
    assert len({j.description for j in jobs}) == jobs_expected  # every combination once
    assert all(len(j.paths) == len(sizes) for j in jobs)


def test_convolve_with_concat_puts_every_concatenated_fragment_in_each_job(
    tmp_path: Path,
) -> None:
    tree: Tree = {"d0_0": {"%": None, "d1_0": facet("d1_0", 1), "d1_1": facet("d1_1", 2)}}
    tree["d0_0"]["d1_2"] = {"+": None, **facet("d1_2", 4)}
    jobs = suite(tmp_path, tree)
    assert len(jobs) == 2
    for job in jobs:
        assert {p.name for p in job.paths} >= {f"d1_2_{i}.yaml" for i in range(4)}


DISTROS = [
    "baremetal",
    "rhel7.0",
    "ubuntu12.04",
    "ubuntu14.04",
    "vps",
    "vps_centos6.5",
    "vps_debian7",
    "vps_rhel6.4",
    "vps_rhel6.5",
    "vps_rhel7.0",
    "vps_ubuntu14.04",
]


def noceph(extra_distros: Tree | None = None, extra: Tree | None = None) -> Tree:
    distros: Tree = {f"{d}.yaml": None for d in DISTROS} | (extra_distros or {})
    body: Tree = {"%": None, "clusters": {"single.yaml": None}, "distros": distros}
    body |= {"tasks": {"teuthology.yaml": None}} | (extra or {})
    return {"teuthology": {"no-ceph": body}}


def test_teuthology_noceph_example(tmp_path: Path) -> None:
    make(tmp_path, noceph())
    jobs = expand(tmp_path / "teuthology" / "no-ceph", seed=0)
    assert len(jobs) == 11
    assert share(jobs, "vps.yaml") == 1 / 11


def test_empty_directories_and_disabled_or_foreign_files_add_nothing(tmp_path: Path) -> None:
    junk: Tree = {
        "empty": {},
        "forcefile.yaml.disable": None,
        "forcefile.yaml.anotherextension": None,
        "tasks.disable": {"teuthology2.yaml": None},
        "notyaml": None,
        ".hidden.yaml": None,
    }
    make(tmp_path, noceph(extra_distros={"empty": {}, "x.yaml.disable": None}, extra=junk))
    jobs = expand(tmp_path / "teuthology" / "no-ceph", seed=0)
    assert len(jobs) == 11
    assert not any("teuthology2" in str(p) or "hidden" in str(p) for j in jobs for p in j.paths)


def test_fragments_merge_in_path_order_ceph_before_ceph_thrash(tmp_path: Path) -> None:
    tree: Tree = {
        "thrash": {
            "%": None,
            "ceph-thrash": {"default.yaml": None},
            "ceph": {"base.yaml": None},
            "clusters": {"mds.yaml": None},
        }
    }
    (job,) = suite(tmp_path, tree)
    assert [p.parent.name + "/" + p.name for p in job.paths[:2]] == [
        "ceph/base.yaml",
        "ceph-thrash/default.yaml",
    ]


def test_a_plain_directory_gives_one_job_per_member(tmp_path: Path) -> None:
    jobs = suite(tmp_path, {"s": {"a.yaml": None, "b.yaml": None, "sub": facet("c", 2)}})
    assert [j.description for j in jobs] == [
        "s/a.yaml",
        "s/b.yaml",
        "s/sub/c_0.yaml",
        "s/sub/c_1.yaml",
    ]


# --- $: pick one at random, seeded -----------------------------------------------------


def test_random_pick_takes_one_member_and_the_seed_repeats_it(tmp_path: Path) -> None:
    tree: Tree = {"s": {"%": None, "base": facet("b", 3), "distro": {"$": None, **facet("d", 5)}}}
    make(tmp_path, tree)
    runs = {seed: expand(tmp_path / "s", seed=seed) for seed in range(8)}
    for jobs in runs.values():
        assert len(jobs) == 3
        assert all(sum(p.parent.name == "distro" for p in j.paths) == 1 for j in jobs)
    again = expand(tmp_path / "s", seed=3)
    assert [j.description for j in again] == [j.description for j in runs[3]]
    picked = {p.name for jobs in runs.values() for j in jobs for p in j.paths}
    assert len(picked & set(facet("d", 5))) > 1  # different seeds pick differently


def test_a_directory_named_with_a_dollar_is_a_random_pick(tmp_path: Path) -> None:
    jobs = suite(tmp_path, {"s": {"%": None, "a": facet("a", 2), "os$": facet("o", 4)}})
    assert len(jobs) == 2
    assert all(j.description.count("os$/{o_") == 1 for j in jobs)


# --- --subset: slices that together cover everything ------------------------------------


@pytest.mark.parametrize("outof", [1, 2, 3, 5, 8])
def test_every_subset_slice_covers_every_facet_member(tmp_path: Path, outof: int) -> None:
    tree: Tree = {"s": {"%": None, "a": facet("a", 2), "b": facet("b", 3), "c": facet("c", 4)}}
    make(tmp_path, tree)
    whole = expand(tmp_path / "s", seed=0)
    assert len(whole) == 24
    every = {p.name for j in whole for p in j.paths}
    for index in range(outof):
        part = expand(tmp_path / "s", seed=0, subset=Subset(index, outof))
        assert part
        assert {p.name for j in part for p in j.paths} == every


def test_subsets_of_a_large_product_split_it(tmp_path: Path) -> None:
    tree: Tree = {"s": {"%": None, "a": facet("a", 4), "b": facet("b", 5), "c": facet("c", 3)}}
    make(tmp_path, tree)
    whole = {j.description for j in expand(tmp_path / "s", seed=0)}
    parts = [expand(tmp_path / "s", seed=0, subset=Subset(i, 3)) for i in range(3)]
    assert sum(len(p) for p in parts) == 60
    assert set().union(*({j.description for j in p} for p in parts)) == whole


def test_subset_is_parsed_and_checked() -> None:
    assert Subset.parse("2/5") == Subset(2, 5)
    for bad in ("5/5", "x/2", "1", "-1/3", "0/0"):
        with pytest.raises(InputError, match="--subset"):
            Subset.parse(bad)


# --- filters on the description ---------------------------------------------------------


def test_filter_and_filter_out_match_words_of_the_description(tmp_path: Path) -> None:
    make(tmp_path, noceph())
    where = tmp_path / "teuthology" / "no-ceph"
    vps = expand(where, seed=0, filter_in=split_words(["vps_rhel,baremetal"]))
    assert sorted(p.name for j in vps for p in j.paths if p.parent.name == "distros") == [
        "baremetal.yaml",
        "vps_rhel6.4.yaml",
        "vps_rhel6.5.yaml",
        "vps_rhel7.0.yaml",
    ]
    rest = expand(where, seed=0, filter_out=["vps"])
    assert len(rest) == 4
    both = expand(where, seed=0, filter_in=["rhel"], filter_out=["6.4", "6.5"])
    assert len(both) == 2


# --- .qa links, names, merging ------------------------------------------------------------


def test_qa_links_are_followed_but_never_facets(tmp_path: Path) -> None:
    make(tmp_path / "qa" / "objectstore", {"bluestore.yaml": "a: 1\n", "filestore.yaml": "a: 2\n"})
    make(tmp_path / "qa" / "suites" / "rados" / "thing", {"%": None, "all": facet("t", 1)})
    thing = tmp_path / "qa" / "suites" / "rados" / "thing"
    os.symlink("../../..", thing / ".qa")  # ceph's layout: .qa leads back to qa/
    os.symlink(".qa/objectstore", thing / "objectstore")
    jobs = expand(thing, seed=0)
    assert sorted(j.description for j in jobs) == [
        "rados/thing/{all/t_0.yaml objectstore/bluestore.yaml}",
        "rados/thing/{all/t_0.yaml objectstore/filestore.yaml}",
    ]
    assert sorted(j.config["a"] for j in jobs) == [1, 2]


def test_a_link_loop_is_refused_not_followed_forever(tmp_path: Path) -> None:
    make(tmp_path, {"s": {"a.yaml": None}})
    os.symlink("..", tmp_path / "s" / "loop")
    with pytest.raises(InputError, match="links back"):
        expand(tmp_path / "s", seed=0)


def test_suite_name_is_the_path_below_suites(tmp_path: Path) -> None:
    assert suite_name(tmp_path / "qa" / "suites" / "rados" / "singleton") == "rados/singleton"
    assert suite_name(tmp_path / "mysuite") == "mysuite"


def test_deep_merge_is_teuthologys() -> None:
    base: dict[str, Any] = {"a": {"b": 1, "l": [1]}, "s": "x", "n": None}
    deep_merge(base, {"a": {"c": 2, "l": [2]}, "s": "y", "n": {"k": 1}, "z": None})
    assert base == {"a": {"b": 1, "c": 2, "l": [1, 2]}, "s": "y", "n": {"k": 1}, "z": None}
    with pytest.raises(InputError, match="into a list"):
        deep_merge([1], {"x": 1})


MSGR_FAILURES = (
    "overrides:\n  ceph:\n    conf:\n      global:\n        ms inject socket failures: {}\n"
)


@pytest.fixture
def real() -> Path:
    """The real teuthology files: skipped where they are missing, failed under CI."""
    return require(REAL_JOBS / "teuthology")


def real_singleton(tmp_path: Path, real: Path) -> Path:
    """rados/singleton as ceph lays it out, with real fragments of it and of teuthology."""
    root = tmp_path / "suites" / "rados" / "singleton"
    make(root, {"%": None, "all": {}, "msgr-failures": {}, "objectstore": {}})
    for name in ("admin-socket", "mon-config-keys", "thrash-eio"):
        shutil.copy(real / f"ceph-rados-singleton-{name}.yaml", root / "all" / f"{name}.yaml")
    make(
        root / "msgr-failures",
        {
            "few.yaml": MSGR_FAILURES.format(5000),
            "many.yaml": MSGR_FAILURES.format(500),
        },
    )
    make(root / "objectstore", {"bluestore.yaml": "overrides:\n  ceph:\n    fs: xfs\n"})
    return root


def test_a_real_suite_expands_merges_and_reads_as_jobs(tmp_path: Path, real: Path) -> None:
    jobs = expand(real_singleton(tmp_path, real), seed=0)
    assert len(jobs) == 6
    assert (
        "rados/singleton/{all/admin-socket.yaml msgr-failures/few.yaml objectstore/bluestore.yaml}"
        in {j.description for j in jobs}
    )
    counts = Counter(p.name for j in jobs for p in j.paths)
    assert counts["admin-socket.yaml"] == 2
    assert counts["few.yaml"] == 3
    for job in jobs:
        conf = job.config["overrides"]["ceph"]
        assert conf["fs"] == "xfs"
        assert "ms inject socket failures" in conf["conf"]["global"]
        spec = job.spec()
        assert spec.whiteboard == job.description
        assert yaml.safe_load(job.document())["description"] == job.description


def test_real_noceph_suite_from_real_fragments(tmp_path: Path, real: Path) -> None:
    root = make(tmp_path / "suites" / "teuthology" / "no-ceph", {"%": None})
    make(root / "clusters", {"single.yaml": "roles:\n- [mon.a, osd.0, client.0]\n"})
    make(root / "distros", {})
    make(root / "tasks", {})
    shutil.copy(real / "ceph-teuthology-no-ceph-distros-vps.yaml", root / "distros" / "vps.yaml")
    shutil.copy(real / "ceph-teuthology-nop-nop.yaml", root / "tasks" / "nop.yaml")
    (job,) = expand(root, seed=0)
    assert (
        job.description
        == "teuthology/no-ceph/{clusters/single.yaml distros/vps.yaml tasks/nop.yaml}"
    )
    spec = job.spec()
    recipe = spec.canonical()["recipe_sets"][0]["recipes"][0]
    assert recipe["host"] == {"machine_type": "vps"}
    assert [t["name"] for t in recipe["tasks"]] == ["nop"]


def test_a_combination_that_is_not_a_job_is_named_by_its_description(tmp_path: Path) -> None:
    tree = {"s": {"%": None, "over": {"fs.yaml": "overrides:\n  ceph:\n    fs: xfs\n"}}}
    jobs = suite(tmp_path, tree)
    with pytest.raises(InputError, match=r"^s/\{over/fs.yaml\}:.*not a whole job"):
        jobs[0].spec()


def test_lua_scripts_are_refused_naming_the_fragment(tmp_path: Path) -> None:
    tree = {"s": {"a.yaml": "teuthology:\n  postmerge:\n  - reject()\n"}}
    with pytest.raises(InputError, match=r"a.yaml:1: teuthology: premerge/postmerge"):
        suite(tmp_path, tree)


def test_not_a_directory_or_no_fragments_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not a suite directory"):
        expand(tmp_path / "missing", seed=0)
    make(tmp_path, {"s": {"readme.txt": None}})
    with pytest.raises(InputError, match=r"no \*\.yaml fragments"):
        expand(tmp_path / "s", seed=0)
