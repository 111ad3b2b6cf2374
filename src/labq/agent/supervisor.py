"""The supervisor of a set an agent claimed: runs it, and writes what happens to its spool.

    python -m labq.agent.supervisor --set ID --dir SETDIR

The agent writes one JSON line on standard input (never in the environment or
on the command line, where a task could read it): ``claim``, ``plan``
(:mod:`labq.dispatch.planwire`), ``env`` (the set's task credentials), ``url``
and ``token`` (the server as the agent reaches it, and the agent token, for
the set's locks), ``lease`` and ``heartbeat_every`` (the server's), and
``settings`` and ``data_dir`` (the agent's own: backends, hooks, ``run_as``).

It runs :func:`~labq.dispatch.runner.run_set` as the in-server supervisor does,
with the agent's settings for the lab, and a :class:`~labq.agent.spool.SpoolReporter`:
every report goes to ``SETDIR/journal.jsonl`` for the agent to send, and the
agent's ``control`` and ``beat`` files say when to stop — a cancel, a lost
claim, or no heartbeat confirmed for the lease (the set is fenced: its tasks
end before the server can give its systems away). It never holds the database
URL. SIGTERM and SIGINT cancel the set. The exit status (as
:mod:`labq.dispatch.supervisor`'s: 0 ran, 1 could not run, 3 not ours) is also
written to ``SETDIR/exit``, for an agent that adopted the process after a restart.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from labq.agent.link import ClaimGone, Link, retrying
from labq.agent.spool import SetDir, SpoolReporter
from labq.config import load_settings
from labq.dispatch import containment
from labq.dispatch.access import TakeLocks
from labq.dispatch.identity import DynamicUsers
from labq.dispatch.logs import set_log_dir
from labq.dispatch.plan import SetPlan
from labq.dispatch.planwire import plan_from_json
from labq.dispatch.runner import run_set
from labq.dispatch.supervisor import (
    EXIT_CLAIM_LOST,
    EXIT_COULD_NOT_RUN,
    EXIT_RAN,
    fetch_options,
    lab_backends,
    prepare,
    read_secrets,
)
from labq.domain.locktable import Outcome
from labq.domain.states import RecipeState
from labq.errors import LabqError

MODULE: Final = "labq.agent.supervisor"
_MAX_REASON: Final = 500


@dataclass(frozen=True)
class Order:
    """What the agent hands its supervisor (see the module docstring)."""

    claim: str
    plan: SetPlan
    env: Mapping[str, str]
    url: str
    token: str
    lease: float
    heartbeat_every: float
    settings: str
    data_dir: Path

    @staticmethod
    def of(given: Mapping[str, Any]) -> Order:
        """Read the agent's JSON; ValueError (or KeyError, TypeError) when it is not one."""
        return Order(
            claim=str(given["claim"]),
            plan=plan_from_json(given["plan"]),
            env={str(k): str(v) for k, v in dict(given.get("env") or {}).items()},
            url=str(given["url"]),
            token=str(given["token"]),
            lease=float(given["lease"]),
            heartbeat_every=float(given["heartbeat_every"]),
            settings=str(given["settings"]),
            data_dir=Path(str(given["data_dir"])),
        )


@dataclass(frozen=True)
class _Told(Outcome):
    """A lock outcome as the server words it."""

    said: str = ""

    def describe(self) -> str:
        """The server's words for what the set waits on."""
        return self.said if not self.granted and self.said else super().describe()


def http_locks(link: Link, set_id: int, claim: str, lost: threading.Event) -> TakeLocks:
    """The set's declared locks, asked of the server (again after a network failure, until
    the set is fenced)."""

    def take() -> Outcome:
        try:
            answer = retrying(lambda: link.locks(set_id, claim), stop=lost)
        except ClaimGone:
            lost.set()
            raise
        refused = answer.get("refused")
        return _Told(
            granted=bool(answer.get("granted")),
            refused=None if refused is None else str(refused),
            said=str(answer.get("waiting") or ""),
        )

    return take


def supervise(set_id: int, spool: SetDir, order: Order, cancel: threading.Event) -> int:
    """Run the set to its end; the exit status."""
    settings = load_settings(order.settings)
    data_dir = order.data_dir
    mark = {containment.MARK_VARIABLE: containment.run_mark(order.claim)}
    plan = dataclasses.replace(
        order.plan, env={**order.plan.env, **order.env, "LABQ_URL": order.url, **mark}
    )
    lost = threading.Event()
    reporter = SpoolReporter(
        spool, log_root=set_log_dir(data_dir, set_id), lease=order.lease, cancel=cancel, lost=lost
    )
    link = Link(order.url, order.token)
    users: list[DynamicUsers] = []
    try:
        labs = {r.system.lab for r in plan.recipes}
        try:
            backends = lab_backends(settings, data_dir, labs, set_id=set_id, users=users)
        except Exception as exc:
            reason = f"cannot run this set: {_one_line(exc)}"
            for recipe in plan.recipes:
                reporter.recipe_state(recipe.id, RecipeState.ABORTED, reason)
            print(f"labq supervisor: set {set_id} {reason}", file=sys.stderr)
            return EXIT_COULD_NOT_RUN
        outcome = run_set(
            plan,
            backends,
            data_dir=data_dir,
            reporter=reporter,
            # reading two small files is cheap: look often, so a fence comes soon after the lease
            heartbeat_every=min(order.heartbeat_every, order.lease / 4),
            cancel=cancel,
            lost=lost,
            take_locks=http_locks(link, set_id, order.claim, lost),
            fetch=fetch_options(settings, data_dir, labs),
        )
    finally:
        for pool in users:
            pool.give_back()
        link.close()
    if lost.is_set():
        print(
            f"labq supervisor: set {set_id} is no longer ours; its tasks stopped", file=sys.stderr
        )
        return EXIT_CLAIM_LOST
    result = outcome.result.value if outcome.result else "none"
    print(f"labq supervisor: set {set_id} ended {outcome.state.value}, result {result}")
    return EXIT_RAN


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:_MAX_REASON] or type(exc).__name__


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description="Run one recipe set a lab agent claimed."
    )
    parser.add_argument("--set", type=int, required=True, dest="set_id", help="recipe set id")
    parser.add_argument("--dir", required=True, help="the set's directory on the agent host")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the set named on the command line; the exit status (see the module docstring)."""
    args = parse_args(argv)
    cancel = prepare()
    try:
        given = read_secrets(sys.stdin)
    except ValueError:  # a JSONDecodeError too: said as a missing key below
        given = {}
    return run(args.set_id, SetDir(Path(args.dir)), given, cancel)


def forked(set_id: int, request: Mapping[str, Any], cancel: threading.Event) -> int:
    """Run the set in a child of :mod:`labq.dispatch.forkserver` (its ``module`` is ours):
    the secrets came down its socket, the plan is read from the spool's ``claim.json``.

    Its pid (the host's, which ``request`` names) is recorded first: it runs from now on,
    and an agent that dies before it hears the pid must still find it after a restart."""
    spool = SetDir(Path(str(request["dir"])))
    spool.write_pid(int(request["pid"]))
    return run(set_id, spool, request["secrets"], cancel)


def run(set_id: int, spool: SetDir, given: Mapping[str, Any], cancel: threading.Event) -> int:
    """Run the set with the agent's ``given`` secrets (the plan and the set's task credentials
    from ``claim.json`` when not among them); writes and returns the exit status."""
    try:
        if "plan" not in given:  # too big for a fork server's packet: on disk, mode 0600
            work = spool.read_claim() or {}
            given = {**given, "plan": work.get("plan"), "env": work.get("env")}
        order = Order.of(given)
        if order.plan.id != set_id:
            raise ValueError(f"the plan is of set {order.plan.id}")
    except (ValueError, KeyError, TypeError, LabqError) as exc:
        print(f"labq supervisor: set {set_id} cannot run: {_one_line(exc)}", file=sys.stderr)
        code = EXIT_COULD_NOT_RUN
    else:
        try:
            code = supervise(set_id, spool, order, cancel)
        except Exception as exc:
            print(f"labq supervisor: set {set_id} failed: {_one_line(exc)}", file=sys.stderr)
            code = EXIT_COULD_NOT_RUN
    spool.write_exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
