"""sluice, an open congestion-control platform: its datacenter simulator from Python.

    import sluice
    r = sluice.run("scenarios/quickstart.toml", seed=2)
    r.flows.groupby("class").fct_ns.describe()

`run` simulates one scenario; `sweep` runs a grid of overrides over seeds on a local process pool
or a Dask cluster; `check` validates; `list_algorithms` lists congestion control with parameters.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

from . import _native, _progress
from ._native import SluiceError
from ._result import SCHEMAS, Result
from ._scenario import Overrides, ScenarioLike, overrides, resolve
from ._sweep import Sweep, sweep
from ._warnings import SluiceWarning

__all__ = ["run", "check", "sweep", "list_algorithms", "Result", "Sweep", "SluiceError", "SluiceWarning", "SCHEMAS",
           "__version__"]
__version__ = _native.version()


def run(scenario: ScenarioLike, *, set: Overrides = None, seed: int | None = None, out=None,
        progress: bool = True) -> Result:
    """Simulates `scenario` (a path, TOML text or a dict) and returns its outputs.

    `set` overrides keys like `sluice run --set` ({"classes.query.cc": "dctcp"} or
    ["classes.query.cc=dctcp"]); `seed` overrides sim.seed. With `out`, the run's files stay in
    that directory (an earlier run's files there are replaced). The simulation runs without the GIL;
    Ctrl-C stops it within a fraction of a second (KeyboardInterrupt), and with `progress` a run
    that lasts over a second shows a bar of simulated time.
    Raises SluiceError with the CLI's message for a bad scenario; warns with SluiceWarning what the
    CLI prints as warnings (sized flows cut short by sim.duration, classes no flow belongs to).
    """
    sc = resolve(scenario)
    sets = overrides(set, seed)
    with _progress.RunProgress(progress) as tick:
        if out is not None:
            _, notes = _native.run(sc.text, sc.file, sc.base_dir, sets, str(out), tick)
            result = Result.read(Path(out), keep=True)
        else:
            with tempfile.TemporaryDirectory(prefix="sluice-run-") as d:
                _, notes = _native.run(sc.text, sc.file, sc.base_dir, sets, d, tick)
                result = Result.read(Path(d), keep=False)
    for note in notes:
        warnings.warn(note, SluiceWarning, stacklevel=2)
    return result


def check(scenario: ScenarioLike, *, set: Overrides = None, seed: int | None = None) -> str:
    """Validates `scenario` and returns what `sluice check` prints; raises SluiceError if it is bad
    and warns with SluiceWarning what the CLI prints as warnings (a class no flow belongs to)."""
    sc = resolve(scenario)
    line, notes = _native.check(sc.text, sc.file, sc.base_dir, overrides(set, seed))
    for note in notes:
        warnings.warn(note, SluiceWarning, stacklevel=2)
    return line


def list_algorithms() -> list[dict]:
    """Every congestion-control algorithm: name, aliases, summary and parameters with defaults.

    Each parameter is {"name", "default", "doc"}, from the `name = default  # meaning` lines
    `sluice list` shows.
    """
    out = []
    for name, aliases, summary, params in _native.algorithms():
        ps = []
        for pname, line in params:
            default, _, doc = line.partition("#")
            ps.append({"name": pname, "default": default.strip(), "doc": doc.strip()})
        out.append({"name": name, "aliases": aliases, "summary": summary, "params": ps})
    return out
