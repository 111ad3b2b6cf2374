"""Where the command line writes: reports to stdout, progress to stderr, and only on a terminal.

A report is what a person pipes or saves, so stdout carries nothing else. Long work draws
a progress bar on stderr when stderr is a terminal (and the command was not asked for
``--json``); piped or redirected, it draws nothing at all, not even a last frame.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

UNCUT: Final = 1000  # columns of a piped report: wide enough that no table is cut or wrapped


def output() -> Console:
    """A console for reports on stdout: as wide as the terminal; piped, as wide as
    ``COLUMNS`` says, else wide enough that a table is never cut to 80 columns."""
    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        out.width = UNCUT
    return out


def shows_progress(as_json: bool = False) -> bool:
    """Whether long work may draw on stderr: a terminal there, and no ``--json``."""
    return not as_json and Console(stderr=True).is_terminal


@contextmanager
def progress(shown: bool, *, counted: bool = True) -> Iterator[Progress]:
    """A progress display on stderr, drawn only if ``shown`` and stderr is a terminal;
    erased when the work is done so the report that follows stands alone.
    ``counted``: with a bar and a count of done over total, else a spinner alone."""
    err = Console(stderr=True)
    counts = (BarColumn(), MofNCompleteColumn()) if counted else ()
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        *counts,
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not (shown and err.is_terminal),
    )
    with bar:
        yield bar


@contextmanager
def working(description: str, shown: bool) -> Iterator[None]:
    """A spinner on stderr for one step whose length nobody knows (a server's answer)."""
    with progress(shown, counted=False) as bar:
        bar.add_task(description, total=None)
        yield


def written(what: str, directory: str | Path, paths: Sequence[Path]) -> None:
    """Say on stderr which files were written where: ``plots written to plots/: a.png, b.png``."""
    where = str(directory).rstrip("/") + "/"
    names = ", ".join(path.name for path in paths) or "nothing"
    click.echo(f"{what} written to {where}: {names}", err=True)
