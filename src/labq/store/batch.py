"""The scheduler's most frequent moves, many at a time, in a few statements.

One event can place a thousand sets. Made one by one (``move_recipe``,
``start_recipe_set``, ``set_usage``), each placement costs a dozen round trips;
here each kind of write is one statement for the whole batch — a read of the
rows' states, then ``executemany`` guarded UPDATEs (pipelined by psycopg) whose
summed row count must equal the batch, and multi-row INSERTs of the history.

The rules are the same as the one-by-one moves' (the domain decides, the SQL
guards check again), and so is the outcome: a batch that meets anything but
the plain case (a repeat, a system taken meanwhile) is handed to the one-by-one
moves, which say exactly what is wrong. Each method is one SAVEPOINT.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import (
    DateTime,
    Integer,
    String,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import TypeEngine

from labq.domain.lifecycle import usage_after_recipe
from labq.domain.states import (
    Condition,
    RecipeState,
    Usage,
    check_recipe_move,
    check_usage_move,
    recipe_predecessors,
    usage_predecessors,
)
from labq.errors import ConflictError
from labq.store.base import Db
from labq.store.columns import UTCDateTime, values_of
from labq.store.moves import STAMPS, RecipeMoves
from labq.store.supervisors import SupervisorStore
from labq.store.systems import SystemStore
from labq.store.tables import Labs, RecipeHistory, Recipes, RecipeSets, Systems, UsageHistory

CHUNK: Final = 500  # rows per statement: well under every database's parameter limit
Ref = Callable[[str], Any]  # a row's field in a per-row statement (a bound or joined column)
_IDS: Final[dict[str, TypeEngine[Any]]] = {"rid": Integer(), "sid": Integer()}


@dataclass(frozen=True)
class _System:
    id: int
    fqdn: str
    usage: Usage
    condition: str
    recipe_id: int | None


class BatchMoves:
    """Placements, queue moves, starts and idle systems, each batch in a few statements."""

    def __init__(
        self, db: Db, moves: RecipeMoves, systems: SystemStore, supervisors: SupervisorStore
    ) -> None:
        self.db = db
        self.conn = db.conn
        self.moves = moves
        self.systems = systems
        self.supervisors = supervisors

    def schedule_many(self, placements: Sequence[tuple[int, str]], *, now: datetime) -> None:
        """Schedule each recipe on its free system, as ``move_recipe(…, SCHEDULED, system=…)``."""
        if not placements:
            return
        with self.db.atomic():
            systems = self._systems_by_fqdn([fqdn for _, fqdn in placements])
            states = self._recipe_states([recipe for recipe, _ in placements])
            plain = len(set(systems)) == len(placements) and all(
                state is not RecipeState.SCHEDULED
                and check_recipe_move(state, RecipeState.SCHEDULED)
                and systems[fqdn].recipe_id is None
                and check_usage_move(systems[fqdn].usage, Usage.SCHEDULED)
                for (_, fqdn), state in zip(
                    placements, (states[r] for r, _ in placements), strict=True
                )
            )
            if not plain:
                for recipe, fqdn in placements:  # says exactly what is wrong, or is a repeat
                    self.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=now, system=fqdn)
                return
            target = RecipeState.SCHEDULED
            usage = usage_after_recipe(target, Condition.AUTOMATED)  # scheduled: mirrored
            rows = [{"rid": r, "sid": systems[f].id} for r, f in placements]
            self._each(
                lambda v: (
                    update(Recipes)
                    .where(
                        Recipes.id == v("rid"),
                        _one_of(Recipes.state, values_of(recipe_predecessors(target))),
                    )
                    .values(state=target.value, scheduled_at=now, system_id=v("sid"))
                ),
                rows,
                _IDS,
                "a recipe moved under us",
            )
            self._each(
                lambda v: (
                    update(Systems)
                    .where(
                        Systems.id == v("sid"),
                        Systems.recipe_id.is_(None),
                        _one_of(Systems.usage, values_of(usage_predecessors(usage))),
                    )
                    .values(usage=usage.value, recipe_id=v("rid"))
                ),
                rows,
                _IDS,
                "a system was taken under us",
            )
            self._history_many([(systems[f], usage, r) for r, f in placements], now)
            self._remember_many([r for r, _ in placements], target, now)

    def queue_many(self, recipes: Sequence[int], target: RecipeState, *, now: datetime) -> None:
        """Move recipes that hold no system to ``queued`` or ``assigned``, as ``move_recipe``."""
        if not recipes:
            return
        if target not in (RecipeState.QUEUED, RecipeState.ASSIGNED):
            raise ValueError(f"queue_many moves to queued or assigned, not {target.value}")
        with self.db.atomic():
            states = self._recipe_states(recipes)
            if not all(
                states[r] is not target
                and not states[r].holds_system
                and check_recipe_move(states[r], target)
                for r in recipes
            ):
                for recipe in recipes:  # says exactly what is wrong, or is a repeat
                    self.moves.move_recipe(recipe, target, now=now)
                return
            stamp = {STAMPS[target]: now} if target in STAMPS else {}
            self._each(
                lambda v: (
                    update(Recipes)
                    .where(
                        Recipes.id == v("rid"),
                        _one_of(Recipes.state, values_of(recipe_predecessors(target))),
                    )
                    .values(state=target.value, **stamp)
                ),
                [{"rid": r} for r in recipes],
                {"rid": Integer()},
                "a recipe moved under us",
            )
            self._remember_many(recipes, target, now)

    def start_many(self, starts: Sequence[tuple[int, str, str]], *, now: datetime) -> None:
        """Start each ``(set, lab, claim)``, as ``start_recipe_set`` (every recipe must be
        scheduled on a system of the lab)."""
        if not starts:
            return
        try:
            self._start_plainly(starts, now)
        except _Fallback:
            for set_id, lab, claim in starts:  # says exactly what is wrong, or is a repeat
                self.supervisors.start_recipe_set(set_id, lab=lab, now=now, claim=claim)

    def _start_plainly(self, starts: Sequence[tuple[int, str, str]], now: datetime) -> None:
        with self.db.atomic():
            labs: dict[str, int] = dict(self.conn.execute(select(Labs.name, Labs.id)).all())

            def statement(v: Ref) -> Any:
                elsewhere = ~exists().where(
                    Systems.id == Recipes.system_id, Systems.lab_id == v("lab")
                )
                not_ready = exists().where(
                    Recipes.recipe_set_id == RecipeSets.id,
                    (Recipes.state != RecipeState.SCHEDULED.value) | elsewhere,
                )
                return (
                    update(RecipeSets)
                    .where(
                        RecipeSets.id == v("set"),
                        RecipeSets.started_at.is_(None),
                        RecipeSets.finished_at.is_(None),
                        ~not_ready,
                    )
                    .values(started_at=now, lab_id=v("lab"), claim=v("claim"), heartbeat_at=now)
                )

            rows = [{"set": s, "lab": labs.get(lab, -1), "claim": c} for s, lab, c in starts]
            types: dict[str, TypeEngine[Any]] = {
                "set": Integer(),
                "lab": Integer(),
                "claim": String(),
            }
            if self._count_each(statement, rows, types) != len(rows):
                raise _Fallback  # rolls the savepoint back

    def idle_many(self, fqdns: Sequence[str], *, now: datetime) -> None:
        """Free systems (no recipe) whose pending-system event found nothing: ``idle``."""
        if not fqdns:
            return
        with self.db.atomic():
            systems = self._systems_by_fqdn(fqdns)
            if len(systems) != len(fqdns) or not all(
                s.recipe_id is None
                and s.usage is not Usage.IDLE
                and check_usage_move(s.usage, Usage.IDLE)
                for s in systems.values()
            ):
                for fqdn in fqdns:
                    self.systems.set_usage(fqdn, Usage.IDLE, now=now)
                return
            self._each(
                lambda v: (
                    update(Systems)
                    .where(
                        Systems.id == v("sid"),
                        Systems.recipe_id.is_(None),
                        _one_of(Systems.usage, values_of(usage_predecessors(Usage.IDLE))),
                    )
                    .values(usage=Usage.IDLE.value)
                ),
                [{"sid": s.id} for s in systems.values()],
                {"sid": Integer()},
                "a system changed under us",
            )
            self._history_many([(s, Usage.IDLE, None) for s in systems.values()], now)

    # --- the parts --------------------------------------------------------------------

    def _systems_by_fqdn(self, fqdns: Sequence[str]) -> dict[str, _System]:
        out: dict[str, _System] = {}
        for chunk in _chunks(list(dict.fromkeys(fqdns))):
            for row in self.conn.execute(
                select(
                    Systems.id, Systems.fqdn, Systems.usage, Systems.condition, Systems.recipe_id
                ).where(Systems.fqdn.in_(chunk))
            ):
                out[row.fqdn] = _System(
                    row.id, row.fqdn, Usage(row.usage), row.condition, row.recipe_id
                )
        return out

    def _recipe_states(self, recipes: Sequence[int]) -> dict[int, RecipeState]:
        out: dict[int, RecipeState] = {}
        for chunk in _chunks(list(recipes)):
            stmt = select(Recipes.id, Recipes.state).where(Recipes.id.in_(chunk))
            out.update((rid, RecipeState(state)) for rid, state in self.conn.execute(stmt))
        missing = set(recipes) - set(out)
        if missing:
            raise ConflictError(f"no recipe {min(missing)}")
        return out

    def _each(
        self,
        statement: Callable[[Ref], Any],
        rows: list[dict[str, Any]],
        types: dict[str, TypeEngine[Any]],
        refusal: str,
    ) -> None:
        """One guarded UPDATE per row, all of which must match: ConflictError otherwise."""
        if self._count_each(statement, rows, types) != len(rows):
            raise ConflictError(f"{refusal}; nothing was moved")

    def _count_each(
        self,
        statement: Callable[[Ref], Any],
        rows: list[dict[str, Any]],
        types: dict[str, TypeEngine[Any]],
    ) -> int:
        """Run ``statement`` for every row; the rows it changed.

        On PostgreSQL one statement joins the rows, passed as arrays and
        ``unnest``-ed (one round trip, a hash join, the same SQL text every
        time); elsewhere ``executemany`` with bound parameters (SQLite has no
        round trips to save).
        """
        if self.conn.dialect.name != "postgresql":
            return int(self.conn.execute(statement(bindparam), rows).rowcount)
        arrays = [bindparam(n, type_=ARRAY(t)) for n, t in types.items()]
        table = func.unnest(*arrays).table_valued(*types).render_derived(name="v")
        params = {n: [row[n] for row in rows] for n in types}
        return int(self.conn.execute(statement(table.c.__getitem__), params).rowcount)

    def _history_many(
        self, changes: Sequence[tuple[_System, Usage, int | None]], now: datetime
    ) -> None:
        """Close each system's open usage row (never before it began) and open the next."""
        ended = case(
            (UsageHistory.started_at > now, UsageHistory.started_at),
            else_=literal(now, UTCDateTime()),
        )
        ends: dict[int, datetime] = {}
        for chunk in _chunks([system.id for system, _, _ in changes]):
            closed = self.conn.execute(
                update(UsageHistory)
                .where(UsageHistory.system_id.in_(chunk), UsageHistory.ended_at.is_(None))
                .values(ended_at=ended)
                .returning(UsageHistory.system_id, UsageHistory.ended_at)
            )
            ends.update((sid, end) for sid, end in closed if end is not None)
        if len(ends) != len(changes):
            raise ConflictError("a system's usage history has no open row; nothing was moved")
        self._insert_each(
            UsageHistory,
            [
                {
                    "system_id": system.id,
                    "usage": usage.value,
                    "condition": system.condition,
                    "recipe_id": recipe,
                    "started_at": ends[system.id],
                }
                for system, usage, recipe in changes
            ],
            {
                "system_id": Integer(),
                "usage": String(),
                "condition": String(),
                "recipe_id": Integer(),
                "started_at": DateTime(timezone=True),
            },
        )

    def _remember_many(self, recipes: Sequence[int], state: RecipeState, now: datetime) -> None:
        self._insert_each(
            RecipeHistory,
            [{"recipe_id": r, "state": state.value, "at": now} for r in recipes],
            {"recipe_id": Integer(), "state": String(), "at": DateTime(timezone=True)},
        )

    def _insert_each(
        self, table: Any, rows: list[dict[str, Any]], types: dict[str, TypeEngine[Any]]
    ) -> None:
        """Insert the rows: on PostgreSQL from ``unnest``-ed arrays, elsewhere ``executemany``."""
        if self.conn.dialect.name != "postgresql":
            self.conn.execute(insert(table), rows)
            return
        arrays = [bindparam(n, type_=ARRAY(t)) for n, t in types.items()]
        source = func.unnest(*arrays).table_valued(*types).render_derived(name="v")
        stmt = insert(table).from_select(list(types), select(*(source.c[n] for n in types)))
        self.conn.execute(stmt, {n: [row[n] for row in rows] for n in types})


class _Fallback(Exception):  # noqa: N818 - internal signal, never escapes the store
    """The batch met something that is not the plain case: do it one by one."""


def _one_of(column: Any, values: Sequence[str]) -> Any:
    """``column IN ('a', 'b')`` written out (``executemany`` takes no expanding parameters);
    the values are the state machines' own names, never input."""
    if not all(v.replace("_", "").isalnum() for v in values):
        raise ValueError(f"not a state name: {values!r}")
    return column.in_([literal_column(f"'{v}'") for v in values])


def _chunks(items: list[Any]) -> list[list[Any]]:
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
