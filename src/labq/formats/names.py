"""The names of the job formats: what ``--format`` and ``?format=`` accept.

Apart from the parsers so that the command line can offer the choice without importing
them (``labq --version`` and every server command start faster for it)."""

from __future__ import annotations

from typing import Final, Literal

Format = Literal["auto", "native", "beaker", "teuthology"]
FORMATS: Final = ("auto", "native", "beaker", "teuthology")
