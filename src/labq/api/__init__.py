"""labq's HTTP JSON API (FastAPI): ``create_app(engine, settings, events)``."""

from labq.api.app import create_app
from labq.api.events import Events, NoEvents, QueueRow

__all__ = ["Events", "NoEvents", "QueueRow", "create_app"]
