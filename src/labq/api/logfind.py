"""Which log file of a job a name means: a path, a bare file name, a task's id or name.

A running task's log path is stored only when the task ends, so until then it is
found in its recipe's log directory (``task-<id>-*.log``, see
``labq.dispatch.logs``). A task whose recipe has not started has no file yet:
its target has no path, and a follower asks again later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labq.gateway.errors import ApiError
from labq.store import JobView, RecipeSetView, RecipeView, TaskView
from labq.store.tables import FINAL_TASK_STATUSES

_SHOWN = 10  # candidates named in an "ambiguous" answer


@dataclass(frozen=True)
class LogTarget:
    """One log file (or a task's file to be): where it is, and what ends it."""

    path: str | None  # relative to the data directory; None: the task has no file yet
    set_id: int
    task_id: int | None = None
    ended: bool = False  # nothing more will be written to it

    def label(self) -> str:
        """How an answer names it."""
        where = self.path or "no file yet"
        return where if self.task_id is None else f"task {self.task_id}: {where}"


def find_log(job: JobView, data_dir: Path, name: str) -> LogTarget:
    """The one log ``name`` means in ``job`` (404 if none, 422 naming the matches if several).

    Tried in order: the path a listing gives; a task id; then a task name or a bare
    file name (a name several tasks share means the current attempt's, when only
    one of them is current).
    """
    root = data_dir.resolve()
    targets = _targets(job, root)
    exact = [t for t in targets if t.path == name]
    if exact:
        return exact[0]
    if name.isdigit():
        by_id = [t for t in targets if t.task_id == int(name)]
        if by_id:
            return by_id[0]
    current = {s.id for s in job.current_sets}
    named = {t.task_id for _, t, task in _tasks(job, root) if task.name == name}
    matches = [
        t
        for t in targets
        if (t.task_id is not None and t.task_id in named)
        or (t.path is not None and t.path.rsplit("/", 1)[-1] == name)
    ]
    if len(matches) > 1:
        in_current = [t for t in matches if t.set_id in current]
        if len(in_current) == 1:
            return in_current[0]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ApiError(404, f"job {job.id} has no log file or task {name!r}", place="name")
    shown = "; ".join(t.label() for t in matches[:_SHOWN])
    more = f" and {len(matches) - _SHOWN} more" if len(matches) > _SHOWN else ""
    raise ApiError(422, f"{name!r} is ambiguous in job {job.id}: {shown}{more}", place="name")


def running_tasks(job: JobView, data_dir: Path) -> list[LogTarget]:
    """The job's tasks that run now: what ``--follow`` without a name follows."""
    return [t for _, t, task in _tasks(job, data_dir.resolve()) if task.status == "running"]


def _targets(job: JobView, root: Path) -> list[LogTarget]:
    """Every task's log (first), then every other file in the recipes' log directories."""
    out = [t for _, t, _ in _tasks(job, root)]
    seen = {t.path for t in out}
    for rset in job.sets:
        for recipe in rset.recipes:
            folder = _inside(recipe.log_dir, root)
            if folder is None or not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                rel = str(path.relative_to(root))
                if rel not in seen and path.is_file():
                    seen.add(rel)
                    out.append(LogTarget(rel, rset.id, ended=rset.finished_at is not None))
    return out


def _tasks(job: JobView, root: Path) -> list[tuple[RecipeView, LogTarget, TaskView]]:
    out = []
    for rset in job.sets:
        for recipe in rset.recipes:
            for task in recipe.tasks:
                ended = _task_ended(rset, recipe, task)
                path = _task_path(recipe, task, root)
                out.append((recipe, LogTarget(path, rset.id, task.id, ended), task))
    return out


def _task_ended(rset: RecipeSetView, recipe: RecipeView, task: TaskView) -> bool:
    return (
        task.status in FINAL_TASK_STATUSES or recipe.state.is_final or rset.finished_at is not None
    )


def _task_path(recipe: RecipeView, task: TaskView, root: Path) -> str | None:
    """The stored path of an ended task; else the file its supervisor writes, once there."""
    stored = _inside(task.log_path, root)
    if stored is not None:
        return str(stored.relative_to(root))
    folder = _inside(recipe.log_dir, root)
    if folder is None or not folder.is_dir():
        return None
    # a guest's tasks write under guests/<fqdn>/: look in the whole recipe directory
    found = sorted(folder.rglob(f"task-{task.id}-*.log"))
    return str(found[0].relative_to(root)) if found else None


def _inside(path: str | None, root: Path) -> Path | None:
    if path is None:
        return None
    resolved = Path(path).resolve()
    return resolved if resolved.is_relative_to(root) else None
