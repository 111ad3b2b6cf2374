"""``/agents``: the registry of lab agents. Admins add (the token is in the answer and
nowhere else, ever) and revoke them; everyone may list them and see which are online."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.deps import AdminDep, StateDep, UserDep
from labq.api.openapi import answers
from labq.api.schemas import Body, Name
from labq.store import reading, transaction
from labq.store.agents import AgentView

router = APIRouter(prefix="/agents", tags=["agents"])


class AgentBody(Body):
    """A new lab agent and the labs whose sets it runs."""

    name: Name
    labs: Annotated[list[Name], Field(min_length=1, max_length=100)]


def agent_json(agent: AgentView, now: datetime, timeout: float) -> dict[str, Any]:
    """An agent as listed: never its token."""
    if agent.revoked_at is not None:
        state = "revoked"
    else:
        state = "online" if agent.online(now, timeout) else "offline"
    return {
        "name": agent.name,
        "labs": list(agent.labs),
        "state": state,
        "version": agent.version,
        "host": agent.host,
        "max_sets": agent.max_sets,
        "running": agent.running,
        "last_seen_at": agent.last_seen_at,
        "created_at": agent.created_at,
        "revoked_at": agent.revoked_at,
    }


@router.get("")
def list_agents(state: StateDep, _: UserDep) -> dict[str, Any]:
    """Every agent: labs, version, host, last heartbeat, sets running, online or offline."""
    with reading(state.engine) as repo:
        found = repo.agents.list_agents()
    now, timeout = state.clock(), state.settings.health.heartbeat_timeout
    return {"agents": [agent_json(a, now, timeout) for a in found]}


@router.post("", status_code=201, responses=answers(404, 409))
def add_agent(state: StateDep, caller: AdminDep, body: AgentBody) -> dict[str, Any]:
    """A new agent token bound to ``labs``: their sets are run by agents from now on."""
    now = state.clock()
    with transaction(state.engine) as repo:
        agent, secret = repo.agents.create_agent(body.name, body.labs, now=now, actor=caller.name)
    shown = agent_json(agent, now, state.settings.health.heartbeat_timeout)
    return {**shown, "token": secret}


@router.delete("/{name}", responses=answers(404))
def revoke_agent(state: StateDep, caller: AdminDep, name: str) -> dict[str, Any]:
    """Revoke an agent's token: it claims and reports nothing more (its running sets end
    when their heartbeat goes quiet), and its labs go back to the server if no other agent
    serves them."""
    now = state.clock()
    with transaction(state.engine) as repo:
        agent = repo.agents.revoke_agent(name, now=now, actor=caller.name)
    return agent_json(agent, now, state.settings.health.heartbeat_timeout)
