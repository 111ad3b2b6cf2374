"""The request bodies that both an API route and a web form validate with, so a form is
refused with the API's own words (reservations, loans, removals, webhooks)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from labq.domain.notices import MAX_URL
from labq.domain.reservesys import DEFAULT_SECONDS, MAX_SECONDS
from labq.gateway.schemas import INTEGRAL, NO_NUL, Body, Name, Reason

Seconds = Annotated[int, Field(ge=1, le=MAX_SECONDS), INTEGRAL]
Url = Annotated[str, Field(min_length=1, max_length=MAX_URL), NO_NUL]


class ReserveBody(Body):
    """How long to keep the system once the reservation job gets it (default: a day)."""

    seconds: Seconds = Field(default=DEFAULT_SECONDS, alias="for")


class LoanBody(Body):
    """Who gets the system, for how long (none: until released), and why."""

    to: Name
    seconds: Seconds | None = Field(default=None, alias="for")
    reason: Reason | None = None


class RemoveBody(Body):
    """Whether to abort the recipe it serves, and why it goes."""

    force: bool = False
    reason: Reason | None = None


class WebhookBody(Body):
    """Where to POST job ends: the caller's own jobs unless ``user`` or ``group`` says whose."""

    url: Url
    user: Name | None = None
    group: Name | None = None
