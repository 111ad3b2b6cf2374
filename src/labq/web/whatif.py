"""The what-if page (admins): export a window of the lab's history as a ``labq sim``
scenario, and compare it under the current settings and changed ones; the last
comparison's tables and charts stay on the page (``<data_dir>/whatif/last.json``)."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final

import yaml
from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse
from markupsafe import Markup

from labq.gateway.deps import AppState, StateDep
from labq.gateway.errors import ApiError
from labq.sim.export import export_scenario
from labq.sim.metrics import measure
from labq.sim.report import metric_rows
from labq.sim.runner import Run, simulate
from labq.sim.scenario import parse_scenario, with_config
from labq.sim.whatif import SHOWN, Miss, by_group, by_pool, fidelity
from labq.store import epoch, reading
from labq.usecases.permissions import require_admin
from labq.usecases.usage import window
from labq.web.charts import Series, line_chart, span_of
from labq.web.rendering import PREFIX, page
from labq.web.route import PageRoute
from labq.web.session import FormSessionDep, SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)
SETTINGS_LIMIT: Final = 20_000
EXAMPLE: Final = "holds: {per_lab: 0}\n"
FORMAT: Final = 2  # of last.json: 2 keeps epoch seconds, not ISO text and offsets


def _last(app: AppState) -> Path:
    return app.settings.data_path() / "whatif" / "last.json"


def _moment(text: str) -> datetime | None:
    if not text.strip():
        return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise ApiError(
            422, f"{text!r} is not a time (YYYY-MM-DD HH:MM, UTC)", place="since"
        ) from None


@router.get("/whatif")
def whatif_page(request: Request, app: StateDep, session: SessionDep) -> Response:
    """The export form, the comparison form and the last comparison."""
    require_admin(session.user)
    last = _last(app)
    shown = json.loads(last.read_text()) if last.exists() else None
    if shown is not None and shown.get("format") != FORMAT:
        shown = None  # kept by an older labq, which wrote offsets where dates belong
    charts = [Markup(svg) for svg in shown["charts"]] if shown else []  # noqa: S704 - ours
    return page(
        request,
        "whatif.html",
        title="What-if",
        nav="whatif",
        last=shown,
        charts=charts,
        example=EXAMPLE,
    )


@router.get("/whatif/export")
def whatif_export(
    app: StateDep, session: SessionDep, since: str = "", until: str = "", anonymise: str = ""
) -> Response:
    """The window as a scenario file, to download."""
    require_admin(session.user)
    start, end = window(_moment(since), _moment(until), app.clock())
    with reading(app.engine) as repo:
        data = export_scenario(
            repo, app.settings, since=start, until=end, anonymise=bool(anonymise)
        )
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    name = f"lab-{start:%Y%m%d}-{end:%Y%m%d}.yaml"
    return Response(
        text,
        media_type="application/yaml",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.post("/whatif/compare")
def whatif_compare(
    app: StateDep,
    session: FormSessionDep,
    settings: Annotated[str, Form(max_length=SETTINGS_LIMIT)],
    since: Annotated[str, Form()] = "",
    until: Annotated[str, Form()] = "",
) -> Response:
    """Replay the window under the current settings and under ``settings``; keep the result."""
    require_admin(session.user)
    start, end = window(_moment(since), _moment(until), app.clock())
    with reading(app.engine) as repo:
        data = export_scenario(repo, app.settings, since=start, until=end)
    scenario = parse_scenario(data, source="the window")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "new-settings.yaml"
        path.write_text(settings)
        changed = with_config(scenario, path)
    runs = [
        Run("current", simulate(scenario, {}, "labq").world, scenario),
        Run("new", simulate(changed, {}, "labq").world, changed),
    ]
    result = comparison(runs, start, end, settings)
    last = _last(app)
    last.parent.mkdir(parents=True, exist_ok=True)
    last.write_text(json.dumps(result))
    return RedirectResponse(f"{PREFIX}/whatif", status_code=303)


def comparison(runs: list[Run], start: datetime, end: datetime, settings: str) -> dict[str, Any]:
    """What the page shows of a comparison: tables, fidelity and SVG charts.

    A replay counts time in seconds from the window's start: every moment shown
    is turned back into a date, and every duration into its units.
    """
    t0, t1 = epoch(start), epoch(end)
    metrics = [dict(metric_rows(measure(run.world))) for run in runs]
    groups = {run.policy: by_group(run) for run in runs}
    pools = {run.policy: by_pool(run) for run in runs}
    current = runs[0]
    found = fidelity(current)
    attempts = list(current.world.sets.values())
    retries = sum(1 for a in attempts if a.attempt > 1)
    waits = [
        Series(
            run.policy,
            tuple(
                sorted(
                    (t0 + a.submitted, a.started_at - a.submitted)
                    for a in run.world.sets.values()
                    if a.started_at is not None
                )
            ),
        )
        for run in runs
    ]
    chart = line_chart(
        waits,
        title="Wait of each set by submit time",
        y_label="wait",
        window=(t0, t1),
        durations=True,
    )
    return {
        "format": FORMAT,
        "since": t0,
        "until": t1,
        "settings": settings,
        "policies": [run.policy for run in runs],
        "metrics": [[name, *(m[name] for m in metrics)] for name in metrics[0]],
        "groups": _cells(groups),
        "pools": _cells(pools),
        "fidelity": {
            **found.as_json(),
            "attempts": len(attempts),
            "retries": retries,
            "not_started": len(attempts) - retries - found.sets,
            "misses": [_miss(m, t0) for m in found.misses[:SHOWN]],
            "more_misses": max(0, len(found.misses) - SHOWN),
        },
        "charts": [chart],
    }


def _miss(miss: Miss, t0: float) -> dict[str, Any]:
    """A set replayed off its recorded start, with dates instead of offsets."""
    late = None if miss.replayed is None else miss.replayed - miss.recorded
    return {
        "set": f"{miss.job} set {miss.index}",
        "recorded": t0 + miss.recorded,
        "replayed": None if miss.replayed is None else t0 + miss.replayed,
        "off": None if late is None else ("+" if late >= 0 else "−") + span_of(abs(late)),
        "systems": ", ".join(s or "?" for s in miss.systems),
        "ran": ", ".join(s or "?" for s in miss.ran),
    }


def _cells(per_run: dict[str, Any]) -> list[list[str]]:
    keys = sorted({k for cuts in per_run.values() for k in cuts})
    rows = []
    for key in keys:
        row = [key]
        for cuts in per_run.values():
            one = cuts.get(key)
            row.append(
                "-"
                if one is None
                else f"{span_of(one.mean_wait)} / {one.mean_bounded_slowdown:.2f} / {one.retries}"
            )
        rows.append(row)
    return rows
