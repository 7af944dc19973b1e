"""Sweeps: every cell of a grid of overrides x every seed is one task; tasks run on a local pool
or, unchanged, on a Dask cluster; each result lands in the store as its own file, written
atomically and keyed by what produced it, so a killed sweep resumes and computes only what is
missing, and a result whose inputs changed since is computed again."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import tempfile
import threading
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from . import _native
from ._scenario import Overrides, Scenario, ScenarioLike, overrides, resolve
from ._warnings import SluiceWarning

# Where a sweep's results go unless told: the same directory as `sluice sweep --out`'s default.
DEFAULT_STORE = "out/sweep"

# Display units a metric may name after a colon (`classes.backup.goodput_bps:MB/s`), as in
# `sluice sweep --metric`: the figure is divided by the factor.
UNITS = {"MB/s": ("_bps", 8e6), "Mb/s": ("_bps", 1e6), "Gb/s": ("_bps", 1e9),
         "s": ("_ns", 1e9), "ms": ("_ns", 1e6), "us": ("_ns", 1e3)}


@dataclass(frozen=True)
class Metric:
    """A summary.json figure by key path, with an optional display unit."""

    spec: str
    path: tuple
    divisor: float

    @classmethod
    def parse(cls, spec: str) -> "Metric":
        path, _, unit = spec.partition(":")
        keys = tuple(path.strip().split("."))
        if not path.strip() or any(not k for k in keys):
            raise _native.SluiceError(f"metric {spec}: `{path}` is not a summary.json key path, like fct_ns.p99")
        if not unit:
            return cls(spec, keys, 1.0)
        if unit not in UNITS:
            raise _native.SluiceError(f"metric {spec}: unknown unit `{unit}`; expected one of {', '.join(UNITS)}")
        suffix, divisor = UNITS[unit]
        if not any(k.endswith(suffix) for k in keys):
            raise _native.SluiceError(f"metric {spec}: unit {unit} converts a *{suffix} key, and `{path}` is not one")
        return cls(spec, keys, divisor)

    def read(self, summary: dict, cell: str):
        """The figure from one run's summary, None when summary.json has it as null."""
        v = summary
        for i, k in enumerate(self.path):
            if isinstance(v, dict) and k in v:
                v = v[k]
            elif isinstance(v, list) and k.isdigit() and int(k) < len(v):
                v = v[int(k)]
            else:
                where = ".".join(self.path[:i]) or "the top level"
                there = ", ".join(v) if isinstance(v, dict) else type(v).__name__
                raise _native.SluiceError(f"metric {self.spec}: summary.json of {cell} has no `{k}` at {where} (keys there: {there})")
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _native.SluiceError(f"metric {self.spec}: `{'.'.join(self.path)}` in {cell} is not a number but {v!r}")
        # A count stays a whole number; only a display unit makes it a fraction.
        return v if self.divisor == 1.0 else v / self.divisor


def _fragment(v: object) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", str(v))


def cell_name(cell: Mapping[str, object]) -> str:
    """A cell's directory name in the store: `key=value__key=value`, as `sluice sweep` names it."""
    return "__".join(f"{k}={_fragment(v)}" for k, v in cell.items())


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _strings(value):
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def inputs_digest(sc: Scenario, sets: list) -> str:
    """A cell's inputs: sha256 of the scenario as the simulator reads it, with every override
    applied (so an edited file or a changed `set` changes it), and of each file it names (CDFs,
    traces, circuit schedules), whose edits the scenario's own text would not show."""
    scenario = json.loads(_native.resolved(sc.text, sc.file, sc.base_dir, sets))
    files = {}
    for s in sorted(set(_strings(scenario))):
        path = Path(sc.base_dir, s)
        try:
            if "\n" not in s and path.is_file():
                files[s] = hashlib.sha256(path.read_bytes()).hexdigest()
        except (OSError, ValueError):
            pass  # not a file name (too long, a NUL): nothing to read
    return _sha256(json.dumps({"scenario": scenario, "files": files}, sort_keys=True))


def task_key(inputs: str, seed: int) -> str:
    """What a stored result is keyed by: its cell's inputs digest, its seed and the sluice version."""
    return _sha256(f"{inputs}\nseed={seed}\nsluice={_native.version()}")


# What differs between two runs of the same simulation: the seed that named it and the wall clock.
_RUN_ONLY = ("seed", "wall_s", "events_per_s")


def outputs_digest(d: Path, summary: dict) -> str:
    """sha256 of a run's tables and summary (less what `_RUN_ONLY` names): two seeds of a cell have
    the same digest exactly when the seed changed nothing."""
    h = hashlib.sha256()
    for table in sorted(d.glob("*.csv")):
        data = table.read_bytes()
        h.update(f"{table.name} {len(data)}\n".encode())
        h.update(data)
    h.update(json.dumps({k: v for k, v in summary.items() if k not in _RUN_ONLY}, sort_keys=True).encode())
    return h.hexdigest()


class _Stopped(Exception):
    """A run ended early because its sweep stopped (Ctrl-C or another task's error)."""


def _grid_column(values: list) -> tuple[pd.Series, list | None]:
    """A grid key's values as a typed column: numbers as Int64 or Float64, true/false as boolean, and
    quantities with a unit in the unit sluice's tables use (a size "20KB" as 20000 bytes, a rate as
    bit/s, both Int64; a duration as Float64 nanoseconds), with their text as given; anything else,
    or values of different kinds, stay text."""
    def parse(v):
        if isinstance(v, bool):
            return "bool", v
        if isinstance(v, (int, float)):
            return ("int" if isinstance(v, int) else "float"), v
        text = str(v).strip()
        if text in ("true", "false"):
            return "bool", text == "true"
        for kind, cast in (("int", int), ("float", float)):
            try:
                return kind, cast(text)
            except ValueError:
                pass
        quantity = _native.quantity(text)
        return quantity if quantity is not None else ("text", text)

    parsed = [parse(v) for v in values]
    kinds = {k for k, _ in parsed}
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) != 1 or kinds == {"text"}:
        return pd.Series([_jsonable(v) for v in values], dtype="string"), None
    kind = kinds.pop()
    dtype = {"int": "Int64", "float": "Float64", "bool": "boolean", "bytes": "Int64", "bps": "Int64", "ns": "Float64"}[kind]
    column = pd.Series([x for _, x in parsed]).astype(dtype)
    return column, ([str(v) for v in values] if kind in ("bytes", "bps", "ns") else None)


def _typed_grid(df: pd.DataFrame, keys: list) -> pd.DataFrame:
    """`df` with each grid key's column typed (`_grid_column`); a key whose values carried units
    keeps them as text in a `<key>:text` column beside it."""
    out = df.copy()
    for k in keys:
        column, text = _grid_column(list(df[k]))
        out[k] = column.values
        if text is not None:
            out.insert(out.columns.get_loc(k) + 1, f"{k}:text", pd.array(text, dtype="string"))
    return out


def _run_task(sc: Scenario, sets: list, metrics: list, record: dict, path: str, tick=None) -> dict:
    """One cell x seed: run in a scratch directory, keep only the figures, write them atomically.
    `tick` is the native run's callback: raising there ends the run. A sweep's parallelism is
    across its tasks, so each runs on one thread."""
    with tempfile.TemporaryDirectory(prefix="sluice-task-") as d:
        _, notes = _native.run(sc.text, sc.file, sc.base_dir, sets, d, tick, 1)
        summary = json.loads(Path(d, "summary.json").read_text())
        outputs = outputs_digest(Path(d), summary)
    where = f"{record['cell']} seed {record['seed']}"
    record = dict(record, metrics={m.spec: m.read(summary, where) for m in metrics}, wall_s=summary.get("wall_s"),
                  warnings=notes, outputs=outputs)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return record


def _load_done(path: Path):
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _t95(n: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1))


def aggregate(tidy: pd.DataFrame, keys: list, metrics: list, repeated=()) -> pd.DataFrame:
    """Per cell: n and, per metric, the mean and the 95% confidence interval of the mean (Student t
    over the seeds; <NA> with fewer than two values, and for the cells in `repeated`, tuples of grid
    values whose seeds all gave identical runs: their spread says nothing about the mean's)."""
    repeated = {tuple(r) for r in repeated}
    rows = []
    for values, g in tidy.groupby(keys, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        row = dict(zip(keys, values))
        for m in metrics:
            x = g[m].dropna().astype(float)
            n = len(x)
            mean = x.mean() if n else None
            half = _t95(n) * x.std(ddof=1) / math.sqrt(n) if n >= 2 and values not in repeated else None
            row[f"{m}:n"] = n
            row[f"{m}:mean"] = mean
            row[f"{m}:ci_lo"] = None if half is None else mean - half
            row[f"{m}:ci_hi"] = None if half is None else mean + half
        rows.append(row)
    out = pd.DataFrame(rows)
    for c in out.columns:
        if c.endswith(":n"):
            out[c] = out[c].astype("Int64")
        elif ":" in c:
            out[c] = out[c].astype("Float64")
    return out


@dataclass
class Sweep:
    """A finished sweep: `tidy` has one row per cell and seed (grid values, seed, metrics),
    `aggregated` one row per cell (per metric: n, mean, 95% CI bounds); both are also in the store
    as Parquet and CSV. `computed` counts the tasks this call ran (the rest were in the store),
    `recomputed` those of them whose stored result had come from other inputs."""

    tidy: pd.DataFrame
    aggregated: pd.DataFrame
    store: Path
    computed: int
    recomputed: int = 0


def _progress(total: int, initial: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="sweep", unit="task", disable=not enabled, smoothing=0.1)


def sweep(
    scenario: ScenarioLike,
    grid: Mapping[str, Sequence],
    seeds: Sequence[int] = (1,),
    metrics: Sequence[str] = ("fct_ns.mean",),
    store=DEFAULT_STORE,
    client=None,
    *,
    set: Overrides = None,
    jobs: int | None = None,
    progress: bool = True,
) -> Sweep:
    """Runs `scenario` for every combination of the `grid` values (key path -> values) and every
    seed, and tabulates `metrics` (summary.json key paths, optionally `:unit`).

    `store` is the directory results go to, `out/sweep` by default as for `sluice sweep --out`.
    In `tidy` and `aggregated` a grid key's column is typed where its values allow: numbers, and
    quantities in sluice's table units (sizes in bytes, rates in bit/s, durations in ns) with the
    text as given in `<key>:text`. A metric that is a count (drops) is Int64, other figures Float64.

    Each task writes `store/<cell>/seed=<n>.json`, keyed by its inputs (the resolved scenario with
    the cell's and `set`'s overrides, the files it names, the seed, the sluice version); a task
    whose file holds that key is not run again, one whose file holds another key is run again (a
    SluiceWarning says how many). `store/sweep.json` describes the inputs of the stored results.
    With `client` (a dask.distributed Client) the tasks run on its cluster, otherwise on `jobs`
    threads (default: every core). Every cell is checked before any runs. A cell whose seeds all
    give identical runs warns so and has no confidence interval.
    """
    if not grid:
        raise _native.SluiceError("grid: expected at least one key with its values, like {'classes.query.cc': ['dctcp', 'swift']}")
    keys = list(grid)
    for k, vs in grid.items():
        if isinstance(vs, (str, bytes)) or not isinstance(vs, Sequence) or len(vs) == 0:
            raise _native.SluiceError(f"grid {k}: expected a list of values, got {vs!r}")
    # A seed given twice would only repeat its own run, and count twice in the interval.
    seeds = list(dict.fromkeys(seeds))
    if not seeds:
        raise _native.SluiceError("seeds: expected at least one seed")
    ms = [Metric.parse(m) for m in metrics]
    sc = resolve(scenario)
    fixed = overrides(set)
    store = Path(store)
    cells = [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    notes, inputs = {}, {}
    for cell in cells:
        name = cell_name(cell)
        try:
            _, cell_notes = _native.check(sc.text, sc.file, sc.base_dir, fixed + overrides(cell))
            inputs[name] = inputs_digest(sc, fixed + overrides(cell))
        except _native.SluiceError as e:
            raise _native.SluiceError(f"cell {name}: {e}") from None
        for note in cell_notes:
            notes.setdefault(note, name)
    for note, first in notes.items():
        warnings.warn(f"cell {first}: {note}", SluiceWarning, stacklevel=2)

    tasks, records, stale = [], {}, []
    for cell in cells:
        name = cell_name(cell)
        for seed in seeds:
            path = store / name / f"seed={seed}.json"
            key = task_key(inputs[name], seed)
            done = _load_done(path)
            if done is not None and done.get("key") != key:
                stale.append(path)
            elif done is not None and all(m.spec in done.get("metrics", {}) for m in ms):
                records[(name, seed)] = done
                continue
            record = {"cell": name, "grid": {k: _jsonable(v) for k, v in cell.items()}, "seed": seed, "key": key,
                      "scenario": sc.file, "overrides": fixed + overrides(cell, seed), "sluice": _native.version()}
            tasks.append((record["overrides"], record, str(path)))

    # Before sweep.json states this sweep's inputs, what came from other inputs goes: the stale
    # results, and the tables until they are written again at the end. A sweep killed after this
    # point leaves a store that holds only what sweep.json describes.
    store.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.unlink(missing_ok=True)
    for name in ("tidy", "aggregated"):
        for ext in ("parquet", "csv"):
            (store / f"{name}.{ext}").unlink(missing_ok=True)
    spec = {"scenario": sc.file, "grid": {k: list(map(_jsonable, v)) for k, v in grid.items()}, "seeds": seeds,
            "metrics": [m.spec for m in ms], "set": fixed, "sluice": _native.version(),
            # Each cell's inputs digest: a result's key is task_key(inputs[cell], seed).
            "inputs": inputs}
    _atomic(store / "sweep.json", lambda p: p.write_text(json.dumps(spec, indent=2) + "\n"))
    if stale:
        warnings.warn(f"{len(stale)} results in {store} came from other inputs (the scenario, its overrides or the "
                      f"sluice version changed since) and are computed again", SluiceWarning, stacklevel=2)

    bar = _progress(len(cells) * len(seeds), len(records), progress)
    try:
        if client is not None:
            from distributed import as_completed as dask_completed

            futures = client.map(_run_task, [sc] * len(tasks), [t[0] for t in tasks], [ms] * len(tasks),
                                 [t[1] for t in tasks], [t[2] for t in tasks], pure=False)
            for f in dask_completed(futures):
                r = f.result()
                records[(r["cell"], r["seed"])] = r
                bar.update()
        elif tasks:
            _run_local(tasks, sc, ms, min(jobs or os.cpu_count() or 1, len(tasks)), records, bar)
    finally:
        bar.close()
    # What the check already said of a cell (a class no flow belongs to) every run of it repeats.
    warned = [(f"{name} seed {seed}", w) for (name, seed), r in records.items() for w in r.get("warnings", [])
              if w not in notes]
    if warned:
        where, first = sorted(warned)[0]
        warnings.warn(f"{len(warned)} warnings from the sweep's runs (each run's are in its store record), "
                      f"the first: {where}: {first}", SluiceWarning, stacklevel=2)

    rows, repeated = [], []
    for cell in cells:
        name = cell_name(cell)
        values = tuple(_jsonable(v) for v in cell.values())
        for seed in seeds:
            r = records[(name, seed)]
            rows.append({**dict(zip(keys, values)), "seed": seed, **{m.spec: r["metrics"].get(m.spec) for m in ms}})
        outputs = {records[(name, seed)].get("outputs") for seed in seeds}
        if len(seeds) > 1 and len(outputs) == 1 and None not in outputs:
            repeated.append(values)
            warnings.warn(f"cell {name}: all {len(seeds)} seeds gave identical runs (nothing in the scenario "
                          f"depends on the seed), so they are one run repeated and the cell has no confidence "
                          f"interval", SluiceWarning, stacklevel=2)
    tidy = pd.DataFrame(rows)
    tidy["seed"] = tidy["seed"].astype("Int64")
    for m in ms:
        # Counts (drops, flows.completed) are whole numbers in summary.json, and stay so.
        whole = all(isinstance(v, int) for v in tidy[m.spec] if v is not None and not pd.isna(v))
        tidy[m.spec] = tidy[m.spec].astype("Int64" if whole else "Float64")
    agg = _typed_grid(aggregate(tidy, keys, [m.spec for m in ms], repeated), keys)
    tidy = _typed_grid(tidy, keys)
    for name, df in (("tidy", tidy), ("aggregated", agg)):
        _atomic(store / f"{name}.parquet", lambda p, df=df: df.to_parquet(p, index=False))
        _atomic(store / f"{name}.csv", lambda p, df=df: df.to_csv(p, index=False))
    return Sweep(tidy=tidy, aggregated=agg, store=store, computed=len(tasks), recomputed=len(stale))


def _run_local(tasks: list, sc: Scenario, ms: list, workers: int, records: dict, bar) -> None:
    """Runs `tasks` on `workers` threads, adding each finished task's record to `records`.

    Threads, not processes: a run holds no GIL, so threads simulate in parallel as processes would,
    and they need none of what made a process pool fragile: pickling (a worker's SluiceError
    arrived as a PicklingError) and, with 'spawn' or 'forkserver', importing the caller's main
    module again in every worker (a script without an `if __name__ == "__main__":` guard started
    its sweep again there, and the pool broke). 'fork' would not import it, but forking a process
    that has threads (pyarrow's, tqdm's, the caller's) can deadlock the child.
    """
    stop = threading.Event()

    def tick(now_ns, end_ns):
        if stop.is_set():
            raise _Stopped()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sluice-sweep") as pool:
        futures = [pool.submit(_run_task, sc, sets, ms, rec, path, tick) for sets, rec, path in tasks]
        try:
            for f in as_completed(futures):
                r = f.result()
                records[(r["cell"], r["seed"])] = r
                bar.update()
        except BaseException:
            # Ctrl-C here, or a task's error: start no more tasks and end the runs under way at
            # their next tick, rather than leave the caller waiting for them.
            stop.set()
            for f in futures:
                f.cancel()
            raise


def _jsonable(v):
    return v if isinstance(v, (str, int, float, bool)) else json.dumps(v)


def _atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
