"""``labq sim``: the discrete-event simulator that drives the real scheduling core."""
