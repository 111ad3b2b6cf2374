"""Distro trees: what each lab can install, as ``GET /distros`` lists it."""

from __future__ import annotations

from itertools import groupby

from fastapi import APIRouter, Request, Response

from labq.gateway.deps import StateDep
from labq.store import reading
from labq.usecases.distros import list_trees
from labq.web.rendering import page
from labq.web.route import PageRoute
from labq.web.session import SessionDep

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/distros")
def distros_page(request: Request, app: StateDep, session: SessionDep) -> Response:
    """Each lab with its trees, newest first within a name; labs without trees say so."""
    with reading(app.engine) as repo:
        labs = repo.systems.list_labs()
        trees = list_trees(repo)
    by_lab = {lab: list(found) for lab, found in groupby(trees, key=lambda t: t.lab)}
    catalogue = [(lab, by_lab.get(lab, [])) for lab in labs]
    return page(request, "distros.html", title="Distro trees", nav="distros", labs=catalogue)
