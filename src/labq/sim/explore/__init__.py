"""Explore every order of events on a small lab (issue 16; docs/simulation.md).

The explorer drives the real core inside the simulator's :class:`~labq.sim.world.World`,
so each path it takes is a run ``labq sim`` can replay from a scenario file:

- :mod:`.lab` — a small lab: a scenario (systems, pools, jobs of one set each) and
  which admin events may happen;
- :mod:`.point` — one reachable state, the events that may happen next, and the
  canonical key states are deduplicated by;
- :mod:`.checks` — the invariants checked in every state;
- :mod:`.search` — the breadth-first search, and the liveness check over its graph;
- :mod:`.writer` — a counterexample as a ``labq sim`` scenario.
"""
