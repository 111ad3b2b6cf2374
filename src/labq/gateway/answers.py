"""The JSON shapes that both an API answer and a web page show: a lab agent, a row of
the usage report. One definition each, so a page says exactly what the API says."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from labq.domain.accounting import UsageRow
from labq.store.agents import AgentView
from labq.usecases.agents import agent_state


def agent_json(agent: AgentView, now: datetime, timeout: float) -> dict[str, Any]:
    """An agent as listed: never its token."""
    return {
        "name": agent.name,
        "labs": list(agent.labs),
        "state": agent_state(agent, now, timeout),
        "version": agent.version,
        "host": agent.host,
        "max_sets": agent.max_sets,
        "running": agent.running,
        "last_seen_at": agent.last_seen_at,
        "created_at": agent.created_at,
        "revoked_at": agent.revoked_at,
    }


def usage_row_json(row: UsageRow) -> dict[str, Any]:
    """One row of the usage report, rounded as the API shows it."""
    return {
        "key": row.key,
        "system_hours": round(row.system_hours, 6),
        "jobs": row.jobs,
        "recipes": row.recipes,
        "passed": row.passed,
        "pass_rate": None if row.pass_rate is None else round(row.pass_rate, 4),
        "mean_wait_s": None if row.mean_wait_s is None else round(row.mean_wait_s, 1),
    }
