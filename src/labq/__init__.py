"""labq: an event-driven job scheduler for test labs."""

__version__ = "0.1.0"
