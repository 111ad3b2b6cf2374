"""The registry of lab agents: admins add them (the token is returned once, and kept
nowhere readable) and revoke them; everyone may see which are online."""

from __future__ import annotations

from datetime import datetime

from labq.domain.model import User
from labq.store import Repository
from labq.store.agents import AgentView
from labq.usecases.permissions import require_admin


def agent_state(agent: AgentView, now: datetime, timeout: float) -> str:
    """``revoked``, ``online`` (heard from within ``timeout`` seconds) or ``offline``."""
    if agent.revoked_at is not None:
        return "revoked"
    return "online" if agent.online(now, timeout) else "offline"


def add_agent(
    repo: Repository, caller: User, name: str, labs: list[str], *, now: datetime
) -> tuple[AgentView, str]:
    """A new agent bound to ``labs`` (admins): their sets are run by agents from now on.
    Returns it and its token's secret."""
    require_admin(caller)
    return repo.agents.create_agent(name, labs, now=now, actor=caller.name)


def revoke_agent(repo: Repository, caller: User, name: str, *, now: datetime) -> AgentView:
    """Revoke an agent's token (admins): it claims and reports nothing more, and its labs
    go back to the server if no other agent serves them."""
    require_admin(caller)
    return repo.agents.revoke_agent(name, now=now, actor=caller.name)
