"""Templates and how values look on a page: times, durations, states.

One Jinja environment for the package, autoescaping everything; chart SVG comes
in as :class:`markupsafe.Markup` (it is made by our own code, never from input).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

PREFIX: Final = "/ui"
TEMPLATES: Final = Path(__file__).parent / "templates"
STATIC: Final = Path(__file__).parent / "static"
# Pages show private data and change under the reader: never cached. Scripts come
# only from our own static files; inline style attributes are allowed for the charts.
HEADERS: Final = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
}


def when(value: datetime | float | None) -> str:
    """A moment as ``2026-01-31 14:05:09`` in UTC; a dash for none."""
    if value is None:
        return "—"
    moment = datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def iso(value: datetime | float | None) -> str:
    """A moment in ISO 8601 (for ``<time datetime=…>``); empty for none."""
    if value is None:
        return ""
    moment = datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def duration(seconds: float | None) -> str:
    """A span of time in the two largest units that matter: ``3 min 5 s``, ``2 h 10 min``."""
    if seconds is None:
        return "—"
    left = max(0, round(seconds))
    days, left = divmod(left, 86400)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    # a number stays on the line of its unit: "29 s" never wraps into "29" and "s"
    shown = [f"{n}\u00a0{unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0\u00a0s"


def between(start: datetime | None, end: datetime | None) -> str:
    """How long from ``start`` to ``end`` (a dash when either is missing)."""
    if start is None or end is None:
        return "—"
    return duration((end - start).total_seconds())


def percent(share: float | None) -> str:
    """A share as a percentage with one decimal."""
    return "—" if share is None else f"{share * 100:.1f} %"


def query(base: str, **params: object) -> str:
    """``base`` with the parameters that have a value, URL-encoded."""
    kept = {k: str(v) for k, v in params.items() if v not in (None, "")}
    return f"{base}?{urlencode(kept)}" if kept else base


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, iso=iso, duration=duration, percent=percent)
    env.globals.update(prefix=PREFIX, between=between, query=query)
    return env


ENVIRONMENT: Final = _environment()


def render(template: str, **context: Any) -> str:
    """A template rendered with ``context``."""
    return ENVIRONMENT.get_template(template).render(**context)


def page(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """A whole page; the layout shows who is logged in (if anyone is)."""
    context.setdefault("session", getattr(request.state, "session", None))
    context.setdefault("error", None)
    context.setdefault("note", None)
    return HTMLResponse(render(template, **context), status_code=status, headers=HEADERS)


def fragment(template: str, **context: Any) -> HTMLResponse:
    """A part of a page, for the live updates to put in place."""
    return HTMLResponse(render(template, **context), headers=HEADERS)
