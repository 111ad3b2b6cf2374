"""Fetched tasks (restraint's ``<fetch>``) run by the set runner on the local backend.

The sources are real: git repositories made in the test (reached by ``file://``),
tarballs written with :mod:`tarfile`, plain directories.
"""

import io
import tarfile
import textwrap
from collections import defaultdict

import pytest

from labq.dispatch.fetch import FetchError, FetchOptions, fetch_task, rewrite
from labq.dispatch.plan import RecipePlan, SetPlan, TaskPlan
from labq.dispatch.runner import run_set
from labq.dispatch.taskdir import TaskDirError, parse_time, read_task_dir
from labq.domain.states import RecipeState, Result

from .conftest import git, git_out, set_logs, system, workspace

R = RecipeState

METADATA = """\
[General]
name=/kernel/nfs/connectathon
owner=QE <qe@example.test>

[restraint]
entry_point=./check.sh --mode fast
max_time={max_time}
dependencies=gcc;nfs-utils
environment=FROM_META=meta;SHARED=from-meta
"""
CHECK = """\
#!/bin/sh
echo "args=$* p=$PARAM shared=$SHARED meta=$FROM_META test=$TEST pwd=$(basename "$PWD")" > out.txt
cp out.txt "$LABQ_WORKSPACE/seen-$(basename "$PWD").txt"
[ -z "$SLEEP" ] || sleep "$SLEEP"
"""


def write(path, text, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    path.chmod(mode)


@pytest.fixture
def tests_repo(tmp_path):
    """A git repository of restraint tasks on branch main, and a branch 'other'."""
    repo = tmp_path / "tests.git-src"
    write(repo / "kernel/nfs/metadata", METADATA.format(max_time="5m"))
    write(repo / "kernel/nfs/check.sh", CHECK, 0o755)
    write(repo / "legacy/Makefile", "run:\n\t@echo made > made.txt\n")
    write(repo / "plain/runtest.sh", "#!/bin/bash\necho plain > plain.txt\n")  # not executable
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "v1", cwd=repo)
    git("branch", "other", cwd=repo)
    return repo


def fetched(task_id, url, subdir=None, **kw):
    return TaskPlan(id=task_id, name=f"f{task_id}", fetch_url=url, fetch_subdir=subdir, **kw)


def plan_of(*tasks):
    recipe = RecipePlan(id=1, system=system("host1.test"), tasks=tuple(tasks))
    return SetPlan(id=7, job_id=3, recipes=(recipe,))


def run(plan, local, data_dir, reporter, **kw):
    return run_set(
        plan,
        defaultdict(lambda: local),
        data_dir=data_dir,
        reporter=reporter,
        heartbeat_every=0.2,
        **kw,
    )


def test_a_git_task_runs_its_metadata_entry_point_with_params_and_metadata_environment(
    tests_repo, local, data_dir, reporter
):
    url = f"file://{tests_repo}?main#kernel/nfs"  # restraint: ?ref#subdirectory
    params = {"PARAM": "p1", "SHARED": "from-job"}
    outcome = run(plan_of(fetched(1, url, params=params)), local, data_dir, reporter)

    assert outcome.state is R.COMPLETED, outcome.recipes[0].reason
    assert outcome.result is Result.PASS
    seen = (workspace(data_dir) / "seen-1.txt").read_text()
    # the job's parameter wins over the metadata's environment; TEST is the metadata name
    assert seen == (
        "args=--mode fast p=p1 shared=from-job meta=meta test=/kernel/nfs/connectathon pwd=1\n"
    )
    # the task ran in its own copy inside the workspace, without .git
    copy = workspace(data_dir) / "fetched" / "1"
    assert (copy / "out.txt").is_file()
    assert not (copy / ".git").exists()
    log = reporter.finished(1)[4].read_text()
    commit = git_out("rev-parse", "main", cwd=tests_repo)
    assert f"fetched from {url} at commit {commit}" in log
    assert "dependencies (not installed by labq): gcc nfs-utils" in log
    assert "(timeout 300 s)" in log


def test_the_metadata_max_time_is_the_timeout_when_the_job_gives_none(
    tests_repo, local, data_dir, reporter
):
    write(tests_repo / "kernel/nfs/metadata", METADATA.format(max_time="1s"))
    git("commit", "-q", "-am", "short", cwd=tests_repo)
    url = f"file://{tests_repo}?main#kernel/nfs"
    outcome = run(plan_of(fetched(1, url, params={"SLEEP": "30"})), local, data_dir, reporter)

    assert outcome.state is R.ABORTED
    (task,) = outcome.recipes[0].tasks
    assert task.timed_out
    assert "exceeded its timeout of 1 s" in (outcome.recipes[0].reason or "")


def test_the_jobs_timeout_and_restraints_max_time_parameter_win_over_the_metadata(
    tests_repo, local, data_dir, reporter
):
    url = f"file://{tests_repo}?main#kernel/nfs"
    plan = plan_of(
        fetched(1, url, params={"SLEEP": "0"}, timeout=40.0),
        fetched(2, url, params={"RSTRNT_MAX_TIME": "1m"}),
    )
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.state is R.COMPLETED
    assert "(timeout 40 s)" in reporter.finished(1)[4].read_text()
    assert "(timeout 60 s)" in reporter.finished(2)[4].read_text()


def test_makefile_and_runtest_sh_run_when_there_is_no_entry_point(
    tests_repo, local, data_dir, reporter
):
    plan = plan_of(
        fetched(1, f"file://{tests_repo}", subdir="legacy"),
        fetched(2, f"file://{tests_repo}#plain"),  # no branch 'plain': a subdirectory
    )
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.result is Result.PASS, [t.message for t in outcome.recipes[0].tasks]
    assert (workspace(data_dir) / "fetched/1/made.txt").read_text() == "made\n"
    assert (workspace(data_dir) / "fetched/2/plain.txt").read_text() == "plain\n"


def test_a_fragment_naming_a_branch_is_the_ref_as_in_beakers_examples(tests_repo, data_dir):
    git("checkout", "-q", "other", cwd=tests_repo)
    write(tests_repo / "kernel/nfs/extra", "on other\n")
    git("add", ".", cwd=tests_repo)
    git("commit", "-q", "-m", "other", cwd=tests_repo)
    git("checkout", "-q", "main", cwd=tests_repo)  # the default branch again
    options = FetchOptions(data_dir / "fetched")

    got = fetch_task(f"file://{tests_repo}#other", "kernel/nfs", options)
    assert (got.directory / "extra").read_text() == "on other\n"
    assert got.commit == git_out("rev-parse", "other", cwd=tests_repo)
    main = fetch_task(f"file://{tests_repo}#kernel/nfs", None, options)
    assert not (main.directory / "extra").exists()
    assert main.commit == git_out("rev-parse", "main", cwd=tests_repo)


def test_fetches_are_cached_per_url_and_commit(tests_repo, data_dir):
    options = FetchOptions(data_dir / "fetched")
    url = f"file://{tests_repo}?main#kernel/nfs"
    first = fetch_task(url, None, options)
    marker = first.directory / "cached-marker"
    marker.write_text("x")  # only the cache holds it: a second fetch must not re-download
    again = fetch_task(url, None, options)
    assert again.directory == first.directory
    assert (again.directory / "cached-marker").exists()

    write(tests_repo / "kernel/nfs/new", "v2\n")
    git("add", ".", cwd=tests_repo)
    git("commit", "-q", "-m", "v2", cwd=tests_repo)
    moved = fetch_task(url, None, options)
    assert moved.commit != first.commit
    assert moved.directory != first.directory
    assert (moved.directory / "new").is_file()
    assert not (moved.directory / "cached-marker").exists()


def tarball(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, (text, mode) in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))


def test_a_tarball_is_stepped_into_and_its_fragment_is_the_subdirectory(
    tmp_path, local, data_dir, reporter
):
    archive = tmp_path / "beaker-job-0.0.2.tar.gz"
    tarball(
        archive,
        {
            "beaker-job-0.0.2/switch/runtest.sh": ("#!/bin/sh\necho switched > s.txt\n", 0o755),
            "beaker-job-0.0.2/other/runtest.sh": ("#!/bin/sh\nexit 1\n", 0o755),
        },
    )
    outcome = run(plan_of(fetched(1, f"file://{archive}#switch")), local, data_dir, reporter)
    assert outcome.result is Result.PASS
    assert (workspace(data_dir) / "fetched/1/s.txt").read_text() == "switched\n"


def test_a_tarball_cannot_write_outside_its_tree(tmp_path, data_dir):
    archive = tmp_path / "evil.tar.gz"
    tarball(archive, {"../escaped.sh": ("x", 0o644)})
    with pytest.raises(FetchError, match=r"evil\.tar\.gz"):
        fetch_task(f"file://{archive}", None, FetchOptions(data_dir / "fetched"))
    assert not (data_dir / "fetched" / "tar" / "escaped.sh").exists()


def test_a_failing_fetch_aborts_the_recipe_with_the_url_and_the_reason(
    tests_repo, local, data_dir, reporter
):
    missing = f"file://{tests_repo}?no-such-branch#kernel/nfs"
    plan = plan_of(fetched(1, missing), fetched(2, f"file://{tests_repo}#kernel/nfs"))
    outcome = run(plan, local, data_dir, reporter)

    assert outcome.state is R.ABORTED
    recipe = outcome.recipes[0]
    assert missing in (recipe.reason or "")
    assert "branch 'no-such-branch' does not exist" in (recipe.reason or "")
    assert [t.task_id for t in recipe.tasks] == [1]
    assert recipe.tasks[0].result is Result.FAIL
    assert reporter.finished(1)[4].read_text().count(missing) >= 2
    assert (set_logs(data_dir) / "supervisor.log").read_text().count("cannot fetch") >= 1


def test_a_missing_subdirectory_or_a_directory_without_a_program_fails_the_fetch(
    tests_repo, data_dir, tmp_path
):
    options = FetchOptions(data_dir / "fetched")
    with pytest.raises(FetchError, match="no directory nope"):
        fetch_task(f"file://{tests_repo}?main#nope", None, options)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TaskDirError, match=r"no metadata entry_point, Makefile or runtest\.sh"):
        read_task_dir(empty)


def test_rewrites_replace_the_longest_prefix_and_file_urls_can_be_refused(tests_repo, data_dir):
    rules = {"git://example.com/": "file:///nowhere/", "git://example.com/tests": "file://x"}
    assert rewrite("git://example.com/tests.git", rules) == "file://x.git"
    assert rewrite("git://example.com/other", rules) == "file:///nowhere/other"
    assert rewrite("https://elsewhere/x", rules) == "https://elsewhere/x"

    closed = FetchOptions(data_dir / "fetched", file_urls=False)
    with pytest.raises(FetchError, match="file:// URLs are not allowed"):
        fetch_task(f"file://{tests_repo}#kernel/nfs", None, closed)
    # an admin's rewrite to file:// is allowed all the same
    mirrored = FetchOptions(
        data_dir / "fetched", {"git://example.com/tests": f"file://{tests_repo}"}, False
    )
    got = fetch_task("git://example.com/tests?main#kernel/nfs", None, mirrored)
    assert (got.directory / "metadata").is_file()


def test_metadata_cannot_override_what_labq_sets(tests_repo, local, data_dir, reporter):
    write(
        tests_repo / "kernel/nfs/metadata",
        "[restraint]\nentry_point=./check.sh\nenvironment=LABQ_TOKEN=stolen\n",
    )
    git("commit", "-q", "-am", "bad", cwd=tests_repo)
    plan = plan_of(fetched(1, f"file://{tests_repo}#kernel/nfs"))
    run(plan, local, data_dir, reporter)
    result, message = reporter.finished(1)[3], reporter.finished(1)[5]
    assert result is not Result.PASS
    assert "LABQ_TOKEN" in message
    assert not (workspace(data_dir) / "seen-1.txt").exists()


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("5m", 300), ("2h", 7200), ("1d", 86400)]
)
def test_durations_read_as_restraint_reads_them(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "-1", "0", "m"])
def test_bad_durations_are_refused(text):
    with pytest.raises(TaskDirError):
        parse_time(text)


def test_an_rhts_testinfo_gives_the_name_time_and_requirements(tmp_path):
    write(tmp_path / "testinfo.desc", "Name: /old/test\nTestTime: 10m\nRequires: gcc make\n")
    write(tmp_path / "Makefile", "run:\n\ttrue\n")
    found = read_task_dir(tmp_path)
    assert (found.name, found.max_time, found.dependencies) == ("/old/test", 600.0, ("gcc", "make"))
    assert found.command == ("make", "run")
