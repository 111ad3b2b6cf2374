"""Tokens and passwords: only digests are stored; revoked, expired and ended-set tokens fail."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select

from labq.domain.states import RecipeState
from labq.errors import ConflictError, InputError, NotFoundError
from labq.store import Repository
from labq.store.passwords import hash_password, verify_password
from labq.store.tables import Activity, Tokens, Users

from .conftest import ADMIN, at, job_spec, recipe_ids


def test_a_token_is_shown_once_and_stored_as_its_digest(seeded: Repository) -> None:
    token_id, secret = seeded.tokens.create_token("alice", "laptop", now=at(1))
    assert secret.startswith("lq_")
    assert len(secret) == 46
    stored = seeded.conn.execute(select(Tokens)).one()
    assert stored.digest == hashlib.sha256(secret.encode()).hexdigest()
    everything = " ".join(str(v) for v in stored)
    assert secret not in everything
    assert secret[3:] not in everything
    logged = seeded.conn.execute(select(Activity).where(Activity.object_kind == "token")).all()
    assert [(a.action, a.object_id, a.actor) for a in logged] == [("create", token_id, "alice")]
    assert secret not in " ".join(str(v) for row in logged for v in row)


def test_a_token_authenticates_its_user_and_records_its_use(seeded: Repository) -> None:
    token_id, secret = seeded.tokens.create_token("alice", "ci", now=at(1))
    user = seeded.tokens.authenticate(secret, now=at(2))
    assert user is not None
    assert (user.name, user.groups) == ("alice", frozenset({"kernel-qe"}))
    credential = seeded.tokens.credential(secret, now=at(3))
    assert credential is not None
    assert (credential.token_id, credential.recipe_set) == (
        token_id,
        None,
    )
    # Written at most once a minute, so a busy client does not write on every call.
    assert seeded.tokens.list_tokens("alice")[0].last_used_at == at(2)
    seeded.tokens.authenticate(secret, now=at(200))
    assert seeded.tokens.list_tokens("alice")[0].last_used_at == at(200)


@pytest.mark.parametrize(
    "guess", ["", "lq_", "lq_nothing", "not-a-token", "lq_" + "A" * 43, "x" * 5000]
)
def test_anything_but_a_real_secret_is_refused(seeded: Repository, guess: str) -> None:
    _, secret = seeded.tokens.create_token("alice", "ci", now=at(1))
    assert seeded.tokens.authenticate(guess, now=at(2)) is None
    assert seeded.tokens.authenticate(secret[:-1], now=at(2)) is None
    assert seeded.tokens.authenticate(secret + "x", now=at(2)) is None


def test_revoked_and_expired_tokens_are_refused(seeded: Repository) -> None:
    revoked, revoked_secret = seeded.tokens.create_token("bob", "old", now=at(1))
    _, expiring = seeded.tokens.create_token("bob", "day", now=at(1), expires_at=at(100))
    assert seeded.tokens.revoke_token(revoked, actor=ADMIN, now=at(5))
    assert not seeded.tokens.revoke_token(revoked, actor=ADMIN, now=at(6))  # already
    assert seeded.tokens.authenticate(revoked_secret, now=at(7)) is None
    assert seeded.tokens.authenticate(expiring, now=at(99)) is not None
    assert seeded.tokens.authenticate(expiring, now=at(100)) is None
    listed = seeded.tokens.list_tokens("bob")
    assert [(t.name, t.revoked_at, t.valid_at(at(50))) for t in listed] == [
        ("old", at(5), False),
        ("day", None, True),
    ]
    assert seeded.tokens.list_tokens("alice") == []
    with pytest.raises(NotFoundError):
        seeded.tokens.revoke_token(revoked + 100, actor=ADMIN, now=at(8))
    with pytest.raises(InputError, match="expire after"):
        seeded.tokens.create_token("bob", "never", now=at(10), expires_at=at(10))
    with pytest.raises(NotFoundError):
        seeded.tokens.create_token("nobody", "x", now=at(10))


def test_checking_a_token_at_the_door_writes_nothing(seeded: Repository) -> None:
    # labq.entrance asks before a body is read: valid or not, as credential() would say
    revoked, revoked_secret = seeded.tokens.create_token("bob", "old", now=at(1))
    _, expiring = seeded.tokens.create_token("bob", "day", now=at(1), expires_at=at(100))
    seeded.tokens.revoke_token(revoked, actor=ADMIN, now=at(5))
    assert seeded.tokens.token_is_valid(expiring, now=at(99))
    assert not seeded.tokens.token_is_valid(expiring, now=at(100))
    assert not seeded.tokens.token_is_valid(revoked_secret, now=at(6))
    assert not seeded.tokens.token_is_valid("lq_" + "A" * 43, now=at(6))
    assert [t.last_used_at for t in seeded.tokens.list_tokens("bob")] == [None, None]


def test_a_sets_own_token_works_only_while_the_set_runs(seeded: Repository) -> None:
    job_id = seeded.queue.submit_job(job_spec(), owner="bob", now=at(1), source_format="native")
    ((recipe,),) = recipe_ids(seeded, job_id)
    set_id = seeded.jobs.load_job(job_id).sets[0].id
    _, secret = seeded.tokens.create_token("bob", f"set {set_id}", now=at(2), recipe_set=set_id)
    credential = seeded.tokens.credential(secret, now=at(3))
    assert credential is not None
    assert credential.recipe_set == set_id
    seeded.moves.move_recipe(recipe, RecipeState.CANCELLED, now=at(4))
    assert seeded.tokens.credential(secret, now=at(5)) is None
    with pytest.raises(ConflictError, match="ended"):
        seeded.tokens.create_token("bob", "late", now=at(6), recipe_set=set_id)
    with pytest.raises(NotFoundError):
        seeded.tokens.create_token("bob", "none", now=at(6), recipe_set=set_id + 100)


def test_a_password_is_kept_as_a_salted_scrypt_digest(seeded: Repository) -> None:
    seeded.passwords.set_password("alice", "correct horse", actor=ADMIN, now=at(1))
    stored = seeded.conn.execute(
        select(Users.password_digest).where(Users.name == "alice")
    ).scalar_one()
    assert stored.startswith("scrypt$16384$8$1$")
    assert "correct horse" not in stored
    assert seeded.passwords.check_password("alice", "correct horse")
    assert not seeded.passwords.check_password("alice", "correct horse ")
    assert not seeded.passwords.check_password("bob", "correct horse")  # none set
    assert not seeded.passwords.check_password("nobody", "correct horse")
    seeded.passwords.set_password("bob", "correct horse", actor=ADMIN, now=at(2))
    bobs = seeded.conn.execute(select(Users.password_digest).where(Users.name == "bob"))
    assert bobs.scalar_one() != stored  # salted
    seeded.passwords.set_password("alice", None, actor="alice", now=at(3))
    assert not seeded.passwords.check_password("alice", "correct horse")
    actions = seeded.log.activity(kind="user")
    assert [a.action for a in actions[:3]] == ["remove password", "set password", "set password"]
    assert all("horse" not in str(a) for a in actions)
    with pytest.raises(InputError):
        seeded.passwords.set_password("alice", "", actor=ADMIN, now=at(4))


def test_digests_carry_their_parameters() -> None:
    cheap = hash_password("pw", cost=(2**10, 8, 1))
    assert cheap.startswith("scrypt$1024$8$1$")
    assert verify_password("pw", cheap)
    assert not verify_password("pW", cheap)
    assert not verify_password("pw", "pbkdf2$1$x$y")
    assert not verify_password("pw", "scrypt$nonsense")
