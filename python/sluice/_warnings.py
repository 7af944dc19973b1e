"""The warning sluice raises where the CLI prints `warning: ...`."""


class SluiceWarning(UserWarning):
    """A scenario or run is valid but its figures leave something out (flows cut short by
    sim.duration) or a setting changes nothing (a class no flow belongs to)."""
