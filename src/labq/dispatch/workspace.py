"""Pinned workspaces: a git branch resolved to one commit, checked out exactly.

A job that pins a ref has it resolved once, at submission (:func:`resolve_ref`),
so every recipe of the job runs the same commit even if the branch moves
(seed 001). The supervisor checks that commit out (:func:`checkout`) once per
set into a cache and the backend copies it onto each system.

git runs with an argv list (no shell), a timeout, no terminal prompts, and
the ``ext::`` transport (which runs commands) forbidden.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from labq.errors import LabqError

_COMMIT: Final = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_ABBREV: Final = re.compile(r"^[0-9a-f]{7,64}$")
_DONE: Final = ".git/labq-checkout-complete"  # inside .git: not copied as a task file
LS_REMOTE_TIMEOUT: Final = 60.0
CHECKOUT_TIMEOUT: Final = 600.0


class RefError(LabqError):
    """A repository or branch that cannot be resolved or checked out."""


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def _git(args: Sequence[str], *, timeout: float, cwd: Path | None = None) -> str:
    argv = ["git", "-c", "protocol.ext.allow=never", *args]
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=_git_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise RefError(f"git {args[0]} timed out after {timeout:g} s") from None
    except FileNotFoundError:
        raise RefError("git is not installed") from None
    if done.returncode != 0:
        raise _GitFailedError(done.returncode, done.stderr.strip())
    return done.stdout


class _GitFailedError(RefError):
    def __init__(self, code: int, stderr: str) -> None:
        self.code = code
        self.stderr = stderr
        last = stderr.splitlines()[-1] if stderr else f"exit code {code}"
        super().__init__(last)


def _check_repo(repo: str) -> None:
    if not repo or repo.startswith("-") or "\0" in repo:
        raise RefError(f"{repo!r} is not a repository URL or path")


def resolve_ref(repo: str, branch: str, *, timeout: float = LS_REMOTE_TIMEOUT) -> str:
    """The commit a branch (or tag, or full ``refs/…`` name) of ``repo`` points at now."""
    _check_repo(repo)
    if not branch or branch.startswith("-") or "\0" in branch:
        raise RefError(f"{branch!r} is not a branch name")
    if branch.startswith("refs/"):
        wanted = [branch]
    else:
        wanted = [f"refs/heads/{branch}", f"refs/tags/{branch}^{{}}", f"refs/tags/{branch}"]
    try:
        out = _git(["ls-remote", "--exit-code", repo, *wanted], timeout=timeout)
    except _GitFailedError as exc:
        if exc.code == 2:  # --exit-code: the repository answered but has no such ref
            raise RefError(f"branch {branch!r} does not exist in {repo}") from None
        raise RefError(f"cannot read repository {repo}: {exc}") from None
    found: dict[str, str] = {}
    for line in out.splitlines():
        oid, _, ref = line.partition("\t")
        found[ref] = oid
    for ref in wanted:
        commit = found.get(ref, "")
        if _COMMIT.match(commit):
            return commit
    raise RefError(f"branch {branch!r} does not exist in {repo}")


def resolve_head(repo: str, *, timeout: float = LS_REMOTE_TIMEOUT) -> str:
    """The commit ``repo``'s default branch (its ``HEAD``) points at now."""
    _check_repo(repo)
    try:
        out = _git(["ls-remote", "--exit-code", repo, "HEAD"], timeout=timeout)
    except _GitFailedError as exc:
        if exc.code == 2:
            raise RefError(f"{repo} has no HEAD (an empty repository?)") from None
        raise RefError(f"cannot read repository {repo}: {exc}") from None
    for line in out.splitlines():
        oid, _, ref = line.partition("\t")
        if ref == "HEAD" and _COMMIT.match(oid):
            return oid
    raise RefError(f"{repo} has no HEAD (an empty repository?)")


def checkout(repo: str, commit: str, dest: Path, *, timeout: float = CHECKOUT_TIMEOUT) -> str:
    """Fetch exactly ``commit`` from ``repo`` into the new directory ``dest``; its full id.

    A full id is fetched alone (``--depth=1``); an abbreviated one (7+ hex digits,
    as a job may give) needs the branches fetched to be expanded.
    """
    _check_repo(repo)
    if not _ABBREV.match(commit):
        raise RefError(f"{commit!r} is not a commit id")
    if dest.exists() and any(dest.iterdir()):
        raise RefError(f"{dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    _git(["init", "--quiet", str(dest)], timeout=timeout)
    _git(["remote", "add", "origin", repo], timeout=timeout, cwd=dest)
    try:
        if not _COMMIT.match(commit):
            raise _GitFailedError(0, "abbreviated")
        fetch = ["fetch", "--quiet", "--depth=1", "--no-tags", "origin", commit]
        _git(fetch, timeout=timeout, cwd=dest)
    except _GitFailedError:
        # abbreviated, or a server that will not hand out a commit by id: fetch branches
        try:
            _git(["fetch", "--quiet", "--no-tags", "origin"], timeout=timeout, cwd=dest)
        except _GitFailedError as exc:
            raise RefError(f"cannot fetch from {repo}: {exc}") from None
    try:
        full = _git(
            ["rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], timeout=timeout, cwd=dest
        )
        _git(
            ["-c", "advice.detachedHead=false", "checkout", "--quiet", full.strip()],
            timeout=timeout,
            cwd=dest,
        )
    except _GitFailedError:
        raise RefError(f"commit {commit} is not in {repo}") from None
    head = _git(["rev-parse", "HEAD"], timeout=timeout, cwd=dest).strip()
    if not head.startswith(commit):
        raise RefError(f"checked out {head}, not {commit}")
    return head


def cached_checkout(
    repo: str, commit: str, cache: Path, *, timeout: float = CHECKOUT_TIMEOUT
) -> Path:
    """``<cache>/<full commit id>``, checked out on first use; safe when two sets race for it.

    The directory's name is the full commit id (``commit`` may be abbreviated).
    """
    if not _ABBREV.match(commit):
        raise RefError(f"{commit!r} is not a commit id")
    if _COMMIT.match(commit) and (cache / commit / _DONE).exists():
        return cache / commit
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=cache))
    try:
        full = checkout(repo, commit, tmp / "tree", timeout=timeout)
        final = cache / full
        if (final / _DONE).exists():
            return final
        (tmp / "tree" / _DONE).touch()
        try:
            (tmp / "tree").rename(final)
        except OSError:
            if not (final / _DONE).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
