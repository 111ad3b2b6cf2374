"""Installing a recipe's systems: provisioning its system, then creating its guests.

Both go through the lab's hooks (the backend's ``provision``), and both watch the
set's stop. A failure aborts the recipe, and the set with it; one that comes of a
stop already requested is only written down.
"""

from __future__ import annotations

from labq.dispatch.plan import Workspace
from labq.dispatch.recipes import Guest, RecipeRun
from labq.dispatch.setcontext import Checkout, SetContext
from labq.dispatch.stopping import Stop, StopKind
from labq.domain.states import RecipeState


class Installer:
    """Provisions the systems of one set, one call of :meth:`provision` per recipe."""

    def __init__(self, context: SetContext, stop: Stop, checkout: Checkout) -> None:
        self.reporter = context.reporter
        self.stop = stop
        self.checkout = checkout

    def provision(self, r: RecipeRun) -> None:
        """Provision ``r``'s system (the recipe moves ``installing``), then its guests."""
        assert r.backend is not None
        r.touched = True
        self.reporter.recipe_state(r.plan.id, RecipeState.INSTALLING)
        self.reporter.log(f"{r.label}: provisioning")
        workspace = Workspace(
            r.log_dir,
            self.checkout.directory,
            self.checkout.plan.ref_commit,
            provision=r.plan.provision,
        )
        try:
            r.backend.provision(r.plan.system, workspace, cancel_event=self.stop.event)
        except Exception as exc:
            if self.stop.is_set():
                self.reporter.log(f"{r.label}: provisioning stopped: {exc}")
                return
            r.reason = f"provisioning failed: {exc}"
            self.stop.request(StopKind.ABORT, f"{r.label}: {r.reason}")
            return
        for g in r.guests:
            if not self._make_guest(r, g):
                return

    def _make_guest(self, r: RecipeRun, g: Guest) -> bool:
        """Create one guest of a provisioned system (the lab's guest hook); False: stop."""
        assert r.backend is not None
        if self.stop.is_set():
            return False
        name = g.plan.system.fqdn
        self.reporter.log(f"{r.label}: creating guest {name}")
        g.made = True
        workspace = Workspace(g.log_dir, self.checkout.directory, self.checkout.plan.ref_commit)
        try:
            r.backend.provision(g.plan.system, workspace, cancel_event=self.stop.event)
        except Exception as exc:
            if self.stop.is_set():
                self.reporter.log(f"{r.label}: creating guest {name} stopped: {exc}")
                return False
            r.reason = f"guest {name} could not be created: {exc}"
            self.stop.request(StopKind.ABORT, f"{r.label}: {r.reason}")
            return False
        return True
