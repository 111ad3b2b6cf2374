"""A usage error of any ``labq`` command is one ``labq:`` line on stderr, exit 2."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from labq.cli import cli, run

BAD = [
    (["system", "condition", "X", "automated"], "system condition: missing option '--reason'"),
    (["job", "list", "--state", "bogus"], "job list: invalid value for '--state': 'bogus'"),
    (["job", "list", "--limit", "0"], "job list: invalid value for '--limit': 0 is not in"),
    (["job", "list", "--offset", "-1"], "invalid value for '--offset'"),
    (["job", "show", "abc"], "job show: invalid value for 'ID': 'abc' is not a valid integer"),
    (["job", "show"], "job show: missing argument 'ID'"),
    (["job", "submit", "j.yaml", "--format", "cobol"], "invalid value for '--format'"),
    (["job", "frobnicate"], "job: no such command 'frobnicate'"),
    (["frobnicate"], "no such command 'frobnicate'"),
    (["system", "add"], "system add: missing argument"),
    (["lock", "acquire"], "lock acquire: missing argument"),
    (["demo", "--port", "0"], "demo: invalid value for '--port'"),
    (["sim", "--seed", "many"], "sim run: invalid value for '--seed'"),
    (["validate"], "validate: missing argument 'FILE'"),
    (["--url"], "option '--url' requires an argument"),
]


@pytest.mark.parametrize(("args", "words"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_usage_error_is_one_line(labq, args, words) -> None:
    result = labq(*args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("labq: ")
    assert words in lines[0]
    assert lines[0].endswith(" --help'")  # where to read more


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    ctx = click.Context(group)  # the groups labq imports on first use are listed too
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        else:
            yield (*path, name)


@pytest.mark.parametrize("path", list(_leaves(cli)), ids=" ".join)
def test_every_command_refuses_an_unknown_option_in_one_line(path, capsys) -> None:
    code = run(cli.main, [*path, "--no-such-option"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"labq: {' '.join(path)}: no such option '--no-such-option'")


def test_a_group_without_its_command_shows_its_help(labq) -> None:
    result = labq("job")
    assert result.returncode == 2
    assert "Commands:" in result.stderr + result.stdout
    assert "submit" in result.stderr + result.stdout
