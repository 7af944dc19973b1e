"""Sweeps: the Dask cluster computes exactly what the local pool does; an interrupted sweep resumes
computing only what is missing, and a result whose inputs changed is computed again."""

import json
import pickle
import re
import subprocess
import sys
import warnings

import pandas as pd
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
    row = pool.tidy[(pool.tidy["classes.query.cc"] == "dctcp") & (pool.tidy["switch.ecn.k"] == 60_000)
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
    assert "(1 plot)" in out and (store / "drops.png").exists()


class Rerun:
    """Sweeps of a copy of opencc_storage.toml, which a test edits as a user edits theirs, into one store."""

    GRID = {"classes.query.cc": ["cubic", "dctcp"]}

    def __init__(self, scenario, tmp_path):
        self.path, self.store = tmp_path / "storage.toml", tmp_path / "store"
        self.path.write_text(scenario.read_text())

    def sweep(self, **kw):
        """The sweep's drops per query algorithm, and what it said of results from other inputs."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = sluice.sweep(self.path, self.GRID, [1], ["drops"], store=self.store, jobs=2, progress=False, **kw)
        told = [str(w.message) for w in caught if "came from other inputs" in str(w.message)]
        return result, dict(zip(result.tidy["classes.query.cc"], result.tidy["drops"])), told

    def direct(self, **kw):
        """Drops per query algorithm from runs of the scenario as it is now."""
        return {cc: sluice.run(self.path, set={"classes.query.cc": cc, **kw}, seed=1).summary["drops"]
                for cc in self.GRID["classes.query.cc"]}

    def assert_truthful(self, set_):
        """sweep.json states the inputs every stored result came from."""
        spec = json.loads((self.store / "sweep.json").read_text())
        assert spec["set"] == set_
        for p in result_files(self.store):
            record = json.loads(p.read_text())
            assert record["key"] == sluice._sweep.task_key(spec["inputs"][record["cell"]], record["seed"])
            assert record["overrides"][:len(set_)] == set_


def test_a_rerun_with_another_set_computes_again(scenario, tmp_path):
    rerun = Rerun(scenario, tmp_path)
    first, before, _ = rerun.sweep()
    assert first.computed == 2
    # Every stored result came from the scenario's own 1 s duration: both run again.
    shorter, drops, told = rerun.sweep(set={"sim.duration": "300ms"})
    assert drops == rerun.direct(**{"sim.duration": "300ms"}) and drops != before
    assert shorter.computed == 2 and shorter.recomputed == 2
    assert len(told) == 1 and told[0].startswith(f"2 results in {rerun.store} came from other inputs"), told
    rerun.assert_truthful(["sim.duration=300ms"])
    # Unchanged inputs still resume: nothing to compute, nothing said.
    again, same, told = rerun.sweep(set={"sim.duration": "300ms"})
    assert again.computed == 0 and same == drops and not told


def test_a_rerun_after_the_scenario_file_is_edited_computes_again(scenario, tmp_path):
    rerun = Rerun(scenario, tmp_path)
    _, before, _ = rerun.sweep(set={"sim.duration": "300ms"})
    # A tenth of the switch buffer, under the same `set`.
    text = rerun.path.read_text()
    edited = re.sub(r'(?m)^buffer = "1MB"$', 'buffer = "100KB"', text, count=1)
    assert edited != text, "opencc_storage.toml no longer has a 1MB switch buffer"
    rerun.path.write_text(edited)
    smaller, drops, told = rerun.sweep(set={"sim.duration": "300ms"})
    assert drops == rerun.direct(**{"sim.duration": "300ms"}) and drops != before
    assert smaller.computed == 2 and smaller.recomputed == 2 and len(told) == 1, told
    rerun.assert_truthful(["sim.duration=300ms"])


def test_seeds_that_change_nothing_warn_and_give_no_interval(repo, scenario, tmp_path):
    # opencc_storage draws nothing at random: every seed of a cell is the same run.
    with pytest.warns(sluice.SluiceWarning) as caught:
        same = sluice.sweep(scenario, {"classes.query.cc": ["cubic", "dctcp"]}, [1, 2, 3], ["drops"],
                            store=tmp_path / "same", jobs=2, progress=False)
    said = [str(w.message) for w in caught if "identical runs" in str(w.message)]
    assert len(said) == 2 and said[0].startswith("cell classes.query.cc=cubic: all 3 seeds gave identical runs"), said
    agg = same.aggregated
    assert list(agg["drops:n"]) == [3, 3] and agg["drops:mean"].notna().all()
    assert agg["drops:ci_lo"].isna().all() and agg["drops:ci_hi"].isna().all()
    stored = pd.read_csv(tmp_path / "same" / "aggregated.csv")
    assert stored["drops:ci_lo"].isna().all() and stored["drops:ci_hi"].isna().all()

    # Seeds that draw different flows say nothing and keep their interval.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        varied = sluice.sweep(repo / "scenarios" / "websearch_leafspine.toml", {"classes.default.cc": ["dctcp"]},
                              [1, 2, 3], ["fct_ns.mean"], store=tmp_path / "varied", jobs=2, progress=False)
    assert not [w for w in caught if "identical runs" in str(w.message)]
    row = varied.aggregated.iloc[0]
    assert row["fct_ns.mean:ci_lo"] < row["fct_ns.mean:mean"] < row["fct_ns.mean:ci_hi"]


def test_the_readme_sweep_example_runs_as_a_script_without_a_main_guard(repo, tmp_path):
    readme = (repo / "README.md").read_text()
    section = readme[readme.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "sluice.sweep(" in code and "__main__" not in code
    store = tmp_path / "sweep"
    script = tmp_path / "example.py"
    script.write_text(code.replace('store="out/sweep"', f"store={str(store)!r}"))
    # A plain script: a pool whose workers import the main module again would start the sweep anew in each.
    done = subprocess.run([sys.executable, script], cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(result_files(store)) == 2 * 2 * 5
    assert (store / "aggregated.parquet").exists()


def test_a_workers_sluice_error_reaches_the_caller_as_a_sluice_error(scenario, tmp_path):
    again = pickle.loads(pickle.dumps(sluice.SluiceError("cell x: bad")))
    assert type(again) is sluice.SluiceError and str(again) == "cell x: bad"
    # A metric summary.json lacks fails in the task, after the run: on the local pool ...
    with pytest.raises(sluice.SluiceError, match="metric fct_ns.p42: summary.json of .* has no `p42` at fct_ns"):
        sluice.sweep(scenario, {"classes.query.cc": ["cubic", "dctcp"]}, [1], ["fct_ns.p42"],
                     store=tmp_path / "pool", jobs=2, progress=False)
    # ... and in a Dask worker process, whence it comes pickled.
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            with pytest.raises(sluice.SluiceError, match="metric fct_ns.p42: summary.json of .* has no `p42` at fct_ns"):
                sluice.sweep(scenario, {"classes.query.cc": ["cubic"]}, [1], ["fct_ns.p42"],
                             store=tmp_path / "dask", client=client, progress=False)


def test_grid_values_are_typed_and_counts_are_whole_numbers(repo, tmp_path):
    grid = {"switch.ecn.k": ["20KB", "60KB"], "sim.duration": ["20ms", "40ms"], "switch.alpha": ["1", "8.0"]}
    s = sluice.sweep(repo / "scenarios" / "dctcp_two_flows.toml", grid, [1], ["drops", "classes.default.goodput_bps"],
                     store=tmp_path / "s", jobs=2, progress=False)
    for table in (s.tidy, s.aggregated):
        assert str(table["switch.ecn.k"].dtype) == "Int64" and sorted(set(table["switch.ecn.k"])) == [20_000, 60_000]
        assert list(table["switch.ecn.k:text"].unique()) == ["20KB", "60KB"], "the values as given, beside them"
        assert str(table["sim.duration"].dtype) == "Float64" and sorted(set(table["sim.duration"])) == [20e6, 40e6]
        assert str(table["switch.alpha"].dtype) == "Float64" and sorted(set(table["switch.alpha"])) == [1.0, 8.0]
        assert "switch.alpha:text" not in table.columns, "a plain number needs no text beside it"
    assert str(s.tidy["drops"].dtype) == "Int64", "a count stays a whole number"
    assert str(s.tidy["classes.default.goodput_bps"].dtype) == "Float64"
    # A typed value selects its own run.
    row = s.tidy[(s.tidy["switch.ecn.k"] == 60_000) & (s.tidy["sim.duration"] == 20e6) & (s.tidy["switch.alpha"] == 8.0)]
    direct = sluice.run(repo / "scenarios" / "dctcp_two_flows.toml",
                        set={"switch.ecn.k": "60KB", "sim.duration": "20ms", "switch.alpha": "8.0"}, seed=1).summary
    assert len(row) == 1 and row["drops"].iloc[0] == direct["drops"]


def test_the_store_is_out_sweep_by_default_as_for_the_cli(sluice_bin):
    import inspect

    assert inspect.signature(sluice.sweep).parameters["store"].default == "out/sweep"
    help_text = subprocess.run([sluice_bin, "sweep", "--help"], capture_output=True, text=True).stdout
    assert "[default: out/sweep]" in help_text, help_text
    from sluice.__main__ import parser

    assert parser().parse_args(["sweep", "s.toml", "--grid", "k=1", "--metric", "drops"]).out == "out/sweep"
