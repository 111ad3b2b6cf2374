"""``python -m labq.agent``: the lab agent, with the options of ``labq agent``.

    python -m labq.agent --url URL [--token-file FILE | --token TOKEN] [--lab LAB]...
                         [--name NAME] [--data-dir DIR] [--max-sets N] [--keep-sets N]
                         [--config FILE]

The token comes from ``--token``, else ``--token-file``, else ``$LABQ_AGENT_TOKEN``
(``--token`` shows it to anyone who runs ``ps``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from labq.agent.process import DEFAULT_KEEP_SETS, DEFAULT_MAX_SETS, run

TOKEN_VARIABLE: Final = "LABQ_AGENT_TOKEN"  # noqa: S105 - its name, not a token


def agent_token(token: str | None, token_file: str | None) -> str:
    """The agent token from the options or the environment; ValueError saying what is missing."""
    if token:
        return token.strip()
    if token_file:
        try:
            text = Path(token_file).read_text().strip()
        except OSError as exc:
            raise ValueError(f"cannot read the token file {token_file}: {exc.strerror}") from None
        if not text:
            raise ValueError(f"the token file {token_file} is empty")
        return text
    if os.environ.get(TOKEN_VARIABLE, "").strip():
        return os.environ[TOKEN_VARIABLE].strip()
    raise ValueError(f"no agent token: give --token-file FILE (or ${TOKEN_VARIABLE})")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m labq.agent",
        description="Run recipe sets of a lab beside it, for a labq server reached over HTTP.",
    )
    parser.add_argument("--url", required=True, help="the labq server, e.g. https://labq.example")
    parser.add_argument("--token", help="the agent token (visible in ps: prefer --token-file)")
    parser.add_argument("--token-file", help="a file holding the agent token")
    parser.add_argument(
        "--lab", action="append", default=[], help="a lab of the token (all of them by default)"
    )
    parser.add_argument("--name", help="the agent's name, checked against the token's")
    parser.add_argument("--data-dir", help="where sets, logs and workspaces go")
    parser.add_argument(
        "--max-sets", type=int, help=f"sets run at once (default {DEFAULT_MAX_SETS})"
    )
    parser.add_argument(
        "--keep-sets",
        type=int,
        help=f"finished sets whose logs are kept here (default {DEFAULT_KEEP_SETS})",
    )
    parser.add_argument("--config", help="this host's settings file (labs: backends, hooks)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent; its exit status."""
    args = parse_args(argv)
    try:
        token = agent_token(args.token, args.token_file)
    except ValueError as exc:
        print(f"labq agent: {exc}", file=sys.stderr)
        return 2
    return run(
        url=args.url,
        token=token,
        labs=tuple(args.lab),
        name=args.name,
        data_dir=args.data_dir,
        max_sets=args.max_sets,
        config=args.config,
        keep_sets=args.keep_sets,
    )


if __name__ == "__main__":
    sys.exit(main())
