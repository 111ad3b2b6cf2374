"""The live service: the pure scheduling core driven against the database."""
