"""``labq`` imports a command group's modules only when the group is used (``LAZY`` in
``labq/cli.py``): a module that adds commands to another module's group must be named as
one of that group's ``also`` modules, or its commands would vanish from the command line."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import click

import labq.commands
from labq.cli import LAZY

COMMANDS = Path(labq.commands.__file__).parent


def _added_to() -> set[tuple[str, str, str]]:
    """(module, the module its group comes from, the group's name) for every command a
    module of labq.commands adds to a group it imported."""
    found = set()
    for path in sorted(COMMANDS.glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {
            alias.asname or alias.name: node.module
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr in ("command", "group")
                    and isinstance(target.value, ast.Name)
                    and target.value.id in imported
                    and imported[target.value.id].startswith("labq.commands")
                ):
                    group = target.value.id
                    found.add((f"labq.commands.{path.stem}", imported[group], group))
    return found


def test_every_module_that_adds_to_a_group_is_imported_with_it() -> None:
    added = _added_to()
    assert ("labq.commands.watch", "labq.commands.jobs", "job") in added  # the check sees
    for module, home, group in added:
        owners = [
            name
            for name, (where, attribute, _) in LAZY.items()
            if (where, attribute) == (home, group)
        ]
        assert owners, f"{home}.{group} is no group of LAZY"
        for name in owners:
            assert module in LAZY[name][2], f"{module} adds to `labq {name}`: list it in LAZY"


def imported(probe: str, heavy: tuple[str, ...]) -> list[str]:
    """Which of ``heavy`` a fresh interpreter has imported after running ``probe``."""
    check = f"\nimport json, sys\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    argv = [sys.executable, "-c", probe + check]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_a_command_that_needs_no_server_imports_neither_httpx_nor_the_parsers() -> None:
    """``labq --version``, ``labq sim …``, ``labq init`` start without the client's imports."""
    probe = "from labq.cli import run, cli\nrun(cli.main, ['--version'])"
    assert imported(probe, ("httpx", "rich", "lxml", "labq.domain.job")) == []


def test_a_server_imports_no_http_client_and_no_ssh_library() -> None:
    """``labq server`` (the group's callback, the server's modules, its app) imports neither
    httpx nor asyncssh nor the supervisor that would: half a second or more of every start."""
    probe = (
        "from sqlalchemy import create_engine\n"
        "from labq.cli import run, cli\n"
        "run(cli.main, ['server', '--help'])\n"
        "import labq.server\n"
        "from labq.config import Settings\n"
        "from labq.usecases.ports import NoScheduler\n"
        "from labq.webapp import create_app\n"
        "create_app(create_engine('sqlite://'), Settings(), NoScheduler())"
    )
    heavy = ("httpx", "asyncssh", "labq.dispatch.supervisor", "labq.client")
    assert imported(probe, heavy) == []


def test_the_url_options_help_names_the_clients_default() -> None:
    """The help spells the default out (importing the client for it would undo the above)."""
    from labq.cli import cli
    from labq.client import DEFAULT_URL

    (url,) = [p for p in cli.params if p.name == "url"]
    assert isinstance(url, click.Option)
    assert url.help is not None
    assert DEFAULT_URL in url.help
