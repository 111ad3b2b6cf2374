"""The combination matrix of a teuthology suite, indexed the way ``teuthology-suite`` does.

A suite directory is a tree of operators: a plain directory is a *sum* (one
job per member), ``%`` a *product* (one member of each facet), ``+`` a
*concatenation* (every member in one fragment list), ``$`` a *random pick*.
Each node answers ``size()`` and ``index(i)``; an index result is the nested
``(item, children)`` structure from which the description and the fragment
paths are generated. The arithmetic (the product's gcd walk, the sum's
proportional interleaving, cycles for subsets) follows teuthology's
``suite/matrix.py`` so that the same suite, subset and seed give the same jobs.
Pure: no files here; :mod:`labq.formats.suite` builds the tree.
"""

from __future__ import annotations

import heapq
import random
from functools import reduce
from math import gcd, lcm
from typing import TypeAlias

# index() results: an item name, (item, child), or a frozenset of results to concatenate
Result: TypeAlias = str | tuple[str, "Result"] | frozenset["Result"]


class Matrix:
    """A set of combinations that can be indexed and cut into good subsets."""

    def size(self) -> int:
        """How many combinations."""
        raise NotImplementedError

    def index(self, i: int) -> Result:
        """Combination ``i`` as a nested result."""
        raise NotImplementedError

    def minscanlen(self) -> int:
        """The shortest run of consecutive indices that is still a good sample."""
        raise NotImplementedError

    def cyclicity(self) -> int:
        """Into how many good subsets of consecutive indices the matrix can be cut."""
        return self.size() // self.minscanlen()


class Base(Matrix):
    """One fragment file."""

    def __init__(self, item: str) -> None:
        self.item = item

    def size(self) -> int:
        return 1

    def index(self, i: int) -> Result:
        return self.item

    def minscanlen(self) -> int:
        return 1


class Cycle(Matrix):
    """A matrix repeated ``num`` times (so that a subset still covers it)."""

    def __init__(self, num: int, mat: Matrix) -> None:
        self.num = num
        self.mat = mat

    def size(self) -> int:
        return self.mat.size() * self.num

    def index(self, i: int) -> Result:
        return self.mat.index(i % self.mat.size())

    def minscanlen(self) -> int:
        return self.mat.minscanlen()


class Product(Matrix):
    """``%``: one member of every facet; consecutive indices move through all facets."""

    def __init__(self, item: str, facets: list[Matrix]) -> None:
        self.item = item
        ordered = sorted(
            ((m.size(), n) for n, m in enumerate(facets)), reverse=True
        )  # largest facet first, ties by position (reversed), as teuthology does
        self.facets: list[tuple[int, Matrix]] = []
        self._size = 1
        for size, n in ordered:
            self.facets.append((self._size, facets[n]))
            self._size *= size
        self.facets.reverse()
        longest = max(m.minscanlen() for m in facets)
        self._minscanlen = self._size if longest + 1 > self._size else longest + 1

    def size(self) -> int:
        return self._size

    def minscanlen(self) -> int:
        return self._minscanlen

    def index(self, i: int) -> Result:
        return (self.item, self._index(i, self.facets))

    def _index(self, i: int, facets: list[tuple[int, Matrix]]) -> frozenset[Result]:
        # Two facets whose sizes share a factor N would repeat after lsize*rsize/N
        # indices: shifting the left index once per period gives every pair once.
        if len(facets) == 1:
            return frozenset([facets[0][1].index(i)])
        rsize, left = facets[0]
        lsize = left.size()
        cycles = gcd(rsize, lsize)
        period = rsize * lsize // cycles
        shift = (i // period) % cycles
        return _union(left.index((i - shift) % lsize), _union(self._index(i, facets[1:])))


class Concat(Matrix):
    """``+``: every member at once, as one combination."""

    def __init__(self, item: str, members: list[Matrix]) -> None:
        self.item = item
        self.members = members

    def size(self) -> int:
        return 1

    def minscanlen(self) -> int:
        return 1

    def index(self, i: int) -> Result:
        out: frozenset[Result] = frozenset()
        for member in self.members:
            for j in range(member.size()):
                out = out | frozenset([member.index(j)])
        return (self.item, out)


class PickRandom(Matrix):
    """``$``: one member chosen at random each time a combination is made."""

    def __init__(self, item: str, members: list[Matrix], rng: random.Random) -> None:
        self.item = item
        self.members = members
        self.rng = rng

    def size(self) -> int:
        return 1

    def minscanlen(self) -> int:
        return 1

    def index(self, i: int) -> Result:
        # teuthology indexes the chosen member by the choice itself; kept for equal output
        choice = self.rng.randint(0, len(self.members) - 1)
        return (self.item, frozenset([self.members[choice].index(choice)]))


class Sum(Matrix):
    """A plain directory: the members' combinations, interleaved in proportion to their sizes.

    Member ``n`` of size ``s`` puts its ``k``-th combination at the pseudo index
    ``n + k * (P / s)`` where ``P`` is the lcm of the sizes times the member count;
    walking the pseudo indices in order gives the interleaving.
    """

    def __init__(self, item: str, members: list[Matrix]) -> None:
        self.item = item
        self._size = sum(m.size() for m in members)
        pseudo = reduce(lcm, (m.size() for m in members)) * len(members)
        steps = [(n, pseudo // m.size(), m) for n, m in enumerate(members)]
        heap = [(offset, 0, step, n) for n, (offset, step, _) in enumerate(steps)]
        heapq.heapify(heap)
        self._order: list[tuple[int, Matrix]] = []
        for _ in range(self._size):
            at, k, step, n = heapq.heappop(heap)
            heapq.heappush(heap, (at + step, k + 1, step, n))
            self._order.append((k, members[n]))
        longest = max(m.minscanlen() * step for _, step, m in steps)
        self._minscanlen = self._count_upto(longest, steps)

    @staticmethod
    def _count_upto(pi: int, steps: list[tuple[int, int, Matrix]]) -> int:
        """How many pseudo indices are at most ``pi``, less one (teuthology's minscanlen)."""
        return sum((pi - off) // step + 1 if pi >= off else 0 for off, step, _ in steps) - 1

    def size(self) -> int:
        return self._size

    def minscanlen(self) -> int:
        return self._minscanlen

    def index(self, i: int) -> Result:
        k, member = self._order[i % self._size]
        return (self.item, member.index(k))


def _union(result: Result, into: frozenset[Result] = frozenset()) -> frozenset[Result]:
    return into | result if isinstance(result, frozenset) else into | frozenset([result])


def join(left: str, right: str) -> str:
    """``left/right``, or ``left`` alone when ``right`` is empty (an unnamed root)."""
    if not right:
        return left
    if not left or right.startswith("/"):
        return right
    return left.rstrip("/") + "/" + right


def description(result: Result) -> str:
    """``{a.yaml b/{c.yaml d.yaml}}``-style description of one combination."""
    if isinstance(result, frozenset):
        return "{" + " ".join(sorted(description(r) for r in result)) + "}"
    if isinstance(result, tuple):
        item, child = result
        return join(item, description(child))
    return result


def fragments(result: Result) -> list[tuple[str, ...]]:
    """The combination's fragment files as path components, sorted (the merge order)."""
    return sorted(_paths(result))


def _paths(result: Result) -> frozenset[tuple[str, ...]]:
    if isinstance(result, frozenset):
        return frozenset(p for r in result for p in _paths(r))
    if isinstance(result, tuple):
        item, child = result
        return frozenset((item, *p) for p in _paths(child))
    return frozenset([(result,)])
