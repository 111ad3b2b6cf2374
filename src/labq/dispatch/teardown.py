"""The end of a recipe's systems: archiving their logs, then cleaning them up.

Archiving collects the logs of the system and of each guest (secrets masked),
and destroys the guests; it runs for every recipe that was touched, also after a
timeout, abort or cancel, and always before any clean-up. Clean-up ("nuking")
is for the systems whose recipe failed or did not complete. A failure of
either is written down in the recipe's outcome; it never raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from labq.dispatch.logs import mask_tree
from labq.dispatch.recipes import Guest, RecipeRun, final_state
from labq.dispatch.results import recipe_result
from labq.dispatch.setcontext import SetContext
from labq.dispatch.stopping import Stop
from labq.dispatch.vms.backend import VmBackend
from labq.domain.reservesys import reserve_for
from labq.domain.states import RecipeState, Result


def archive(context: SetContext, r: RecipeRun) -> None:
    """Collect the system's logs, and each guest's, then destroy the guests."""
    assert r.backend is not None
    try:
        r.backend.collect_logs(r.plan.system, r.log_dir / "collected")
        mask_tree(r.log_dir / "collected", context.plan.secrets)
    except Exception as exc:
        r.logs_error = f"collecting logs failed: {exc}"
        context.reporter.log(f"{r.label}: {r.logs_error}")
    for g in r.guests:
        if g.made:
            _end_guest(context, r, g)


def _end_guest(context: SetContext, r: RecipeRun, g: Guest) -> None:
    assert r.backend is not None
    reporter = context.reporter
    name = g.plan.system.fqdn
    try:
        r.backend.collect_logs(g.plan.system, g.log_dir / "collected")
        mask_tree(g.log_dir / "collected", context.plan.secrets)
    except Exception as exc:
        r.logs_error = f"collecting the logs of guest {name} failed: {exc}"
        reporter.log(f"{r.label}: {r.logs_error}")
    reporter.log(f"{r.label}: destroying guest {name}")
    try:
        r.backend.cleanup(g.plan.system, log_dir=g.log_dir)
    except Exception as exc:
        r.cleanup_error = f"destroying guest {name} failed: {exc}"
        reporter.log(f"{r.label}: {r.cleanup_error}")


def clean_up(context: SetContext, stop: Stop, r: RecipeRun) -> None:
    """Clean up the system of a recipe that failed or did not complete."""
    assert r.backend is not None
    state, _ = final_state(r, stop)
    if state is RecipeState.COMPLETED and all(t.result is not Result.FAIL for t in r.tasks):
        return
    context.reporter.log(f"{r.label}: cleaning up")
    try:
        r.backend.cleanup(r.plan.system, log_dir=r.log_dir)
        r.cleaned_up = True
    except Exception as exc:
        r.cleanup_error = f"clean-up failed: {exc}"
        context.reporter.log(f"{r.label}: {r.cleanup_error}")


def release(context: SetContext, stop: Stop, r: RecipeRun) -> None:
    """Destroy the VM made for the recipe, if any (after its logs are archived), unless
    its ``<reservesys>`` applies: then the VM stays until the reservation ends."""
    backend = r.backend
    if not isinstance(backend, VmBackend):
        return
    state, _ = final_state(r, stop)
    if reserved(r.plan.provision, state, recipe_result(state, tuple(r.tasks))):
        vm = backend.keep(r.plan.system)
        if vm is not None:
            where = f"{vm.user}@{vm.address} port {vm.port}"
            context.reporter.log(f"{r.label}: VM {vm.name} ({where}) kept for <reservesys>")
        return
    try:
        backend.release(r.plan.system)
    except Exception as exc:
        r.cleanup_error = f"destroying its VM failed: {exc}"
        context.reporter.log(f"{r.label}: {r.cleanup_error}")


def reserved(provision: Mapping[str, str], state: RecipeState, result: Result | None) -> bool:
    """Whether the recipe's ``<reservesys>`` keeps its system, as the service will decide
    when the set ends (the metadata is in the reimage hook's ``LABQ_PROVISION``)."""
    try:
        metadata = json.loads(provision.get("LABQ_PROVISION", "{}"))
    except ValueError:
        return False
    return isinstance(metadata, dict) and reserve_for(metadata, state, result) is not None
