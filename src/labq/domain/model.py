"""Labs, systems, pools, groups, users and the access rules that join them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from labq.domain.inventory import Inventory
from labq.domain.priority import Priority
from labq.domain.requirements import Fact, Facts, Scalar
from labq.domain.states import Condition, Usage

EVERYBODY: Final = "everybody"
_BUILTIN_FACTS: Final = ("fqdn", "lab", "arch", "owner", "pool", "condition")


@dataclass(frozen=True)
class Lab:
    """A lab controller: systems that share provisioning infrastructure."""

    name: str


@dataclass
class System:
    """A machine in a lab, with what the scheduler needs to know of it."""

    fqdn: str
    lab: str
    arch: str = "x86_64"
    attributes: dict[str, Scalar] = field(default_factory=dict)
    pools: frozenset[str] = frozenset()
    owner: str | None = None
    condition: Condition = Condition.AUTOMATED
    usage: Usage = Usage.IDLE
    recipe: int | None = None  # the recipe that holds it, if one does
    inventory: Inventory = field(default_factory=Inventory)
    # when it was added (UTC, ``YYYY-MM-DDTHH:MM:SSZ``), as the store knows it; not identity
    added: str | None = field(default=None, compare=False)

    def facts(self) -> Facts:
        """The properties host requirements are evaluated against.

        The inventory's facts win over attributes of the same name: they are
        what the system was found to have.
        """
        out: dict[str, Fact] = {k: v for k, v in self.attributes.items() if k not in _BUILTIN_FACTS}
        out.update(self.inventory.facts())
        if self.added is not None:
            out["added"] = self.added
        out.update(fqdn=self.fqdn, lab=self.lab, arch=self.arch, pool=self.pools)
        out["condition"] = self.condition.value
        if self.owner is not None:
            out["owner"] = self.owner
        return out


@dataclass(frozen=True)
class User:
    """Someone who submits jobs; admins change systems, labs, pools and rules."""

    name: str
    admin: bool = False
    groups: frozenset[str] = frozenset()

    def member_of(self, group: str) -> bool:
        """Everyone belongs to ``everybody``; other groups need membership."""
        return group == EVERYBODY or group in self.groups


@dataclass
class AccessPolicy:
    """Which groups may run automated jobs on each pool, and at what maximum priority.

    A pool that never had a rule is open to every group without a cap, and so is
    a system in no pool; once a pool has had a rule, only its rules count (taking
    the last one away closes the pool rather than opening it). Every group is
    also a member of ``everybody``, so a rule for ``everybody`` applies to every
    job (seed 002: "Medium, Medium (any job)").
    """

    rules: dict[str, dict[str, Priority]] = field(default_factory=dict)

    def allow(self, pool: str, group: str, maximum: Priority) -> None:
        """Let ``group`` run automated jobs on ``pool`` up to ``maximum``."""
        self.rules.setdefault(pool, {})[group] = maximum

    def revoke(self, pool: str, group: str) -> None:
        """Remove ``group``'s rule on ``pool`` (the pool stays restricted)."""
        self.rules.setdefault(pool, {}).pop(group, None)

    def maximum_on_pool(self, pool: str, group: str) -> Priority | None:
        """The cap ``group`` has on one pool, None when it may not use it."""
        rules = self.rules.get(pool)
        if rules is None:
            return Priority.URGENT
        caps = [cap for g, cap in rules.items() if g in (group, EVERYBODY)]
        return max(caps) if caps else None

    def maximum(self, pools: Iterable[str], group: str | None) -> Priority | None:
        """Seed 002: the highest maximum effective priority over a system's pools."""
        group = group or EVERYBODY
        best: Priority | None = None
        any_pool = False
        for pool in pools:
            any_pool = True
            cap = self.maximum_on_pool(pool, group)
            if cap is not None and (best is None or cap > best):
                best = cap
        return best if any_pool else Priority.URGENT
