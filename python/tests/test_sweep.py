"""Sweeps: the Dask cluster computes exactly what the local pool does; an interrupted sweep resumes
computing only what is missing."""

import json

import pytest

import sluice

GRID = {"classes.query.cc": ["cubic", "dctcp"], "switch.ecn.k": ["20KB", "60KB"]}
METRICS = ["classes.query.request_latency_ns.p99:ms", "classes.backup.goodput_bps:Mb/s", "drops"]
SEEDS = [1, 2, 3]


@pytest.fixture
def scenario(repo):
    return repo / "scenarios" / "opencc_storage.toml"


def result_files(store):
    return sorted(p for p in store.glob("*/seed=*.json"))


def test_dask_local_cluster_gives_the_pool_results(scenario, tmp_path):
    distributed = pytest.importorskip("distributed")
    pool = sluice.sweep(scenario, GRID, SEEDS, METRICS, store=tmp_path / "pool", jobs=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            dask = sluice.sweep(scenario, GRID, SEEDS, METRICS, store=tmp_path / "dask", client=client, progress=False)
    assert len(pool.tidy) == 2 * 2 * 3 and pool.computed == 12 and dask.computed == 12
    assert pool.tidy.equals(dask.tidy)
    assert pool.aggregated.equals(dask.aggregated)
    # Each row is that cell's own run: the figure equals a direct run with the cell's overrides.
    row = pool.tidy[(pool.tidy["classes.query.cc"] == "dctcp") & (pool.tidy["switch.ecn.k"] == "60KB")
                    & (pool.tidy["seed"] == 2)].iloc[0]
    direct = sluice.run(scenario, set={"classes.query.cc": "dctcp", "switch.ecn.k": "60KB"}, seed=2).summary
    assert row["classes.query.request_latency_ns.p99:ms"] == direct["classes"]["query"]["request_latency_ns"]["p99"] / 1e6
    assert row["drops"] == direct["drops"]
    assert pool.tidy["classes.query.request_latency_ns.p99:ms"].nunique() > 1, "the grid changed nothing"
    for store in (tmp_path / "pool", tmp_path / "dask"):
        assert len(result_files(store)) == 12
        for name in ("tidy", "aggregated"):
            assert (store / f"{name}.parquet").exists() and (store / f"{name}.csv").exists()


def test_an_interrupted_sweep_resumes_with_only_the_missing_tasks(scenario, tmp_path):
    store = tmp_path / "store"
    first = sluice.sweep(scenario, GRID, SEEDS, METRICS, store=store, jobs=2, progress=False)
    files = result_files(store)
    # An interruption: four tasks never finished, one left only its temporary file behind.
    for lost in files[::3]:
        lost.unlink()
    (files[0].parent / f".{files[0].name}.123.abc.tmp").write_text("{trunc")
    kept = {p: p.stat().st_mtime_ns for p in result_files(store)}
    resumed = sluice.sweep(scenario, GRID, SEEDS, METRICS, store=store, jobs=2, progress=False)
    assert resumed.computed == 4
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items()), "a finished task was recomputed"
    assert len(result_files(store)) == 12
    assert resumed.tidy.equals(first.tidy)
    cells = [(json.loads(p.read_text())["cell"], json.loads(p.read_text())["seed"]) for p in result_files(store)]
    assert len(set(cells)) == 12
    again = sluice.sweep(scenario, GRID, SEEDS, METRICS, store=store, jobs=2, progress=False)
    assert again.computed == 0


def test_aggregation_gives_a_student_t_interval(scenario, tmp_path):
    import pandas as pd

    tidy = pd.DataFrame({"k": ["a", "a", "a", "b"], "m": pd.array([1.0, 2.0, 3.0, 5.0], dtype="Float64")})
    agg = sluice._sweep.aggregate(tidy, ["k"], ["m"]).set_index("k")
    # mean 2, s = 1, n = 3: half-width t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051 = 2.484138.
    assert agg.loc["a", "m:mean"] == 2.0
    assert agg.loc["a", "m:ci_hi"] == pytest.approx(2.0 + 2.484138, abs=1e-6)
    assert agg.loc["b", "m:n"] == 1 and pd.isna(agg.loc["b", "m:ci_lo"])


def test_a_bad_cell_fails_before_anything_runs(scenario, tmp_path):
    with pytest.raises(sluice.SluiceError, match="cell classes.query.cc=nosuch: .*classes.query.cc"):
        sluice.sweep(scenario, {"classes.query.cc": ["dctcp", "nosuch"]}, [1], METRICS, store=tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_the_cli_hands_seeded_sweeps_to_this_package_and_reports_them(scenario, sluice_bin, tmp_path):
    import subprocess
    import sys

    env = {"SLUICE_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}
    store = tmp_path / "cli"
    subprocess.run([sluice_bin, "sweep", scenario, "--grid", "classes.query.cc=cubic,dctcp", "--metric", "drops",
                    "--seeds", "1..2", "--out", store, "--quiet"], check=True, env=env)
    assert len(result_files(store)) == 4
    api = sluice.sweep(scenario, {"classes.query.cc": ["cubic", "dctcp"]}, [1, 2], ["drops"], store=store, progress=False)
    assert api.computed == 0
    out = subprocess.run([sluice_bin, "report", store], check=True, capture_output=True, text=True).stdout
    assert "(1 plots)" in out and (store / "sweep_1.png").exists()
