"""``labq job logs ID NAME`` and ``--follow``: one log file by any name for it, followed live."""

from __future__ import annotations

import codecs
import json
from typing import Any

import click

from labq.client import Client


def print_log(client: Client, job_id: int, name: str | None, follow: bool, as_json: bool) -> None:
    """Print the log ``name`` means (a path, a file name, a task id or name); following, go on
    until its task ends. ``--json``: one object per piece, ``{"path", "offset", "text"}``."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset = 0
    whole: list[str] = []
    path = ""
    while True:
        params: dict[str, Any] = {"name": name, "offset": offset, "follow": follow or None}
        with client.stream(f"/jobs/{job_id}/logs/tail", params) as answer:
            path = answer.headers.get("X-Labq-Log-Path", "") or path
            ended = answer.headers.get("X-Labq-Log-Ended") == "true"
            task = answer.headers.get("X-Labq-Log-Task") or None
            for chunk in answer.iter_bytes():
                text = decoder.decode(chunk)
                if follow and as_json:
                    piece = {"path": path, "task": task, "offset": offset, "text": text}
                    click.echo(json.dumps(piece))
                elif as_json:
                    whole.append(text)
                else:
                    click.echo(text, nl=False)
                offset += len(chunk)
        if ended or not follow:
            break
        # the server's window closed, or its task ended since: ask again from here
        if name is None and task is not None:
            name = task  # the running task it chose, not whichever runs next
    tail = decoder.decode(b"", final=True)
    if as_json and not follow:
        text = "".join(whole) + tail
        click.echo(json.dumps({"id": job_id, "path": path, "task": task, "text": text}, indent=2))
    elif tail and not as_json:
        click.echo(tail, nl=False)
