"""The entrance: which requests may send a body, decided from the head (labq.entrance).

Against a real SQLite database with the API's seeded users and tokens; the
protocol that asks it is tested on a real server in
``tests/acceptance/test_slow_clients.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from labq.api.agent import agent
from labq.entrance import OPEN, OPEN_BODY_BYTES, Entrance
from labq.gateway.deps import credential, dependants
from labq.serving import Admit, Head, Refuse, Verdict
from labq.store import transaction
from labq.store.tokens import digest_of
from labq.web.session import COOKIE, current_session
from tests.api.conftest import T0, Lab

BODY = (b"content-length", b"10")


def _head(path: str, *headers: tuple[bytes, bytes], method: str = "POST") -> Head:
    return Head(method, path, [BODY, *headers])


def _bearer(secret: str) -> tuple[bytes, bytes]:
    return (b"authorization", f"Bearer {secret}".encode())


def _verdict(entrance: Entrance, head: Head) -> Verdict:
    return entrance.at_once(head) or entrance.look_up(head)


def test_a_valid_token_is_admitted_and_remembered(lab: Lab) -> None:
    entrance = Entrance(lab.engine, lab.clock)
    head = _head("/api/v1/jobs", _bearer(lab.tokens["alice"]))
    assert entrance.at_once(head) is None  # not seen yet: the database says
    assert entrance.look_up(head) == Admit(digest_of(lab.tokens["alice"]))
    assert entrance.at_once(head) == Admit(digest_of(lab.tokens["alice"]))  # no lookup now


def test_no_credential_is_refused_without_the_database(lab: Lab) -> None:
    entrance = Entrance(lab.engine, lab.clock)
    lab.engine.dispose()
    for head in (
        _head("/api/v1/jobs"),
        _head("/api/v1/jobs", (b"authorization", b"Basic eDp5")),
        _head("/api/v1/jobs", (b"authorization", b"Bearer ")),
    ):
        refusal = entrance.at_once(head)
        assert isinstance(refusal, Refuse)
        assert refusal.status == 401
        assert refusal.message == "this needs an API token (Authorization: Bearer …)"
        assert (b"www-authenticate", b"Bearer") in refusal.headers


def test_unknown_revoked_and_expired_tokens_are_refused(lab: Lab) -> None:
    with transaction(lab.engine) as repo:
        revoked_id, revoked = repo.tokens.create_token("bob", "gone", now=T0)
        repo.tokens.revoke_token(revoked_id, actor="root", now=T0)
        _, expiring = repo.tokens.create_token(
            "bob", "short", now=T0, expires_at=T0 + timedelta(hours=1)
        )
    lab.clock.advance(7200)
    entrance = Entrance(lab.engine, lab.clock)
    for secret in ("lq_not-a-token", "not even the prefix", revoked, expiring):
        refusal = _verdict(entrance, _head("/api/v1/labs", _bearer(secret)))
        assert refusal == Refuse(
            401, "the token is unknown, expired or revoked", ((b"www-authenticate", b"Bearer"),)
        )
    assert isinstance(entrance.at_once(_head("/api/v1/labs", _bearer(revoked))), Refuse)


def test_agents_need_an_agent_token_on_their_routes(lab: Lab) -> None:
    with transaction(lab.engine) as repo:
        _, secret = repo.agents.create_agent("a1", ["lab1"], now=T0, actor="root")
    entrance = Entrance(lab.engine, lab.clock)
    beat = "/api/v1/agent/beat"
    assert _verdict(entrance, _head(beat, _bearer(secret))) == Admit(digest_of(secret))
    user_token = _verdict(entrance, _head(beat, _bearer(lab.tokens["root"])))
    assert isinstance(user_token, Refuse)
    assert user_token.message == "the agent token is unknown or revoked"
    missing = _verdict(entrance, _head(beat))
    assert isinstance(missing, Refuse)
    assert missing.message == "this needs an agent token (Authorization: Bearer lqa_…)"
    # and an agent's token is no user's, not even on the agents' registry
    assert isinstance(_verdict(entrance, _head("/api/v1/labs", _bearer(secret))), Refuse)
    assert isinstance(_verdict(entrance, _head("/api/v1/agents", _bearer(secret))), Refuse)
    registry = _verdict(entrance, _head("/api/v1/agents", _bearer(lab.tokens["root"])))
    assert registry == Admit(digest_of(lab.tokens["root"]))


def test_pages_take_the_session_cookie_and_send_others_to_log_in(lab: Lab) -> None:
    entrance = Entrance(lab.engine, lab.clock)
    cookie = (b"cookie", f"theme=dark; {COOKIE}={lab.tokens['carol']}".encode())
    assert _verdict(entrance, _head("/ui/submit", cookie)) == Admit(digest_of(lab.tokens["carol"]))
    to_login = Refuse(303, "log in first", ((b"location", b"/ui/login"),))
    assert _verdict(entrance, _head("/ui/submit")) == to_login
    assert _verdict(entrance, _head("/ui/submit", _bearer(lab.tokens["carol"]))) == to_login
    stale = (b"cookie", f"{COOKIE}=lq_expired-long-ago".encode())
    assert _verdict(entrance, _head("/ui/jobs/1/cancel", stale)) == to_login


def test_the_login_form_is_open_but_small(lab: Lab) -> None:
    entrance = Entrance(lab.engine, lab.clock)
    assert entrance.at_once(_head("/ui/login")) == Admit(None)
    big = Head("POST", "/ui/login", [(b"content-length", b"%d" % (OPEN_BODY_BYTES + 1))])
    assert entrance.at_once(big) == Refuse(413, f"a body here is at most {OPEN_BODY_BYTES} bytes")
    assert isinstance(entrance.at_once(_head("/ui/login", method="PUT")), Refuse)


def _routes(routes: Sequence[BaseRoute], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """Every API route with its full path (FastAPI keeps included routers as they are)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes, prefix + route.include_context.prefix)  # type: ignore[attr-defined]


def test_every_route_that_takes_a_body_checks_a_credential_but_the_open_ones(lab: Lab) -> None:
    # The entrance lets a body in only with a credential: a route that took one without
    # would refuse its callers at the door. Which routes are open is listed in OPEN.
    credentials = {credential, agent, current_session}
    routes = list(_routes(lab.client.app.routes))  # type: ignore[attr-defined]
    assert len(routes) > 100
    open_routes = set()
    for path, route in routes:
        checks = {d.call for d in dependants(route.dependant)}
        for method in route.methods - {"GET", "HEAD"}:
            if not credentials & checks:
                open_routes.add((method, path))
    assert open_routes == set(OPEN)
