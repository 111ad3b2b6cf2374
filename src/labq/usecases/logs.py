"""A job's archived logs: which files it has, reading one, and which path may be served.

Logs are served only from inside the data directory, and only the files of the
job's own recipes: the HTTP API and the web pages both ask :func:`log_file`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from labq.errors import ForbiddenError, InputError, NotFoundError
from labq.store import JobView, Repository

MAX_NAME_BYTES: Final = 255  # NAME_MAX: one component of a path


def log_files(job: JobView, data_dir: Path) -> list[dict[str, Any]]:
    """Each recipe's log directory and files, relative to ``data_dir`` (outside: left out)."""
    root = data_dir.resolve()
    out = []
    for rset in job.sets:
        for recipe in rset.recipes:
            files: set[str] = set()
            folder = _inside(recipe.log_dir, root)
            if folder is not None and folder.is_dir():
                files.update(str(p.relative_to(root)) for p in folder.rglob("*") if p.is_file())
            for task in recipe.tasks:
                path = _inside(task.log_path, root)
                if path is not None and path.is_file():
                    files.add(str(path.relative_to(root)))
            out.append(
                {
                    "set": rset.id,
                    "recipe": recipe.id,
                    "system": recipe.system,
                    "dir": None if folder is None else str(folder.relative_to(root)),
                    "files": sorted(files),
                }
            )
    return out


def log_reader(data_dir: Path, limit: int = 4 << 20) -> Callable[[str], str | None]:
    """Reads a stored log path's text (its last ``limit`` bytes); None outside ``data_dir``
    or when the file is gone."""
    root = data_dir.resolve()

    def read(path: str) -> str | None:
        found = _inside(path, root)
        if found is None:
            return None
        try:
            with found.open("rb") as file:
                size = file.seek(0, 2)
                file.seek(max(size - limit, 0))
                return file.read().decode("utf-8", errors="replace")
        except OSError:
            return None

    return read


def log_file(repo: Repository, job_id: int, data_dir: Path, path: str) -> Path:
    """The file ``path`` (relative to ``data_dir``) names, if it is one of the job's logs.

    Refused when the path cannot be a file's (:class:`InputError`), leads out of the data
    directory (:class:`ForbiddenError`), or is no log file of the job (:class:`NotFoundError`).
    """
    root = data_dir.resolve()
    _check_log_path(path)
    wanted = (root / path).resolve()
    if not wanted.is_relative_to(root):
        raise ForbiddenError("that path leads out of the data directory", place="path")
    job = repo.jobs.load_job(job_id)
    allowed = [Path(r.log_dir).resolve() for s in job.sets for r in s.recipes if r.log_dir]
    allowed += [
        Path(t.log_path).resolve()
        for s in job.sets
        for r in s.recipes
        for t in r.tasks
        if t.log_path
    ]
    if not any(wanted == a or wanted.is_relative_to(a) for a in allowed) or not _is_file(wanted):
        raise NotFoundError(f"job {job.id} has no log file {path!r}", place="path")
    return wanted


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, once joined to the data directory
        return False


def _check_log_path(path: str) -> None:
    """Refuse a path no file system holds (a NUL never gets here: the guard refuses it)."""
    for part in path.split("/"):
        if len(part.encode()) > MAX_NAME_BYTES:
            raise InputError(f"a component is longer than {MAX_NAME_BYTES} bytes", place="path")


def _inside(path: str | None, root: Path) -> Path | None:
    if path is None:
        return None
    resolved = Path(path).resolve()
    return resolved if resolved.is_relative_to(root) else None
