"""The execution library: everything a supervisor does for a recipe set, no database.

The supervisor process builds a :class:`SetPlan`, picks a backend per system
(:class:`LocalBackend` or :class:`SshBackend`, wrapped in :class:`HookedBackend`
when its lab has hooks) and calls :func:`run_set` with a :class:`Reporter` that
maps the callbacks onto the database. ``docs/execution.md`` is the user's and
admin's guide.

The package imports nothing itself: the server imports its dispatcher and fork-server
handle without the execution library (SSH, hooks, the runner), which only supervisors
and the fork server need.
"""
