"""sluice, an open congestion-control platform: its datacenter simulator from Python.

    import sluice
    r = sluice.run("scenarios/quickstart.toml", seed=2)
    r.flows.groupby("class").fct_ns.describe()

`run` simulates one scenario; `sweep` runs a grid of overrides over seeds on a local process pool
or a Dask cluster; `check` validates; `list_algorithms` lists congestion control with parameters.
"""

# What the package uses but does not offer is imported under private names, so that `dir(sluice)`
# and tab completion show only the API (`__all__`); for the same reason annotations are quoted
# rather than deferred by a `__future__` import, whose name would show too.
import json as _json
import tempfile as _tempfile
from pathlib import Path as _Path
from warnings import warn as _warn

from . import _native, _progress
from ._native import SluiceError
from ._result import SCHEMAS, Result
from ._scenario import Overrides as _Overrides
from ._scenario import ScenarioLike as _ScenarioLike
from ._scenario import overrides as _overrides
from ._scenario import resolve as _resolve
from ._sweep import Sweep, sweep
from ._warnings import SluiceWarning

__all__ = ["run", "check", "sweep", "list_algorithms", "Result", "Sweep", "SluiceError", "SluiceWarning", "SCHEMAS",
           "__version__"]
__version__ = _native.version()


def run(scenario: "_ScenarioLike", *, set: "_Overrides" = None, seed: "int | None" = None, out=None,
        progress: bool = True, threads: "int | None" = None) -> Result:
    """Simulates `scenario` (a path, TOML text or a dict) and returns its outputs.

    `set` overrides keys like `sluice run --set` ({"classes.query.cc": "dctcp"} or
    ["classes.query.cc=dctcp"]); `seed` overrides sim.seed. With `out`, the run's files stay in
    that directory (an earlier run's files there are replaced). The simulation runs without the GIL;
    Ctrl-C stops it within a fraction of a second (KeyboardInterrupt), and with `progress` a run
    that lasts over a second shows a bar of simulated time. `threads` (1 to 1024) overrides
    sim.threads, the threads the fabric's partitions run on; the outputs are the same for any.
    Raises SluiceError with the CLI's message for a bad scenario; warns with SluiceWarning what the
    CLI prints as warnings (sized flows cut short by sim.duration, classes no flow belongs to).
    """
    sc = _resolve(scenario)
    sets = _overrides(set, seed)
    with _progress.RunProgress(progress) as tick:
        if out is not None:
            _, notes = _native.run(sc.text, sc.file, sc.base_dir, sets, str(out), tick, threads)
            result = Result.read(_Path(out), keep=True)
        else:
            with _tempfile.TemporaryDirectory(prefix="sluice-run-") as d:
                _, notes = _native.run(sc.text, sc.file, sc.base_dir, sets, d, tick, threads)
                result = Result.read(_Path(d), keep=False)
    for note in notes:
        _warn(note, SluiceWarning, stacklevel=2)
    return result


def check(scenario: "_ScenarioLike", *, set: "_Overrides" = None, seed: "int | None" = None) -> str:
    """Validates `scenario` and returns what `sluice check` prints (what it builds and the memory
    its flows and samples take); raises SluiceError with every problem, one a line, if it is bad,
    and warns with SluiceWarning what the CLI prints as warnings (a class no flow belongs to)."""
    sc = _resolve(scenario)
    line, notes = _native.check(sc.text, sc.file, sc.base_dir, _overrides(set, seed))
    for note in notes:
        _warn(note, SluiceWarning, stacklevel=2)
    return line


def _default(text: str):
    """A parameter's default as a value (0.0625, 5, False, "50us"), or None where it is not one
    value (`unset`, a formula like `W_init x (1 - eta) / 10`). The simple literals the defaults use
    are written alike in TOML and JSON."""
    try:
        return _json.loads(text)
    except ValueError:
        return None


def list_algorithms() -> "list[dict]":
    """Every congestion-control algorithm: name, aliases, summary and parameters with defaults.

    Each parameter is {"name", "default", "default_text", "doc"}, from the `name = default  #
    meaning` lines `sluice list` shows: `default` is the value (a float, int, bool, or a string such
    as "50us" where the parameter takes a quantity with a unit), or None where the default is not
    one value; `default_text` is the default as `sluice list` writes it.
    """
    out = []
    for name, aliases, summary, params in _native.algorithms():
        ps = []
        for pname, line in params:
            text, _, doc = line.partition("#")
            text = text.strip()
            ps.append({"name": pname, "default": _default(text), "default_text": text, "doc": doc.strip()})
        out.append({"name": name, "aliases": aliases, "summary": summary, "params": ps})
    return out
