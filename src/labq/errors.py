"""Errors that labq reports to people, not as tracebacks."""

from __future__ import annotations

from collections.abc import Sequence


class LabqError(Exception):
    """Base of every error labq reports in plain words.

    ``place`` names the field at fault when one is (``group``, ``ref``): an answer shows
    it beside the message, which does not repeat it.
    """

    place: str | None = None

    def __init__(self, *args: object, place: str | None = None) -> None:
        super().__init__(*args)
        if place is not None:
            self.place = place


class InputError(LabqError):
    """Bad input: names the source, the place inside it and the problem.

    When the input has several problems, ``problem`` tells the first and counts the
    rest (one line for a terminal); ``every`` holds each of them on its own, for a
    form or an API answer that can show them all.
    """

    place: str

    def __init__(
        self,
        problem: str,
        *,
        source: str = "",
        place: str = "",
        line: int | None = None,
        every: Sequence[InputError] = (),
    ):
        self.problem = problem
        self.source = source
        self.place = place
        self.line = line
        self.every = tuple(every)
        super().__init__(self.describe())

    def describe(self) -> str:
        """One line: ``file:line: place: problem`` with the parts that are known."""
        where = self.source
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        parts = [p for p in (where, self.place, self.problem) if p]
        return ": ".join(parts)

    def within(self, *, source: str | None = None, line: int | None = None) -> InputError:
        """The same error, told where it happened when the raiser did not know."""
        return InputError(
            self.problem,
            source=self.source or (source or ""),
            place=self.place,
            line=self.line if self.line is not None else line,
            every=[e.within(source=source, line=line) for e in self.every],
        )


class RequestError(LabqError):
    """A request understood but not workable as given (a ref that no repository resolves,
    a selection that would pick every job): answered 422 with its message as it is."""


class IllegalTransition(LabqError):  # noqa: N818 - the name says what it is
    """A move that the lifecycle table forbids: a bug in the caller, never user input."""


class ConflictError(LabqError):
    """The stored state changed under us: the guarded update matched no row."""


class NotFoundError(LabqError):
    """A named object does not exist."""


class ForbiddenError(LabqError):
    """The caller is known but may not do this (the message says who may)."""


class LeadershipLost(ConflictError):  # noqa: N818 - the name says what happened
    """This process no longer leads the scheduler: another took over, so it must not act."""


class ClaimLost(ConflictError):  # noqa: N818 - the name says what happened
    """This supervisor's claim on its set is gone (another holds it, or the set ended)."""


class ProviderError(LabqError):
    """A VM provider could not make, reach or destroy a VM; the message is its reason."""
