"""labq's HTTP JSON API (FastAPI): ``labq.api.app.create_app(engine, settings, events)``.

The package itself exports only the seam to the scheduler, so that the web pages,
which the app mounts, may use the API's modules without importing the app.
"""

from labq.gateway.events import Events, NoEvents, QueueRow

__all__ = ["Events", "NoEvents", "QueueRow"]
