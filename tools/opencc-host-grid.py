"""The open CC draft's Appendix A on real kernels (docs/platform.md): four netns hosts at 1 Gb/s
on one switch, backups and queries as scenarios/opencc_storage.toml has them, each class's
algorithm (reno, cubic, bbr, dctcp) chosen by `sluice agent`. Runs the 4 x 4 grid with repeats,
writes table.md, table.csv and grid.png under --out, and beside each figure the simulator's on
the same grid (`sluice sweep`).

  S1 (h1) receives backups from S2 and S3 and reads queries from S4;
  S2 (h2) receives backups from S1 and S4 and reads queries from S3.

A query is a 2 KB request answered with 32 KB, one outstanding per reader, 1 ms of think time;
its completion time is request to last response byte. Backup throughput is both receivers'
goodput together, after a one-second warm-up.

Each run records its evidence with `sluice testbed record` (docs/twin.md): drops at every
switch port, the kernels' retransmissions and RTOs, the queue over time, and CPU per core. A run
in which a core was saturated is left out of the means and counted apart.

Run as root, with the Linux half built:
  cargo build --release -p sluice-cli --features host
  sudo target/venv-test/bin/python tools/opencc-host-grid.py [--secs 5] [--repeats 3] [--offloads off|linux]
"""

import argparse
import csv
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALGS = ["reno", "cubic", "bbr", "dctcp"]
PREFIX = "oc"
CGROUP = "/sys/fs/cgroup/unified/sluice-opencc"
BACKUP_PORT, QUERY_PORT = 5201, 5202
REQUEST, RESPONSE, THINK = 2048, 32 * 1024, 0.001
WARMUP = 1.0
# (receiver, senders) of the backups, and (reader, server) of the queries, as host numbers.
BACKUPS = [(1, [2, 3]), (2, [1, 4])]
QUERIES = [(1, 4), (2, 3)]
# The simulator's scenario, its hosts numbered from 0.
SCENARIO = REPO / "scenarios/opencc_storage.toml"


# ---------------------------------------------------------------------------------------------
# Workers: this file run inside a host's namespace and the agent's cgroup.


def worker(role, args):
    """Runs one traffic role and prints its figures as one JSON line."""
    if role == "sink":  # port conns secs: bytes received after the warm-up
        port, conns, secs = int(args[0]), int(args[1]), float(args[2])
        ls = socket.create_server(("0.0.0.0", port), backlog=64)
        print("ready", flush=True)
        sel = selectors.DefaultSelector()
        for _ in range(conns):
            sel.register(ls.accept()[0], selectors.EVENT_READ)
        buf = bytearray(1 << 20)
        got, start = 0, time.monotonic()
        while (now := time.monotonic() - start) < secs + WARMUP:
            for key, _ in sel.select(timeout=0.1):
                n = key.fileobj.recv_into(buf)
                if now >= WARMUP:
                    got += n
        print(json.dumps({"bytes": got, "secs": secs}))
    elif role == "bulk":  # dst port secs: sends until told to stop
        dst, port, secs = args[0], int(args[1]), float(args[2])
        s = socket.create_connection((dst, port))
        data = b"\x5a" * (1 << 20)
        end = time.monotonic() + secs + WARMUP
        try:
            while time.monotonic() < end:
                s.send(data)
        except OSError:
            pass
        print(json.dumps({"cc": cc_of(s)}))
    elif role == "rpc-server":  # port: answers each request with RESPONSE bytes
        ls = socket.create_server(("0.0.0.0", int(args[0])))
        print("ready", flush=True)
        s, _ = ls.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answer = b"\xa5" * RESPONSE
        while read_exactly(s, REQUEST):
            s.sendall(answer)
        print(json.dumps({"cc": cc_of(s)}))
    elif role == "rpc-client":  # dst port secs: completion times after the warm-up, seconds
        dst, port, secs = args[0], int(args[1]), float(args[2])
        s = socket.create_connection((dst, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = b"\x01" * REQUEST
        times, start = [], time.monotonic()
        while time.monotonic() - start < secs + WARMUP:
            t = time.monotonic()
            s.sendall(request)
            read_exactly(s, RESPONSE)
            if t - start >= WARMUP:
                times.append(time.monotonic() - t)
            time.sleep(THINK)
        print(json.dumps({"times": times, "cc": cc_of(s)}))
    else:
        sys.exit(f"unknown worker role {role}")


def read_exactly(s, n):
    """Reads n bytes; False at the end of the stream."""
    while n > 0:
        chunk = s.recv(min(n, 1 << 16))
        if not chunk:
            return False
        n -= len(chunk)
    return True


def cc_of(s):
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()


# ---------------------------------------------------------------------------------------------
# The experiment.


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True).stdout


def addr(host):
    return f"10.72.{host}.1"


def spawn(host, role, *args):
    """Starts a worker in host's namespace, inside the agent's cgroup."""
    script = f'echo $$ > {CGROUP}/cgroup.procs && exec ip netns exec {PREFIX}-h{host} "$@"'
    cmd = ["sh", "-c", script, "sh", sys.executable, __file__, "--worker", role, *map(str, args)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ready(p):
    line = p.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"worker failed to start: {line}{p.stderr.read()}")


def result(p, timeout):
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"worker failed: {err}")
    return json.loads(out.strip().splitlines()[-1])


POLICY = """version = {version}
[classes.backup]
cc = "{backup}"
match = {{ dst_ports = [{backup_port}] }}
[classes.query]
cc = "{query}"
match = {{ dst_ports = [{query_port}] }}
"""


def apply_policy(path, version, query, backup, sluice, agent):
    path.write_text(POLICY.format(version=version, query=query, backup=backup, backup_port=BACKUP_PORT, query_port=QUERY_PORT))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and agent.poll() is None:
        if f"version {version} " in sh(sluice, "agent", "status", check=False):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the agent did not apply policy version {version}: {agent.stderr.read() if agent.poll() is not None else 'still running'}")


def cell(secs, sluice, evidence_dir):
    """One run of the current policy: backup MB/s, query completion times (ms), algorithms, and
    the run's evidence (drops at the receivers' ports, retransmissions, RTOs, CPU-bound)."""
    sinks = [(r, spawn(r, "sink", BACKUP_PORT, len(s), secs)) for r, s in BACKUPS]
    servers = [spawn(srv, "rpc-server", QUERY_PORT) for _, srv in QUERIES]
    for p in [p for _, p in sinks] + servers:
        ready(p)
    recorder = subprocess.Popen(
        [sluice, "testbed", "record", "--prefix", PREFIX, "--secs", str(secs + WARMUP), "--sample-ms", "20", "--out", str(evidence_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    senders = [spawn(s, "bulk", addr(r), BACKUP_PORT, secs) for r, ss in BACKUPS for s in ss]
    readers = [spawn(r, "rpc-client", addr(srv), QUERY_PORT, secs) for r, srv in QUERIES]
    limit = secs + WARMUP + 30
    got = [result(p, limit) for p in readers]
    sent = [result(p, limit) for p in senders]
    sunk = [result(p, limit) for _, p in sinks]
    served = [result(p, limit) for p in servers]
    if recorder.wait(timeout=limit) != 0:
        raise RuntimeError(f"sluice testbed record failed: {recorder.stderr.read()}")
    ev = json.loads((evidence_dir / "evidence.json").read_text())
    times = sorted(t * 1e3 for g in got for t in g["times"])
    total = lambda key: sum(h["counters"][key] for h in ev["hosts"])
    return {
        "backup_MBps": sum(s["bytes"] for s in sunk) / secs / 1e6,
        "query_ms": times,
        "backup_ran": {s["cc"] for s in sent},
        "query_ran": {s["cc"] for s in served},
        # The backups' receivers' ports (S1 and S2) are the congested ones; a CPU's input
        # backlog drops what a host hands the switch faster than the CPU forwards it.
        "drops": sum(p["sent"]["drops"] for p in ev["ports"] if p["port"] in ("p1", "p2")),
        "backlog_drops": ev["backlog_drops"],
        "retrans": total("Tcp.RetransSegs"),
        "rtos": total("TcpExt.TCPTimeouts"),
        "cpu_bound": ev["cpu_bound"],
    }


def p95(xs):
    return xs[min(len(xs) - 1, int(0.95 * len(xs)))] if xs else float("nan")


def host_setup(sluice, offloads, rate):
    sh(sluice, "testbed", "down", "--prefix", PREFIX, check=False)
    # A third of a 1 MB shared buffer per congested port, as the scenario's switch gives it, in
    # bytes (a packet limit would hold many frames a packet with offloads on).
    sh(sluice, "testbed", "up", "--prefix", PREFIX, "--hosts", "4", "--rate", rate, "--ce-threshold", "30000", "--queue-bytes", "333333", "--offloads", offloads, "--steer-flows")
    for h in range(1, 5):
        ns = f"{PREFIX}-h{h}"
        # The scenario's 10 ms minimum RTO (Linux's is 200 ms), on every route of the host.
        for r in json.loads(sh("ip", "-n", ns, "-j", "route", "show")):
            dst = r["dst"] if r["dst"] != "default" else "default"
            via = ["via", r["gateway"]] if "gateway" in r else []
            sh("ip", "-n", ns, "route", "replace", dst, *via, "dev", r["dev"], "rto_min", "10ms")


def scenario_rate(rate):
    """tc's rate ("100mbit", "1gbit") as a scenario writes it ("100Mbps", "1Gbps")."""
    units = {"kbit": "Kbps", "mbit": "Mbps", "gbit": "Gbps"}
    for unit, scenario_unit in units.items():
        if rate.lower().endswith(unit) and rate[: -len(unit)].isdigit():
            return rate[: -len(unit)] + scenario_unit
    sys.exit(f"--rate {rate!r}: expected a whole number of kbit, mbit or gbit, e.g. 100mbit")


def simulator_grid(sluice, out, rate, stack):
    """The simulator's grid on scenarios/opencc_storage.toml with its hosts' links at `rate`
    (the testbed's ports') and their TCP stack `stack`; {(query, backup): figures}."""
    sim_out = out / "simulator"
    sh(
        sluice, "sweep", str(SCENARIO), "--set", f"topology.host_rate={scenario_rate(rate)}", "--set", f"transport.stack={stack}",
        # Each reader here keeps one connection for all its queries: so do the simulator's.
        "--set", "workloads[0].connections=persistent", "--set", "workloads[1].connections=persistent",
        "--grid", f"classes.query.cc={','.join(ALGS)}", "--grid", f"classes.backup.cc={','.join(ALGS)}",
        "--metric", "classes.backup.goodput_bps:MB/s", "--metric", "classes.query.request_latency_ns.mean:ms",
        "--metric", "classes.query.request_latency_ns.p95:ms", "--out", str(sim_out), "--quiet",
    )
    with open(sim_out / "table.csv") as f:
        rows = list(csv.DictReader(f))
    grid = {}
    for r in rows:
        grid[(r["classes.query.cc"], r["classes.backup.cc"])] = (
            float(r["classes.backup.goodput_bps:MB/s"]),
            float(r["classes.query.request_latency_ns.mean:ms"]),
            float(r["classes.query.request_latency_ns.p95:ms"]),
        )
    return grid


def tables(kernel, sim, flagged):
    """Markdown: for each figure, the kernel's (mean over repeats, with the range) and the
    simulator's; then the evidence per cell; then the CPU-bound runs apart, with theirs."""
    figures = [("Backup throughput (MB/s)", 0), ("Average query completion time (ms)", 1), ("95th-percentile query completion time (ms)", 2)]
    md = []
    for title, i in figures:
        md += [f"{title}, kernel (mean of repeats, range) | simulator:", "", "| query \\ backup | " + " | ".join(ALGS) + " |", "| --- |" + " ---: |" * len(ALGS)]
        for q in ALGS:
            cells = []
            for b in ALGS:
                runs = [r[i] for r in kernel.get((q, b), [])]
                k = f"{statistics.mean(runs):.3g} ({min(runs):.3g}-{max(runs):.3g})" if runs else "CPU-bound"
                s = sim.get((q, b))
                cells.append(f"{k} \\| {s[i]:.3g}" if s else k)
            md.append(f"| {q} | " + " | ".join(cells) + " |")
        md.append("")
    md += evidence_table("Evidence per cell, kernel (mean of repeats)", kernel)
    if flagged:
        md += [f"{sum(len(r) for r in flagged.values())} CPU-bound runs, left out of the means above (a core was busy 95 % of the run):", ""]
        md += ["| query / backup | backup MB/s | query mean ms | query p95 ms |", "| --- | ---: | ---: | ---: |"]
        for (q, b), rs in sorted(flagged.items()):
            for r in rs:
                md.append(f"| {q}/{b} | {r[0]:.3g} | {r[1]:.3g} | {r[2]:.3g} |")
        md.append("")
        md += evidence_table("Their evidence (mean of the CPU-bound runs)", flagged)
    return "\n".join(md)


def evidence_table(title, runs):
    """Markdown: per cell, drops at the backups' receiver ports / input backlog drops /
    retransmitted segments / RTOs."""
    md = [f"{title}: switch port drops / input backlog drops / retransmitted segments / RTOs:", ""]
    md += ["| query \\ backup | " + " | ".join(ALGS) + " |", "| --- |" + " ---: |" * len(ALGS)]
    for q in ALGS:
        cells = [" / ".join(f"{statistics.mean(r[k] for r in runs[(q, b)]):.0f}" for k in (4, 5, 6, 7)) if (q, b) in runs else "-" for b in ALGS]
        md.append(f"| {q} | " + " | ".join(cells) + " |")
    md.append("")
    return md


def figure(kernel, sim, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    labels = [f"{q}/{b}" for q in ALGS for b in ALGS]
    x = range(len(labels))
    for ax, (title, i) in zip(axes, [("backup throughput (MB/s)", 0), ("mean query completion (ms)", 1), ("p95 query completion (ms)", 2)]):
        k = [statistics.mean(r[i] for r in kernel[(q, b)]) if (q, b) in kernel else float("nan") for q in ALGS for b in ALGS]
        ax.bar([v - 0.2 for v in x], k, width=0.4, label="Linux kernels (testbed)")
        if sim:
            ax.bar([v + 0.2 for v in x], [sim[(q, b)][i] for q in ALGS for b in ALGS], width=0.4, label="simulator")
        ax.set_xticks(list(x), labels, rotation=90, fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("query / backup algorithm")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--secs", type=float, default=5.0, help="measured seconds per run (after a 1 s warm-up)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per cell")
    ap.add_argument("--out", type=Path, default=REPO / "out/opencc-host")
    ap.add_argument("--sluice", default=str(REPO / "target/release/sluice"), help="the sluice binary, built with --features host")
    ap.add_argument("--no-simulator", action="store_true", help="skip the simulator's grid")
    ap.add_argument("--offloads", choices=["off", "linux"], default="off", help="the testbed's segmentation and receive offloads")
    ap.add_argument("--rate", default="1gbit", help="every switch port's rate (the scenario's is 1gbit); the simulator's hosts run at it too")
    ap.add_argument("--stack", choices=["linux", "rfc"], default="linux", help="the simulator's host TCP stack (transport.stack)")
    a = ap.parse_args()
    scenario_rate(a.rate)
    if os.geteuid() != 0:
        sys.exit("run as root: the testbed, the agent and BPF need it")
    if "agent" not in sh(a.sluice, "--help", check=False):
        sys.exit(f"{a.sluice} lacks `agent`: build it with `cargo build --release -p sluice-cli --features host`")
    from tqdm import tqdm

    a.out.mkdir(parents=True, exist_ok=True)
    host_setup(a.sluice, a.offloads, a.rate)
    policy = Path(tempfile.mkdtemp()) / "policy.toml"
    policy.write_text(POLICY.format(version=0, query="cubic", backup="cubic", backup_port=BACKUP_PORT, query_port=QUERY_PORT))
    sh(a.sluice, "host", "unload", check=False)
    agent = subprocess.Popen([a.sluice, "agent", "--policy", str(policy), "--cgroup", CGROUP, "--poll-ms", "100"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kernel, flagged, version = {}, {}, 0
    try:
        apply_policy(policy, version, "cubic", "cubic", a.sluice, agent)
        runs = [(q, b, r) for r in range(a.repeats) for q in ALGS for b in ALGS]
        for q, b, r in tqdm(runs, desc="testbed grid", unit="run"):
            version += 1
            apply_policy(policy, version, q, b, a.sluice, agent)
            # The agent chose each class's algorithm: the backup senders and the query servers ran
            # it. A run where a connection ran something else is said and made again, once.
            for attempt in range(2):
                c = cell(a.secs, a.sluice, a.out / "evidence" / f"{q}-{b}-{r}")
                if c["backup_ran"] == {b} and c["query_ran"] == {q}:
                    break
                status = sh(a.sluice, "agent", "status", check=False)
                tqdm.write(f"cell {q}/{b}: backups ran {c['backup_ran']}, queries {c['query_ran']}; agent status:\n{status}")
                if attempt == 1:
                    raise RuntimeError(f"cell {q}/{b} ran other algorithms twice")
            figures = (c["backup_MBps"], statistics.mean(c["query_ms"]), p95(c["query_ms"]), len(c["query_ms"]))
            figures += (c["drops"], c["backlog_drops"], c["retrans"], c["rtos"])
            if c["cpu_bound"]:
                tqdm.write(f"cell {q}/{b}: a core was saturated; this run is shown apart")
            (flagged if c["cpu_bound"] else kernel).setdefault((q, b), []).append(figures)
    finally:
        agent.terminate()
        agent.wait()
        sh(a.sluice, "host", "unload", check=False)
        sh(a.sluice, "testbed", "down", "--prefix", PREFIX, check=False)
    sim = {} if a.no_simulator else simulator_grid(a.sluice, a.out, a.rate, a.stack)
    with open(a.out / "table.csv", "w") as f:
        f.write("query_cc,backup_cc,repeat,backup_MBps,query_mean_ms,query_p95_ms,queries,port_drops,backlog_drops,retrans_segs,rtos,cpu_bound\n")
        for bound, runs in ((0, kernel), (1, flagged)):
            for (q, b), rs in runs.items():
                for i, (tp, mean, tail, n, drops, backlog, retrans, rtos) in enumerate(rs):
                    f.write(f"{q},{b},{i},{tp:.2f},{mean:.3f},{tail:.3f},{n},{drops},{backlog},{retrans},{rtos},{bound}\n")
    md = tables(kernel, sim, flagged)
    (a.out / "table.md").write_text(md)
    figure(kernel, sim, a.out / "grid.png")
    print(md)
    print(f"wrote {a.out}/table.md, table.csv and grid.png")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3:])
    else:
        main()
