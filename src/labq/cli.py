"""The ``labq`` command line."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import click

from labq import __version__
from labq.errors import LabqError
from labq.formats.names import FORMATS, Format

EXIT_INPUT: Final = 2
EXIT_INTERNAL: Final = 70


# Each command group's module, imported only when the group is used: importing them all
# (httpx, rich, pydantic's job models, every parser) made each ``labq`` call pay ~0.4 s
# of CPU before it did anything. A group's ``also`` modules add commands to it.
LAZY: Final[Mapping[str, tuple[str, str, tuple[str, ...]]]] = {
    "lab": ("labq.commands.labs", "lab", ()),
    "distro": ("labq.commands.distros", "distro", ()),
    "system": (
        "labq.commands.systems",
        "system",
        ("labq.commands.reservations", "labq.commands.sysadmin"),
    ),
    "pool": ("labq.commands.pools", "pool", ()),
    "user": ("labq.commands.people", "user", ()),
    "group": ("labq.commands.people", "group", ()),
    "token": ("labq.commands.people", "token", ()),
    "job": (
        "labq.commands.jobs",
        "job",
        (
            "labq.commands.clones",
            "labq.commands.extend",
            "labq.commands.bulk",
            "labq.commands.watch",
            "labq.commands.notices",
            "labq.commands.retention",
        ),
    ),
    "run": ("labq.commands.runs", "run_group", ()),
    "suite": ("labq.commands.runs", "suite", ()),
    "queue": ("labq.commands.filter", "queue", ()),
    "lock": ("labq.commands.locks", "lock", ()),
    "filter": ("labq.commands.filter", "filter_group", ()),
    "usage": ("labq.commands.usage", "usage", ()),
    "agent": ("labq.commands.agents", "agent", ()),
    "agent-token": ("labq.commands.agents", "agent_token_group", ()),
    "webhook": ("labq.commands.notices", "webhook", ()),
    "logs": ("labq.commands.retention", "logs_group", ()),
}


class LazyGroup(click.Group):
    """The ``labq`` group: its own commands, and :data:`LAZY`'s imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY and cmd_name not in self.commands:
            module, attribute, also = LAZY[cmd_name]
            for extra in also:
                importlib.import_module(extra)
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="labq")
@click.option(
    "--url",
    envvar="LABQ_URL",
    default=None,
    help="The labq server (default: LABQ_URL, the client file, else http://127.0.0.1:8080).",
)
@click.option(
    "--token",
    envvar="LABQ_TOKEN",
    default=None,
    help="API token (default: LABQ_TOKEN, else the client file).",
)
@click.pass_context
def cli(ctx: click.Context, url: str | None, token: str | None) -> None:
    """labq: an event-driven job scheduler for test labs."""
    from labq.clisession import Session

    session = ctx.ensure_object(Session)
    session.url, session.token = url, token
    ctx.call_on_close(session.close)


config_option = click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Settings file (default: LABQ_CONFIG).",
)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Job format; auto tells XML (Beaker) from Teuthology and native YAML/JSON.",
)
@config_option
@click.option(
    "--verbose", "-v", is_flag=True, help="Say why host properties were not checked on a server."
)
@click.pass_context
def validate(
    ctx: click.Context, file: str, fmt: Format, config_file: str | None, verbose: bool
) -> None:
    """Check a job file (within the settings' limits) and print its canonical form as JSON.

    With a server configured (LABQ_URL and LABQ_TOKEN, or the client file), also warn
    on stderr about host properties no system records; the exit status stays 0.
    """
    from labq.commands.checks import warn_unrecorded
    from labq.config import load_settings
    from labq.formats.loader import locate_job

    spec, origins = locate_job(file, fmt=fmt, limits=load_settings(config_file).limits)
    click.echo(json.dumps(spec.canonical(), indent=2, sort_keys=False))
    warn_unrecorded(ctx, spec, origins, verbose=verbose)


@cli.command()
@click.option(
    "--db",
    "url",
    envvar="LABQ_DB",
    default=None,
    help="Database URL (default: LABQ_DB, else labq.db in the data directory).",
)
@click.option(
    "--data-dir",
    envvar="LABQ_DATA_DIR",
    default=None,
    type=click.Path(file_okay=False),
    help="The installation's data directory (default: LABQ_DATA_DIR, else the user's).",
)
@click.option(
    "--admin",
    default="admin",
    show_default=True,
    help="Name of the first admin, on a new database.",
)
def init(url: str | None, data_dir: str | None, admin: str) -> None:
    """Create or upgrade the database; on a new one, create the first admin and print its token."""
    from pathlib import Path

    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    from labq.store import database

    url = url or database.default_url(Path(data_dir) if data_dir else None)
    try:
        if database.create_if_missing(url):
            click.echo(f"created the database {_shown_url(url)}")
        revision = database.upgrade(url)
    except (ArgumentError, NoSuchModuleError, OperationalError) as exc:
        raise LabqError(f"cannot open database {_shown_url(url)}: {exc.args[0]}") from None
    click.echo(f"database ready at {_shown_url(url)} (schema {revision})")
    from labq.store.bootstrap import first_admin

    secret = first_admin(url, admin)
    if secret is not None:
        click.echo(f"created the first admin, {admin!r}; their token (shown only now):")
        click.echo(secret)


def _shown_url(url: str) -> str:
    """A database URL fit to print: never its password."""
    from labq.datadir import shown

    return shown(url)


@cli.command()
@click.option(
    "--db",
    "url",
    envvar="LABQ_DB",
    default=None,
    help="Database URL (default: LABQ_DB, the settings file, else SQLite in the data directory).",
)
@click.option(
    "--data-dir",
    envvar="LABQ_DATA_DIR",
    default=None,
    type=click.Path(file_okay=False),
    help="The installation's data directory: database by default, logs, workspaces"
    " (default: LABQ_DATA_DIR, the settings file, else the user's data directory).",
)
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port to listen on (default 8080).")
@config_option
def server(
    url: str | None,
    data_dir: str | None,
    host: str | None,
    port: int | None,
    config_file: str | None,
) -> None:
    """Run the HTTP API, the scheduler and the dispatcher: what one lab needs."""
    from labq.config import load_settings
    from labq.server import serve

    settings = load_settings(config_file)
    if data_dir:
        settings = settings.model_copy(update={"data_dir": data_dir})
    serve(settings, url, host or settings.server.host, port or settings.server.port)


@cli.command()
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--dir",
    "directory",
    default=None,
    type=click.Path(file_okay=False),
    help="Where the database, workspaces and logs go (default: a new temporary directory).",
)
@click.option("--keep", is_flag=True, help="Keep the temporary directory when it stops.")
@click.option(
    "--vms",
    is_flag=True,
    help="Give the lab a libvirt VM provider and run a job in a VM made for it.",
)
def demo(port: int, directory: str | None, keep: bool, vms: bool) -> None:
    """Run a server with a demo lab of local systems and a few sample jobs, until Ctrl-C
    (or SIGTERM); then stop what it started and remove its temporary directory."""
    from labq.demo import run_demo

    run_demo(port=port, directory=directory, keep=keep, vms=vms)


class DefaultToRun(click.Group):
    """``labq sim SCENARIO …`` runs a scenario; ``labq sim export …`` writes one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=DefaultToRun)
def sim() -> None:
    """Run the scheduling core over a scenario or a workload trace with a virtual clock
    (``labq sim SCENARIO``), or export the lab's own history as a scenario (``labq sim export``).
    """


@sim.command("run")
@click.argument("scenario", required=False, type=click.Path(dir_okay=False))
@click.option("--policy", default="labq", show_default=True, help="The policy to run.")
@click.option(
    "--compare",
    "compare",
    default=None,
    help="Run several policies: labq,easy,… — or current,new: an exported history under its"
    " own settings and under --config's.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--plot",
    "plot_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Write PNG charts here.",
)
@click.option("--seed", default=0, show_default=True, help="Seed for policies that draw at random.")
@click.option(
    "--swf",
    default=None,
    type=click.Path(dir_okay=False),
    help="Run a Standard Workload Format trace.",
)
@click.option(
    "--nodes", default=None, type=int, help="With --swf: systems in the lab (default: the trace's)."
)
@click.option("--limit", default=None, type=int, help="With --swf: only the first J jobs.")
@click.option(
    "--estimate",
    default="runtime",
    show_default=True,
    help="With --swf: declared max time: runtime, or xK (K times the runtime).",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="A YAML file of scenario config keys (holds, queue, …) laid over the input's.",
)
def sim_run(
    scenario: str | None,
    policy: str,
    compare: str | None,
    as_json: bool,
    plot_dir: str | None,
    seed: int,
    swf: str | None,
    nodes: int | None,
    limit: int | None,
    estimate: str,
    config_file: str | None,
) -> None:
    """Run the scheduling core over a scenario or a workload trace with a virtual clock."""
    from labq.sim.command import run_sim

    run_sim(
        scenario=scenario,
        policies=compare.split(",") if compare else [policy],
        compare=compare is not None,
        as_json=as_json,
        plot_dir=plot_dir,
        seed=seed,
        swf=swf,
        nodes=nodes,
        limit=limit,
        estimate=estimate,
        config=config_file,
    )


@sim.command("export")
@click.option("--since", help="Start: an ISO time, or an age like 7d (default: 30 days ago).")
@click.option("--until", help="End: an ISO time, or an age like 1d (default: now).")
@click.option("--lab", "labs", multiple=True, help="Only this lab (repeat).")
@click.option("--anonymise", is_flag=True, help="Pseudonyms for people, groups and systems.")
@click.pass_context
def sim_export(
    ctx: click.Context, since: str | None, until: str | None, labs: tuple[str, ...], anonymise: bool
) -> None:
    """Write the lab's own history (jobs submitted in the window, measured durations and
    outcomes, systems and their changes) as a scenario for labq sim (admins)."""
    from labq.commands import api
    from labq.commands.usage import moment

    params: dict[str, str | int | list[str] | None] = {
        "since": moment(since, "--since"),
        "until": moment(until, "--until"),
        "lab": list(labs) or None,
        "anonymise": "true" if anonymise else None,
    }
    from labq.terminal import shows_progress, working

    with working("exporting the lab's history", shows_progress()):
        text = api(ctx).get_text("/sim/export", params)
    click.echo(text, nl=False)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; errors are one line on stderr, never a traceback."""
    sys.exit(run(cli.main, argv))


def run(command: Callable[..., Any], argv: Sequence[str] | None) -> int:
    """Call a click command in standalone-off mode and turn every failure into an exit code."""
    try:
        # standalone off, click returns the code of a raised ``Exit`` instead of raising it
        code = command(
            args=list(argv) if argv is not None else None, prog_name="labq", standalone_mode=False
        )
    except click.exceptions.Abort:
        click.echo("labq: interrupted", err=True)
        return 130
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()  # a group named without a command: its help, as asked
        return exc.exit_code
    except click.UsageError as exc:
        click.echo(f"labq: {usage_error(exc)}", err=True)
        return EXIT_INPUT
    except click.ClickException as exc:
        click.echo(f"labq: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except LabqError as exc:
        click.echo(f"labq: {exc}", err=True)
        return EXIT_INPUT
    except KeyboardInterrupt:
        click.echo("labq: interrupted", err=True)
        return 130
    except Exception as exc:
        if os.environ.get("LABQ_DEBUG"):
            raise
        click.echo(
            f"labq: internal error: {type(exc).__name__}: {exc} (set LABQ_DEBUG=1 to see where)",
            err=True,
        )
        return EXIT_INTERNAL
    return code if isinstance(code, int) else 0


def usage_error(exc: click.UsageError) -> str:
    """A usage error in one line: the command, the problem, where to read more."""
    message = one_line(exc.format_message()).removesuffix(".")
    message = message[:1].lower() + message[1:]  # click's "Missing option" mid-line
    path = "labq" if exc.ctx is None else exc.ctx.command_path
    command = path.removeprefix("labq").strip()
    where = f"{command}: " if command else ""
    return f"{where}{message}; see '{path} --help'"


def one_line(text: str) -> str:
    """Click's message without its line breaks and indentation."""
    return " ".join(text.split())


if __name__ == "__main__":
    main()
