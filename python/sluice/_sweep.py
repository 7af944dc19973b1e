"""Sweeps: every cell of a grid of overrides x every seed is one task; tasks run on a local process
pool or, unchanged, on a Dask cluster; each result lands in the store as its own file, written
atomically, so a killed sweep resumes and computes only what is missing."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import tempfile
import uuid
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from . import _native
from ._scenario import Overrides, Scenario, ScenarioLike, overrides, resolve
from ._warnings import SluiceWarning

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
        return v / self.divisor


def _fragment(v: object) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", str(v))


def cell_name(cell: Mapping[str, object]) -> str:
    """A cell's directory name in the store: `key=value__key=value`, as `sluice sweep` names it."""
    return "__".join(f"{k}={_fragment(v)}" for k, v in cell.items())


def _run_task(sc: Scenario, sets: list, metrics: list, record: dict, path: str) -> dict:
    """One cell x seed: run in a scratch directory, keep only the figures, write them atomically."""
    with tempfile.TemporaryDirectory(prefix="sluice-task-") as d:
        _, notes = _native.run(sc.text, sc.file, sc.base_dir, sets, d)
        summary = json.loads(Path(d, "summary.json").read_text())
    where = f"{record['cell']} seed {record['seed']}"
    record = dict(record, metrics={m.spec: m.read(summary, where) for m in metrics}, wall_s=summary.get("wall_s"),
                  warnings=notes)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return record


def _load_done(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _t95(n: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1))


def aggregate(tidy: pd.DataFrame, keys: list, metrics: list) -> pd.DataFrame:
    """Per cell: n and, per metric, the mean and the 95% confidence interval of the mean (Student t
    over the seeds; <NA> with fewer than two values)."""
    rows = []
    for values, g in tidy.groupby(keys, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        row = dict(zip(keys, values))
        for m in metrics:
            x = g[m].dropna().astype(float)
            n = len(x)
            mean = x.mean() if n else None
            half = _t95(n) * x.std(ddof=1) / math.sqrt(n) if n >= 2 else None
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
    as Parquet and CSV. `computed` counts the tasks this call ran (the rest were in the store)."""

    tidy: pd.DataFrame
    aggregated: pd.DataFrame
    store: Path
    computed: int


def _progress(total: int, initial: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="sweep", unit="task", disable=not enabled, smoothing=0.1)


def sweep(
    scenario: ScenarioLike,
    grid: Mapping[str, Sequence],
    seeds: Sequence[int] = (1,),
    metrics: Sequence[str] = ("fct_ns.mean",),
    store="sweep",
    client=None,
    *,
    set: Overrides = None,
    jobs: int | None = None,
    progress: bool = True,
) -> Sweep:
    """Runs `scenario` for every combination of the `grid` values (key path -> values) and every
    seed, and tabulates `metrics` (summary.json key paths, optionally `:unit`).

    Each task writes `store/<cell>/seed=<n>.json`; tasks whose file exists are not run again. With
    `client` (a dask.distributed Client) the tasks run on its cluster, otherwise on a process pool
    of `jobs` workers (default: every core). Every cell is checked before any runs.
    """
    if not grid:
        raise _native.SluiceError("grid: expected at least one key with its values, like {'classes.query.cc': ['dctcp', 'swift']}")
    keys = list(grid)
    for k, vs in grid.items():
        if isinstance(vs, (str, bytes)) or not isinstance(vs, Sequence) or len(vs) == 0:
            raise _native.SluiceError(f"grid {k}: expected a list of values, got {vs!r}")
    seeds = list(seeds)
    if not seeds:
        raise _native.SluiceError("seeds: expected at least one seed")
    ms = [Metric.parse(m) for m in metrics]
    sc = resolve(scenario)
    fixed = overrides(set)
    store = Path(store)
    cells = [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    notes = {}
    for cell in cells:
        try:
            _, cell_notes = _native.check(sc.text, sc.file, sc.base_dir, fixed + overrides(cell))
        except _native.SluiceError as e:
            raise _native.SluiceError(f"cell {cell_name(cell)}: {e}") from None
        for note in cell_notes:
            notes.setdefault(note, cell_name(cell))
    for note, first in notes.items():
        warnings.warn(f"cell {first}: {note}", SluiceWarning, stacklevel=2)

    store.mkdir(parents=True, exist_ok=True)
    (store / "sweep.json").write_text(json.dumps(
        {"scenario": sc.file, "grid": {k: list(map(_jsonable, v)) for k, v in grid.items()}, "seeds": seeds,
         "metrics": [m.spec for m in ms], "set": fixed}, indent=2) + "\n")
    tasks, records = [], {}
    for cell in cells:
        name = cell_name(cell)
        for seed in seeds:
            path = store / name / f"seed={seed}.json"
            done = _load_done(path)
            if done is not None and all(m.spec in done.get("metrics", {}) for m in ms):
                records[(name, seed)] = done
                continue
            record = {"cell": name, "grid": {k: _jsonable(v) for k, v in cell.items()}, "seed": seed}
            tasks.append((fixed + overrides(cell, seed), record, str(path)))

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
            workers = min(jobs or os.cpu_count() or 1, len(tasks))
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                futures = [pool.submit(_run_task, sc, sets, ms, rec, path) for sets, rec, path in tasks]
                for f in as_completed(futures):
                    r = f.result()
                    records[(r["cell"], r["seed"])] = r
                    bar.update()
    finally:
        bar.close()
    # What the check already said of a cell (a class no flow belongs to) every run of it repeats.
    warned = [(f"{name} seed {seed}", w) for (name, seed), r in records.items() for w in r.get("warnings", [])
              if w not in notes]
    if warned:
        where, first = sorted(warned)[0]
        warnings.warn(f"{len(warned)} warnings from the sweep's runs (each run's are in its store record), "
                      f"the first: {where}: {first}", SluiceWarning, stacklevel=2)

    rows = []
    for cell in cells:
        name = cell_name(cell)
        for seed in seeds:
            r = records[(name, seed)]
            rows.append({**{k: _jsonable(v) for k, v in cell.items()}, "seed": seed,
                         **{m.spec: r["metrics"].get(m.spec) for m in ms}})
    tidy = pd.DataFrame(rows)
    tidy["seed"] = tidy["seed"].astype("Int64")
    for m in ms:
        tidy[m.spec] = tidy[m.spec].astype("Float64")
    agg = aggregate(tidy, keys, [m.spec for m in ms])
    for name, df in (("tidy", tidy), ("aggregated", agg)):
        _atomic(store / f"{name}.parquet", lambda p, df=df: df.to_parquet(p, index=False))
        _atomic(store / f"{name}.csv", lambda p, df=df: df.to_csv(p, index=False))
    return Sweep(tidy=tidy, aggregated=agg, store=store, computed=len(tasks))


def _jsonable(v):
    return v if isinstance(v, (str, int, float, bool)) else json.dumps(v)


def _atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
