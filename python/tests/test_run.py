"""sluice.run, check and list_algorithms against the CLI they wrap."""

import signal
import subprocess
import sys
import threading
import time
import warnings

import pandas as pd
import pytest

import sluice


def test_flows_equal_the_cli_flows_csv_for_the_same_seed(repo, sluice_bin, tmp_path):
    subprocess.run([sluice_bin, "run", "scenarios/quickstart.toml", "--seed", "7", "--quiet", "--out", tmp_path],
                   cwd=repo, check=True)
    cli = pd.read_csv(tmp_path / "flows.csv")
    r = sluice.run(repo / "scenarios" / "quickstart.toml", seed=7)
    assert list(r.flows.columns) == list(cli.columns)
    assert len(r.flows) == 400
    # Every value, column by column (NaN in the CLI's CSV is <NA> in the nullable frame).
    for col in cli.columns:
        ours = r.flows[col].astype(object).where(r.flows[col].notna(), None).tolist()
        theirs = cli[col].astype(object).where(cli[col].notna(), None).tolist()
        assert ours == theirs, col
    assert r.summary["seed"] == 7 and r.run["overrides"] == ["sim.seed=7"]


def test_a_run_cut_short_by_the_duration_warns_how_many_flows_did_not_finish(repo):
    with pytest.warns(sluice.SluiceWarning, match=r"of 400 sized flows did not finish: the run stopped at sim.duration = 1ms"):
        r = sluice.run(repo / "scenarios" / "quickstart.toml", set={"sim.duration": "1ms"})
    unfinished = int(r.flows.fct_ns.isna().sum())
    assert 0 < unfinished < 400 and r.summary["flows"]["completed"] == 400 - unfinished
    # A run in which every flow finishes says nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error", sluice.SluiceWarning)
        sluice.run(repo / "scenarios" / "quickstart.toml")


def test_check_raises_with_every_problem_one_a_line(repo):
    text = (repo / "scenarios" / "dctcp_two_flows.toml").read_text()
    bad = text.replace("[switch]", "[switch]\nbufer = 1\npriorities = 0", 1)
    assert bad != text
    with pytest.raises(sluice.SluiceError) as e:
        sluice.check(bad)
    problems = str(e.value).splitlines()
    assert len(problems) == 2 and "switch.bufer: unknown field" in problems[0], problems
    assert "switch.priorities: expected 1 to 8 queues" in problems[1], problems


def test_a_class_no_flow_belongs_to_warns_at_check_and_in_a_sweep(repo, tmp_path):
    text = (repo / "scenarios" / "dctcp_two_flows.toml").read_text() + '\n[classes.idle]\ncc = "cubic"\n'
    with pytest.warns(sluice.SluiceWarning, match='no flow belongs to class "idle"'):
        assert sluice.check(text).startswith("<scenario>: ok")
    with pytest.warns(sluice.SluiceWarning, match='cell classes.idle.cc=dctcp: no flow belongs to class "idle"'):
        sluice.sweep(text, grid={"classes.idle.cc": ["dctcp"]}, seeds=[1], metrics=["flows.completed"],
                     store=tmp_path / "store", jobs=1, progress=False)


def test_tables_have_their_documented_nullable_dtypes(repo):
    r = sluice.run(repo / "scenarios" / "dctcp_two_flows.toml")
    for name, schema in sluice.SCHEMAS.items():
        df = getattr(r, name)
        for col in df.columns:
            if col in schema:
                assert str(df[col].dtype) == schema[col], (name, col, df[col].dtype)
    assert len(r.cwnd) > 0 and len(r.queues) > 0
    # A scenario without closed-loop traffic has an empty requests table with its columns.
    assert r.requests.empty and list(r.requests.columns) == list(sluice.SCHEMAS["requests"])


def test_a_circuit_network_gives_its_days_and_figures(repo):
    r = sluice.run(repo / "scenarios" / "rdcn_etalon.toml", set={"sim.duration": "5ms"})
    days = r.circuit[r.circuit["counted"] == 1]
    # The test pair (rack 0 -> rack 1) has the first 180 us of every 1,400 us week: 4 whole days.
    assert list(days["start_ns"]) == [0.0, 1_400_000.0, 2_800_000.0, 4_200_000.0]
    assert (days[["src_rack", "dst_rack"]].drop_duplicates().values.tolist()) == [[0, 1]]
    busy = (days["busy"] * (days["end_ns"] - days["start_ns"])).sum() / (days["end_ns"] - days["start_ns"]).sum()
    assert abs(r.summary["circuit"]["utilization"] - busy) < 1e-3
    assert r.summary["circuit"]["latency_ns"]["p99"] > 0


def test_a_bad_scenario_raises_with_the_file_line_and_key(repo, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((repo / "scenarios" / "quickstart.toml").read_text().replace('buffer = "8MB"', 'bufer = "8MB"'))
    with pytest.raises(sluice.SluiceError) as e:
        sluice.run(bad)
    msg = str(e.value)
    assert str(bad) in msg and "switch.bufer" in msg and "expected one of `buffer`" in msg, msg
    with pytest.raises(sluice.SluiceError, match="topology.host_rate: expected a rate with a unit"):
        sluice.run({"topology": {"kind": "star", "hosts": 2, "host_rate": "10GB", "host_delay": "1us"}})
    with pytest.raises(sluice.SluiceError, match="cannot read the scenario"):
        sluice.run(tmp_path / "missing.toml")


def test_text_and_dict_scenarios_run_like_the_file(repo):
    text = (repo / "scenarios" / "dctcp_two_flows.toml").read_text()
    a = sluice.run(repo / "scenarios" / "dctcp_two_flows.toml")
    b = sluice.run(text)
    assert a.flows.equals(b.flows)
    assert sluice.check(text).startswith("<scenario>: ok")


def test_threads_give_the_same_tables_and_a_bad_count_raises(repo):
    path = repo / "scenarios" / "websearch_leafspine.toml"
    one = sluice.run(path, set={"sim.duration": "1ms"}, threads=1)
    three = sluice.run(path, set={"sim.duration": "1ms"}, threads=3)
    assert len(one.flows) > 50
    assert one.flows.equals(three.flows) and one.ports.equals(three.ports)
    for bad in (0, 1025):
        with pytest.raises(sluice.SluiceError, match="threads: expected a whole number of threads from 1 to 1024"):
            sluice.run(path, set={"sim.duration": "1ms"}, threads=bad)


def test_out_keeps_the_files_and_set_overrides(repo, tmp_path):
    r = sluice.run(repo / "scenarios" / "quickstart.toml", set={"classes.default.cc": "cubic"}, out=tmp_path)
    assert r.dir == tmp_path and (tmp_path / "run.json").exists()
    assert set(r.flows["cc"]) == {"cubic"}


def test_runs_release_the_gil(repo):
    # While one thread simulates, another keeps running Python.
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    before = len(ticks)
    sluice.run(repo / "scenarios" / "websearch_leafspine.toml")
    during = len(ticks) - before
    done.set()
    t.join()
    assert during > 5, during


# One bulk flow for 1,000 simulated seconds: several minutes of simulation if nothing stops it.
ENDLESS = """
[sim]
duration = "1000s"
[topology]
kind = "star"
hosts = 2
host_rate = "10Gbps"
host_delay = "1us"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 1
"""

# The same across racks, on two threads: each rack a partition, each thread a shard.
ENDLESS_ON_TWO_THREADS = """
[sim]
duration = "1000s"
threads = 2
[topology]
kind = "leaf_spine"
leaves = 2
spines = 1
hosts_per_leaf = 1
host_rate = "10Gbps"
host_delay = "1us"
fabric_rate = "10Gbps"
fabric_delay = "1us"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 1
"""


def interrupted_child(scenario: str) -> str:
    return f"""
import sys, time
import sluice
try:
    sluice.run({scenario!r})
except KeyboardInterrupt:
    print("interrupted at", time.monotonic(), flush=True)
    sys.exit(3)
print("finished", flush=True)
"""


@pytest.mark.parametrize("scenario", [ENDLESS, ENDLESS_ON_TWO_THREADS], ids=["one thread", "two threads"])
def test_a_long_run_shows_progress_and_stops_on_ctrl_c_within_a_second(tmp_path, scenario):
    child_code = interrupted_child(scenario)
    child = subprocess.Popen([sys.executable, "-c", child_code], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stderr, bar = [], threading.Event()

    def read_stderr():
        # read1: whatever the bar has written so far, without waiting for more.
        for chunk in iter(lambda: child.stderr.read1(4096), b""):
            stderr.append(chunk.decode(errors="replace"))
            if " simulated [" in "".join(stderr):
                bar.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # The bar shows once the run has lasted a second: the simulation is under way.
        shown = bar.wait(timeout=30)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("sluice.run went on for 10 s after Ctrl-C")
    finally:
        child.kill()
        child.wait()
    reader.join(timeout=5)
    out = child.stdout.read().decode()
    assert child.returncode == 3 and out.startswith("interrupted at"), (out, "".join(stderr)[-2000:])
    stopped = float(out.split()[-1])
    assert stopped - sent < 1.0, f"stopped {stopped - sent:.2f} s after Ctrl-C"
    assert shown, f"no progress bar on stderr: {''.join(stderr)[-2000:]!r}"


def test_dir_shows_the_api_and_nothing_the_package_only_uses():
    public = sorted(name for name in dir(sluice) if not name.startswith("_"))
    assert public == sorted(name for name in sluice.__all__ if not name.startswith("_"))
    for used in ("Path", "json", "tempfile", "warnings", "resolve", "overrides"):
        assert used not in public


def test_list_algorithms_gives_defaults_as_values():
    params = {a["name"]: {p["name"]: p for p in a["params"]} for a in sluice.list_algorithms()}
    assert {"newreno", "cubic", "dctcp"} <= set(params)
    g = params["dctcp"]["g"]
    assert g["default"] == 0.0625 and type(g["default"]) is float and g["default_text"] == "0.0625"
    assert "gain" in g["doc"]
    retx = params["swift"]["retx_reset_threshold"]["default"]
    assert retx == 5 and type(retx) is int
    assert params["newreno"]["ecn"]["default"] is False
    assert params["timely"]["t_low"]["default"] == "50us", "a quantity as a scenario writes it"
    w_ai = params["hpcc"]["w_ai"]
    assert w_ai["default"] is None and w_ai["default_text"] == "W_init x (1 - eta) / 10", w_ai
    assert "additive increase" in w_ai["doc"]


def test_ports_go_by_name_in_every_table(repo):
    r = sluice.run(repo / "scenarios" / "dctcp_two_flows.toml")
    assert str(r.queues["port"].dtype) == "string" and "link" not in r.queues.columns
    assert set(r.queues["port"]) == {"sw0->h2"} and set(r.queues["node"]) == {"sw0"}
    assert str(r.utilization["port"].dtype) == "string" and "link" not in r.utilization.columns
    assert sorted(r.utilization["port"]) == sorted(r.ports["port"])
    assert sluice.SCHEMAS["queues"]["port"] == sluice.SCHEMAS["ports"]["port"] == "string"
