"""Users, groups and who belongs to which."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy import delete, insert, select

from labq.domain.model import EVERYBODY, User
from labq.errors import ConflictError, NotFoundError
from labq.store.base import Db
from labq.store.tables import Groups, Memberships, Users


class PeopleStore:
    """Users (admins among them), groups and memberships; every change is logged."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def add_user(self, name: str, *, actor: str, now: datetime, admin: bool = False) -> int:
        """Add a user."""
        with self.db.atomic():
            if self.conn.execute(select(Users.id).where(Users.name == name)).first():
                raise ConflictError(f"user {name!r} already exists")
            stmt = insert(Users).values(name=name, admin=admin).returning(Users.id)
            user_id = self.conn.execute(stmt).scalar_one()
            self.db.log(now, actor, "user", "add", object_id=user_id, name=name, new=_role(admin))
        return user_id

    def get_user(self, name: str) -> User:
        """One user with the groups it belongs to."""
        users = self._load_users(name)
        if not users:
            raise NotFoundError(f"no user named {name!r}")
        return users[0]

    def list_users(self) -> list[User]:
        """Every user, sorted by name."""
        return self._load_users(None)

    def add_group(self, name: str, *, actor: str, now: datetime) -> int:
        """Add a group (``everybody`` exists from the start)."""
        with self.db.atomic():
            if self.conn.execute(select(Groups.id).where(Groups.name == name)).first():
                raise ConflictError(f"group {name!r} already exists")
            stmt = insert(Groups).values(name=name).returning(Groups.id)
            group_id = self.conn.execute(stmt).scalar_one()
            self.db.log(now, actor, "group", "add", object_id=group_id, name=name)
        return group_id

    def list_groups(self) -> list[str]:
        """Every group's name, sorted."""
        return list(self.conn.execute(select(Groups.name).order_by(Groups.name)).scalars())

    def add_member(self, user: str, group: str, *, actor: str, now: datetime) -> bool:
        """Put a user in a group; False when it already was (everybody is in ``everybody``)."""
        with self.db.atomic():
            user_id, group_id = self.db.user_id(user), self.db.group_id(group)
            if group == EVERYBODY or self._is_member(user_id, group_id):
                return False
            self.conn.execute(insert(Memberships).values(user_id=user_id, group_id=group_id))
            self.db.log(now, actor, "group", "add member", object_id=group_id, name=group, new=user)
        return True

    def remove_member(self, user: str, group: str, *, actor: str, now: datetime) -> bool:
        """Take a user out of a group; False when it was not in it."""
        with self.db.atomic():
            user_id, group_id = self.db.user_id(user), self.db.group_id(group)
            gone = self.conn.execute(
                delete(Memberships).where(
                    Memberships.user_id == user_id, Memberships.group_id == group_id
                )
            ).rowcount
            if not gone:
                return False
            self.db.log(
                now, actor, "group", "remove member", object_id=group_id, name=group, old=user
            )
        return True

    def _is_member(self, user_id: int, group_id: int) -> bool:
        stmt = select(Memberships.user_id).where(
            Memberships.user_id == user_id, Memberships.group_id == group_id
        )
        return self.conn.execute(stmt).first() is not None

    def _load_users(self, name: str | None) -> list[User]:
        users = select(Users.id, Users.name, Users.admin).order_by(Users.name)
        if name is not None:
            users = users.where(Users.name == name)
        rows = self.conn.execute(users).all()
        groups: dict[int, set[str]] = defaultdict(set)
        stmt = (
            select(Memberships.user_id, Groups.name)
            .join(Groups, Groups.id == Memberships.group_id)
            .where(Memberships.user_id.in_([r.id for r in rows]))
        )
        for user_id, group in self.conn.execute(stmt):
            groups[user_id].add(group)
        return [User(r.name, r.admin, frozenset(groups[r.id])) for r in rows]


def _role(admin: bool) -> str:
    return "admin" if admin else "user"
