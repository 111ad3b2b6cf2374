"""Passwords for the web login: scrypt digests with their salt and parameters.

A digest reads ``scrypt$n$r$p$salt$hash`` (salt and hash in URL-safe base64),
so the cost can be raised later without invalidating what is stored: a
password is always checked with the parameters it was hashed with.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Final

from sqlalchemy import select, update

from labq.errors import InputError
from labq.store.base import Db
from labq.store.tables import Users

SCHEME: Final = "scrypt"
COST: Final = (2**14, 8, 1)  # n, r, p: about 16 MiB and a few tens of milliseconds
SALT_BYTES: Final = 16
KEY_BYTES: Final = 32
MAX_PASSWORD: Final = 1024
# Checked against when the user is unknown or has no password: the same work either way.
_DUMMY: Final = "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$" + "A" * 43 + "="


def hash_password(password: str, *, cost: tuple[int, int, int] = COST) -> str:
    """A fresh salted scrypt digest of ``password``, parameters included."""
    n, r, p = cost
    salt = secrets.token_bytes(SALT_BYTES)
    key = _scrypt(password, salt, n, r, p)
    return "$".join((SCHEME, str(n), str(r), str(p), _b64(salt), _b64(key)))


def verify_password(password: str, digest: str) -> bool:
    """Whether ``password`` matches ``digest`` (compared in constant time)."""
    try:
        scheme, n, r, p, salt, key = digest.split("$")
        if scheme != SCHEME:
            return False
        expected = base64.urlsafe_b64decode(key)
        actual = _scrypt(password, base64.urlsafe_b64decode(salt), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    # maxmem: scrypt needs 128·n·r bytes; OpenSSL's default cap is lower than that.
    return hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=r, p=p, dklen=KEY_BYTES, maxmem=256 * n * r + 2**20
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


class PasswordStore:
    """Setting and checking users' passwords; only digests are stored."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.conn = db.conn

    def set_password(self, user: str, password: str | None, *, actor: str, now: datetime) -> None:
        """Set (or with None, remove) a user's password. The activity log says only that."""
        digest = None
        if password is not None:
            if not password or len(password) > MAX_PASSWORD:
                raise InputError(f"a password has 1 to {MAX_PASSWORD} characters", place="password")
            digest = hash_password(password)
        with self.db.atomic():
            user_id = self.db.user_id(user)
            self.conn.execute(
                update(Users).where(Users.id == user_id).values(password_digest=digest)
            )
            action = "set password" if digest else "remove password"
            self.db.log(now, actor, "user", action, object_id=user_id, name=user)

    def check_password(self, user: str, password: str) -> bool:
        """Whether ``password`` is the user's; False for an unknown user or none set."""
        stmt = select(Users.password_digest).where(Users.name == user)
        digest = self.conn.execute(stmt).scalar_one_or_none()
        if digest is None:
            verify_password(password, _DUMMY)  # take as long as a real check
            return False
        return verify_password(password, digest)
