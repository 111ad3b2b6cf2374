"""``labq agent`` (run a lab agent, or list them) and ``labq agent-token`` (admins)."""

from __future__ import annotations

import sys
from typing import Any

import click

from labq.commands import api, cell, json_option, show, table, when


@click.group(invoke_without_command=True)
@click.option("--url", "server_url", help="The labq server's URL, as this host reaches it.")
@click.option(
    "--token", "agent_token", help="The agent token (prefer --token-file: argv is public)."
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True),
    help="A file holding the agent token (default: $LABQ_AGENT_TOKEN).",
)
@click.option("--lab", "labs", multiple=True, help="Serve only these of the token's labs.")
@click.option("--name", help="The agent's name, checked against its token's.")
@click.option("--data-dir", help="Where set workspaces, logs and claims live on this host.")
@click.option("--max-sets", type=click.IntRange(min=1), help="Sets run at once (default 20).")
@click.option(
    "--keep-sets",
    type=click.IntRange(min=0),
    default=None,
    help="Ended, uploaded sets whose local copy is kept (default 50).",
)
@click.option("--config", "config_file", help="Settings for this host's labs (backends, hooks).")
@click.pass_context
def agent(
    ctx: click.Context,
    server_url: str | None,
    agent_token: str | None,
    token_file: str | None,
    labs: tuple[str, ...],
    name: str | None,
    data_dir: str | None,
    max_sets: int | None,
    keep_sets: int | None,
    config_file: str | None,
) -> None:
    """Run a lab agent beside its labs: it claims their started recipe sets from the server
    and runs them here (see docs/operations.md). Subcommands list the agents."""
    if ctx.invoked_subcommand is not None:
        return
    if not server_url:
        raise click.UsageError("labq agent needs --url: where this host reaches the server")
    from labq.agent import process  # the agent's imports only when an agent runs
    from labq.agent.__main__ import agent_token as resolve_token

    try:
        secret = resolve_token(agent_token, token_file)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(
        process.run(
            url=server_url,
            token=secret,
            labs=labs,
            name=name,
            data_dir=data_dir,
            max_sets=max_sets,
            config=config_file,
            keep_sets=keep_sets,
        )
    )


def _agents_table(data: dict[str, Any]) -> Any:
    return table(
        ["agent", "state", "labs", "running", "version", "host", "last heartbeat"],
        [
            [
                a["name"],
                a["state"],
                cell(a["labs"]),
                f"{a['running']}" + (f"/{a['max_sets']}" if a.get("max_sets") else ""),
                a["version"] or "",
                a["host"] or "",
                when(a["last_seen_at"]) or "-",
            ]
            for a in data["agents"]
        ],
    )


@agent.command("list")
@json_option
@click.pass_context
def list_agents(ctx: click.Context, as_json: bool) -> None:
    """Every agent: its labs, state (online/offline), sets running, version, last heartbeat."""
    show(api(ctx).get("/agents"), as_json, _agents_table)


@click.group("agent-token")
def agent_token_group() -> None:
    """Agent tokens: one per lab agent, bound to labs (admins)."""


@agent_token_group.command("add")
@click.argument("name")
@click.option("--lab", "labs", multiple=True, required=True, help="A lab it serves (repeat).")
@json_option
@click.pass_context
def add_agent_token(ctx: click.Context, name: str, labs: tuple[str, ...], as_json: bool) -> None:
    """Make an agent token bound to labs; the token is printed once, on the last line.
    From now on those labs' sets wait for an agent instead of running on the server."""
    made = api(ctx).post("/agents", {"name": name, "labs": list(labs)})

    def render(data: dict[str, Any]) -> str:
        labs_text = ", ".join(data["labs"])
        return (
            f"agent {data['name']!r} serves {labs_text}; its token (shown once):\n{data['token']}"
        )

    show(made, as_json, render)


@agent_token_group.command("list")
@json_option
@click.pass_context
def list_agent_tokens(ctx: click.Context, as_json: bool) -> None:
    """The agents' tokens (never their secrets): the same list as ``labq agent list``."""
    show(api(ctx).get("/agents"), as_json, _agents_table)


@agent_token_group.command("revoke")
@click.argument("name")
@json_option
@click.pass_context
def revoke_agent_token(ctx: click.Context, name: str, as_json: bool) -> None:
    """Revoke an agent's token: it claims and reports nothing more."""
    gone = api(ctx).delete(f"/agents/{name}")
    show(gone, as_json, lambda d: f"revoked agent {d['name']!r}")
