"""labq's HTTP JSON API (FastAPI): ``labq.api.app.create_app(engine, settings, events)``.

``events`` is a :class:`~labq.usecases.ports.SchedulerPort`: where the API posts
:mod:`labq.domain.events` after a commit, and the queue the scheduler sees.
"""
