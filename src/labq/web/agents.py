"""Lab agents: each agent's labs, state, sets running, version and last heartbeat,
as ``GET /agents`` and ``labq agent list`` say it."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from labq.gateway.answers import agent_json
from labq.gateway.deps import StateDep
from labq.store import reading
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/agents")
def agents_page(request: Request, app: StateDep, session: SessionDep) -> Response:
    """Every lab agent, and which labs the server runs itself."""
    with reading(app.engine) as repo:
        found = repo.agents.list_agents()
        labs = repo.systems.list_labs()
    now, timeout = app.clock(), app.settings.health.heartbeat_timeout
    rows = [agent_json(a, now, timeout) for a in found]
    served = {lab for a in found if a.revoked_at is None for lab in a.labs}
    local = [lab for lab in labs if lab not in served]
    return page(request, "agents.html", title="Lab agents", nav="agents", agents=rows, local=local)
