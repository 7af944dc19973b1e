"""`python -m sluice sweep ...`: the sweep `sluice sweep --seeds/--dask` hands to this package."""

from __future__ import annotations

import argparse
import sys

from . import SluiceError, sweep
from ._sweep import DEFAULT_STORE


def split_values(arg: str) -> tuple[str, list[str]]:
    """`KEY=V1,V2`: commas inside brackets or braces belong to a value, as in `sluice sweep --grid`."""
    key, eq, values = arg.partition("=")
    if not eq or not key.strip():
        raise SluiceError(f"--grid {arg}: expected KEY=V1,V2,..., like classes.query.cc=reno,dctcp")
    out, depth, cur = [], 0, ""
    for c in values:
        depth += c in "[{"
        depth -= c in "]}"
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    out.append(cur.strip())
    if any(not v for v in out):
        raise SluiceError(f"--grid {arg}: an empty value in `{values}`")
    return key.strip(), out


def parse_seeds(arg: str) -> list[int]:
    """`1..5` (inclusive) or `1,2,7`."""
    try:
        if ".." in arg:
            lo, hi = arg.split("..")
            seeds = list(range(int(lo), int(hi) + 1))
        else:
            seeds = [int(s) for s in arg.split(",")]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 0:
        raise SluiceError(f"--seeds {arg}: expected a range like 1..5 or a list like 1,2,7 of whole numbers >= 0")
    return seeds


def parser() -> argparse.ArgumentParser:
    """The arguments `sluice sweep --seeds/--dask` passes on, with the CLI's defaults."""
    p = argparse.ArgumentParser(prog="sluice sweep", description="Run a grid of overrides over seeds.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("scenario")
    s.add_argument("--grid", action="append", required=True)
    s.add_argument("--metric", action="append", required=True)
    s.add_argument("--seeds", default="1")
    s.add_argument("--out", default=DEFAULT_STORE)
    s.add_argument("--set", action="append", default=[])
    s.add_argument("--jobs", "-j", type=int)
    s.add_argument("--dask")
    s.add_argument("--quiet", "-q", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        grid = dict(split_values(g) for g in a.grid)
        client = None
        if a.dask:
            try:
                from distributed import Client
            except ImportError:
                raise SluiceError("--dask needs dask.distributed: pip install 'dask[distributed]'") from None
            client = Client(a.dask)
        result = sweep(a.scenario, grid, parse_seeds(a.seeds), a.metric, store=a.out, client=client,
                       set=a.set, jobs=a.jobs, progress=not a.quiet)
    except SluiceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(result.aggregated.to_string(index=False))
    if not a.quiet:
        print(f"wrote {result.store}/tidy.parquet and aggregated.parquet ({result.computed} tasks computed)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
