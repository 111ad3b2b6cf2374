"""API tokens: made once, shown once, kept only as the SHA-256 digest of the secret.

A secret is ``lq_`` and 43 URL-safe characters (``secrets.token_urlsafe(32)``:
256 random bits), so a digest lookup needs no salt and no slow hash. The
database finds the row by its digest; the digest is compared again with
:func:`hmac.compare_digest`, and nothing about the secret is ever written.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import ColumnElement, Row, insert, or_, select, update

from labq.domain.model import User
from labq.errors import ConflictError, InputError, NotFoundError
from labq.store.base import Db
from labq.store.people import PeopleStore
from labq.store.tables import RecipeSets, Tokens, Users
from labq.store.views import Credential, TokenView

PREFIX: Final = "lq_"
# last_used_at is written at most this often, so reading with a token rarely writes.
USE_RESOLUTION: Final = timedelta(seconds=60)


def digest_of(secret: str) -> str:
    """The SHA-256 hex digest of a secret: what the ``tokens`` table keeps."""
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenStore:
    """Creating, checking, listing and revoking API tokens."""

    def __init__(self, db: Db, people: PeopleStore) -> None:
        self.db = db
        self.conn = db.conn
        self.people = people

    def create_token(
        self,
        user: str,
        name: str,
        *,
        now: datetime,
        expires_at: datetime | None = None,
        recipe_set: int | None = None,
        actor: str | None = None,
    ) -> tuple[int, str]:
        """A new token for ``user``: its id and the secret, which only the caller ever sees.

        ``recipe_set`` makes it that set's own credential (for its supervisor and
        tasks): it stops working when the set ends.
        """
        if not name:
            raise InputError("a token needs a name", place="name")
        if expires_at is not None and expires_at <= now:
            raise InputError("a token must expire after it is made", place="expires_at")
        secret = PREFIX + secrets.token_urlsafe(32)
        with self.db.atomic():
            user_id = self.db.user_id(user)
            if recipe_set is not None:
                stmt = select(RecipeSets.finished_at).where(RecipeSets.id == recipe_set)
                found = self.conn.execute(stmt).one_or_none()
                if found is None:
                    raise NotFoundError(f"no recipe set {recipe_set}")
                if found.finished_at is not None:
                    raise ConflictError(f"recipe set {recipe_set} has ended")
            token_id = self.conn.execute(
                insert(Tokens)
                .values(
                    user_id=user_id,
                    name=name,
                    digest=digest_of(secret),
                    created_at=now,
                    expires_at=expires_at,
                    recipe_set_id=recipe_set,
                )
                .returning(Tokens.id)
            ).scalar_one()
            self.db.log(now, actor or user, "token", "create", object_id=token_id, name=name)
        return token_id, secret

    def authenticate(self, secret: str, *, now: datetime) -> User | None:
        """The user a valid token speaks for, None for anything else (see :meth:`credential`)."""
        found = self.credential(secret, now=now)
        return None if found is None else found.user

    def credential(self, secret: str, *, now: datetime) -> Credential | None:
        """The user and scope of a valid token; None when unknown, revoked or expired.

        A set's own token is valid only while the set has not ended. Records
        ``last_used_at`` (at most once a minute), so call it in a transaction.
        """
        row = self._valid_row(secret, now=now)
        if row is None:
            return None
        if row.last_used_at is None or now - row.last_used_at >= USE_RESOLUTION:
            with self.db.atomic():
                self.conn.execute(
                    update(Tokens)
                    .where(Tokens.id == row.id, Tokens.revoked_at.is_(None))
                    .values(last_used_at=now)
                )
        return Credential(row.id, self.people.get_user(row.name), row.recipe_set_id)

    def token_is_valid(self, secret: str, *, now: datetime) -> bool:
        """Whether ``secret`` is a valid token, without writing anything (for checking a
        request's credential before its body is read: :mod:`labq.entrance`)."""
        return self._valid_row(secret, now=now) is not None

    def _valid_row(
        self, secret: str, *, now: datetime
    ) -> Row[int, str, datetime | None, int | None, str] | None:
        if not secret.startswith(PREFIX):
            return None
        wanted = digest_of(secret)
        row = self.conn.execute(
            select(
                Tokens.id,
                Tokens.digest,
                Tokens.last_used_at,
                Tokens.recipe_set_id,
                Users.name,
            )
            .join(Users, Users.id == Tokens.user_id)
            .outerjoin(RecipeSets, RecipeSets.id == Tokens.recipe_set_id)
            .where(Tokens.digest == wanted, *_valid(now))
        ).one_or_none()
        if row is None or not hmac.compare_digest(row.digest, wanted):
            return None
        return row

    def list_tokens(self, user: str) -> list[TokenView]:
        """Every token of ``user``, revoked and expired ones included, oldest first."""
        stmt = (
            select(Tokens, Users.name.label("user"), RecipeSets.finished_at.label("set_ended"))
            .join(Users, Users.id == Tokens.user_id)
            .outerjoin(RecipeSets, RecipeSets.id == Tokens.recipe_set_id)
            .where(Tokens.user_id == self.db.user_id(user))
            .order_by(Tokens.id)
        )
        return [
            TokenView(
                id=row.id,
                user=row.user,
                name=row.name,
                created_at=row.created_at,
                last_used_at=row.last_used_at,
                expires_at=row.expires_at,
                revoked_at=row.revoked_at,
                recipe_set=row.recipe_set_id,
                set_ended_at=row.set_ended,
            )
            for row in self.conn.execute(stmt)
        ]

    def token_owner(self, token_id: int) -> str:
        """The name of the user a token belongs to (for permission checks)."""
        stmt = select(Users.name).join(Tokens, Tokens.user_id == Users.id)
        name = self.conn.execute(stmt.where(Tokens.id == token_id)).scalar_one_or_none()
        if name is None:
            raise NotFoundError(f"no token {token_id}")
        return name

    def revoke_token(self, token_id: int, *, actor: str, now: datetime) -> bool:
        """Revoke a token for good; False when it already was."""
        with self.db.atomic():
            owner = self.token_owner(token_id)
            changed = self.conn.execute(
                update(Tokens)
                .where(Tokens.id == token_id, Tokens.revoked_at.is_(None))
                .values(revoked_at=now)
            ).rowcount
            if changed != 1:
                return False
            self.db.log(now, actor, "token", "revoke", object_id=token_id, old=owner)
        return True


def _valid(now: datetime) -> list[ColumnElement[bool]]:
    return [
        Tokens.revoked_at.is_(None),
        or_(Tokens.expires_at.is_(None), Tokens.expires_at > now),
        or_(Tokens.recipe_set_id.is_(None), RecipeSets.finished_at.is_(None)),
    ]
