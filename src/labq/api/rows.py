"""The query parameters ``GET /jobs`` and ``GET /queue`` share (``squeue``'s ``-u``, ``-A``,
``-p``, ``-t``); the rows themselves are :mod:`labq.usecases.queries`'."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

Glob = Annotated[str | None, Query(min_length=1, max_length=255, description="* and ? match")]
Text = Annotated[str | None, Query(min_length=1, max_length=255)]
