"""The scheduling core: events in, decisions out. Pure: no database, clock or processes."""
