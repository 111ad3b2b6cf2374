"""What people can do with labq, as functions: the rules live here, not in the adapters.

Each use case takes a repository (one transaction), the caller and plain values, checks
permissions, admission and feasibility, writes through the store, and raises a
:class:`~labq.errors.LabqError` for every refusal. The HTTP API, the web UI and the
command line translate requests into these calls and errors into answers; none of them
holds a rule of its own. Events for the scheduler are posted after the commit, by the
adapter that owns the transaction, on an :class:`~labq.domain.events.EventSink`.
"""
