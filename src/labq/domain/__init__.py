"""The pure domain model: no database, no clock, no processes."""
