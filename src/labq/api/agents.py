"""``/agents``: the registry of lab agents. Admins add (the token is in the answer and
nowhere else, ever) and revoke them; everyone may list them and see which are online."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from labq.api.openapi import answers
from labq.gateway.answers import agent_json
from labq.gateway.deps import AdminDep, StateDep, UserDep
from labq.gateway.schemas import Body, Name
from labq.store import reading, transaction
from labq.usecases import agents

router = APIRouter(prefix="/agents", tags=["agents"])


class AgentBody(Body):
    """A new lab agent and the labs whose sets it runs."""

    name: Name
    labs: Annotated[list[Name], Field(min_length=1, max_length=100)]


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
        agent, secret = agents.add_agent(repo, caller, body.name, body.labs, now=now)
    shown = agent_json(agent, now, state.settings.health.heartbeat_timeout)
    return {**shown, "token": secret}


@router.delete("/{name}", responses=answers(404))
def revoke_agent(state: StateDep, caller: AdminDep, name: str) -> dict[str, Any]:
    """Revoke an agent's token: it claims and reports nothing more (its running sets end
    when their heartbeat goes quiet), and its labs go back to the server if no other agent
    serves them."""
    now = state.clock()
    with transaction(state.engine) as repo:
        agent = agents.revoke_agent(repo, caller, name, now=now)
    return agent_json(agent, now, state.settings.health.heartbeat_timeout)
