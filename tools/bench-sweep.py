"""Sweep throughput: cells x seeds per second for a 16-cell x 4-seed grid of the OpenCC storage
scenario on 1 and 2 local workers and on a 2-worker Dask LocalCluster, and the per-task overhead
of Dask against the process pool. Run: target/venv/bin/python tools/bench-sweep.py"""

import shutil
import tempfile
import time
from pathlib import Path

import sluice

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "opencc_storage.toml"
GRID = {"classes.query.cc": ["cubic", "dctcp", "newreno", "swift"], "switch.ecn.k": ["10KB", "30KB", "60KB", "100KB"]}
SEEDS = [1, 2, 3, 4]
METRICS = ["classes.query.request_latency_ns.p99:ms", "classes.backup.goodput_bps:Mb/s"]


def timed(**kw) -> float:
    store = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    try:
        t = time.perf_counter()
        s = sluice.sweep(SCENARIO, GRID, SEEDS, METRICS, store=store, progress=False, **kw)
        wall = time.perf_counter() - t
        assert s.computed == 64
        return wall
    finally:
        shutil.rmtree(store)


if __name__ == "__main__":
    from distributed import Client, LocalCluster

    tasks = 16 * len(SEEDS)
    one = timed(jobs=1)
    two = timed(jobs=2)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c, Client(c) as client:
        timed(client=client)  # warm the workers' imports
        dask = timed(client=client)
    print(f"{tasks} tasks: 1 worker {tasks / one:.1f}/s ({one:.2f} s), 2 workers {tasks / two:.1f}/s ({two:.2f} s, "
          f"{one / two / 2:.2f} of linear), Dask LocalCluster x2 {tasks / dask:.1f}/s ({dask:.2f} s)")
    print(f"Dask overhead per task against the 2-worker pool: {(dask - two) / tasks * 2 * 1e3:+.1f} ms")
