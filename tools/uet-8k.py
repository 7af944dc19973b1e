#!/usr/bin/env python3
"""The UEC reference's 8,192-host leaf-spine permutations (uet-htsim's results/{rate}g_{cc}*.txt
plans: 1 MB to a permutation of hosts), run paired on this machine: htsim_uec with the plan's
flags, then sluice on the same topology file and connection matrix, one after the other, each
timed with its peak memory. Prints the markdown table of docs/uet.md.

A case is RATE:OVERSUB:FAILED:CC:PATHS, like 400:4:0:nscc:32 (400 Gb/s, 4:1, no failure, NSCC
alone, 32 paths); without cases, the table's. A case whose outputs are in --out is not run again.

  tools/uet-8k.py --uet-htsim /path/to/uet-htsim [--sluice target/release/sluice] [--threads 1,2] [CASE ...]
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

import htsim_output

CASES = ["200:1:0:nscc:32", "200:4:0:nscc:32", "200:8:0:nscc:32",
         "400:1:0:nscc:32", "400:4:0:nscc:32", "400:8:0:nscc:32",
         "400:1:1:nscc:32", "400:4:1:nscc:32", "400:8:1:nscc:32",
         "400:1:0:rccc:32", "400:4:0:rccc:32", "400:8:0:rccc:32", "800:1:0:nscc:32"]
# The plans' queue (-q) and ECN (-ecn) in packets, and starting window (-cwnd), by rate.
FLAGS = {200: (50, 12, 37, 75), 400: (100, 25, 75, 150), 800: (200, 50, 150, 300)}
MTU = 4150
LEAVES, HOSTS_PER_LEAF = 128, 64


def case_name(rate, oversub, failed, cc, paths):
    return f"{cc}_{rate}g_{oversub}to1{'_fail1' if failed else ''}_{paths}"


def flags(dc: Path, rate, oversub, failed, cc, paths):
    """htsim_uec's command line, as the plans write it."""
    q, lo, hi, cwnd = FLAGS[rate]
    topo = f"leaf_spine_8192_{rate}g" + ("" if oversub == 1 else f"_{oversub}_to_1") + ".topo"
    args = ["-tm", str(dc / "connection_matrices/perm_8192n_8192c_1MB.cm"), "-end", "1000", "-paths", str(paths),
            "-linkspeed", f"{rate}000", "-topo", str(dc / "topologies" / topo), "-q", str(q), "-ecn", str(lo), str(hi),
            "-cwnd", str(cwnd)]
    args += ["-failed", "1"] if failed else []
    return args + (["-sender_cc_only"] if cc == "nscc" else ["-receiver_cc_only"])


def scenario(dc: Path, rate, oversub, failed, cc, paths) -> str:
    """The same run as a sluice scenario."""
    q, lo, hi, cwnd = FLAGS[rate]
    topo = f"leaf_spine_8192_{rate}g" + ("" if oversub == 1 else f"_{oversub}_to_1") + ".topo"
    # At 800 Gb/s the reference's 32-bit increase accumulator wraps; sluice wraps it likewise.
    wrap = ", wrap_inc_bytes = true" if rate == 800 else ""
    params = f"params = {{ cwnd = {cwnd}{wrap} }}\n" if cc == "nscc" else ""
    text = f"""# htsim_uec {' '.join(flags(Path('<uet-htsim>'), rate, oversub, failed, cc, paths))}
[sim]
seed = 1
[topology]
kind = "htsim_file"
file = "{dc / 'topologies' / topo}"
[switch]
buffer = "4GB"                # the reference's queues are per port
[switch.ecn]
mode = "red"
kmin = "{lo * MTU}B"
kmax = "{hi * MTU}B"
pmax = 1.0
mark_at = "dequeue"
[switch.trim]
threshold = "{q * MTU}B"
header = "64B"
[uet]
framing = 0
paths = {paths}
[classes.default]
transport = "uet"
cc = "{cc}"
{params}"""
    if cc == "rccc":
        # Under receiver credit the reference marks no ECN on ToR ports towards hosts.
        for h in range(LEAVES * HOSTS_PER_LEAF):
            text += f'[switch.ports."sw{h // HOSTS_PER_LEAF}->h{h}".ecn]\nmode = "off"\n'
    if failed:
        # -failed 1 on two tiers: both directions of every leaf's link to spine 0 at a quarter of
        # their rate, queue and ECN thresholds (fat_tree_topology.cpp:914-941, 1173-1191).
        spine0 = LEAVES
        for leaf in range(LEAVES):
            text += f'[[failures]]\nlink = "sw{leaf}->sw{spine0}"\nrate = 0.25\n'
            for port in (f"sw{leaf}->sw{spine0}", f"sw{spine0}->sw{leaf}"):
                text += (f'[switch.ports."{port}".ecn]\nmode = "red"\nkmin = "{lo * MTU // 4}B"\nkmax = "{hi * MTU // 4}B"\n'
                         f'pmax = 1.0\nmark_at = "dequeue"\n[switch.ports."{port}".trim]\nthreshold = "{q * MTU // 4}B"\n')
    return text + (f'[[workloads]]\nkind = "trace"\nformat = "htsim"\n'
                   f'file = "{dc / "connection_matrices/perm_8192n_8192c_1MB.cm"}"\n')


def timed(cmd, out: Path, cwd: Path):
    """Runs `cmd` with its output to `out`; its wall time in seconds and peak memory in MB."""
    start = time.monotonic()
    with open(out, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit status {status}; see {out}")
    return time.monotonic() - start, usage.ru_maxrss / 1024


def plan_target(dc: Path, rate, oversub, failed, cc, paths):
    """The tail FCT target of the case's plan and the tail its results/ file recorded (2024 code),
    as that file prints them; None where the file has no such run."""
    name = f"{rate}g_{cc}" + ("" if oversub == 1 else f"_{oversub}_to_1") + ("_fail1" if failed else "") + ".txt"
    path = dc / "results" / name
    if not path.exists():
        return None
    for run in path.read_text().split("Running ")[1:]:
        if f"-paths {paths} " in run.splitlines()[0] and "perm_8192n_8192c_1MB.cm" in run.splitlines()[0]:
            m = re.search(r"Tail FCT ([\d.]+) us .*?target of ([\d.]+)", run)
            return (float(m.group(2)), float(m.group(1))) if m else None
    return None


def htsim(args, c, d: Path) -> dict:
    """The reference's run of case `c` in `d`: median and last finish, resends, time, memory."""
    done = d / "htsim.json"
    if done.exists():
        return json.loads(done.read_text())
    dc = args.uet_htsim / "htsim/sim/datacenter"
    wall, mem = timed([dc / "htsim_uec", *flags(dc, *c)], d / "htsim.txt", d)
    out = (d / "htsim.txt").read_text()
    fin = htsim_output.finishes(out)
    r = {"flows": len(fin), "median": statistics.median(fin), "last": fin[-1], "rtx": htsim_output.counters(out)["Rtx"],
         "wall": wall, "mem": mem}
    done.write_text(json.dumps(r, indent=1))
    return r


def sluice(args, c, d: Path, threads: int) -> dict:
    """sluice's run of case `c` on `threads` threads in `d`, as [`htsim`]."""
    done = d / f"sluice-{threads}.json"
    if done.exists():
        return json.loads(done.read_text())
    dc = args.uet_htsim / "htsim/sim/datacenter"
    (d / "scenario.toml").write_text(scenario(dc, *c))
    out = f"out-{threads}"
    wall, mem = timed([args.sluice, "run", "scenario.toml", "--threads", str(threads), "--out", out],
                      d / f"sluice-{threads}.txt", d)
    fct = sorted(float(r["fct_ns"]) / 1e3 for r in csv.DictReader(open(d / out / "flows.csv")))
    summary = json.loads((d / out / "summary.json").read_text())
    r = {"flows": len(fct), "median": statistics.median(fct), "last": fct[-1], "rtx": summary["retransmits"],
         "wall": wall, "mem": mem}
    done.write_text(json.dumps(r, indent=1))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uet-htsim", type=Path, required=True, help="a uet-htsim checkout with htsim_uec built")
    ap.add_argument("--sluice", type=Path, default=Path("target/release/sluice"))
    ap.add_argument("--threads", default="1,2", help="sluice's thread counts, comma-separated; the first is compared")
    ap.add_argument("--out", type=Path, default=Path("out/uet-8k"))
    ap.add_argument("cases", nargs="*", default=CASES)
    args = ap.parse_args()
    args.uet_htsim, args.sluice, args.out = args.uet_htsim.resolve(), args.sluice.resolve(), args.out.resolve()
    threads = [int(t) for t in args.threads.split(",")]
    print("| case | plan's tail target / its 2024 tail (µs) | median / last FCT, `htsim_uec` (µs) | sluice | resent, "
          "`htsim_uec` / sluice | `htsim_uec`: wall, peak memory | sluice, " +
          ", ".join(f"{t} thread{'s' if t > 1 else ''}" for t in threads) + " | speed-up |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case in args.cases:
        rate, oversub, failed, cc, paths = case.split(":")
        c = (int(rate), int(oversub), failed == "1", cc, int(paths))
        d = args.out / case_name(*c)
        d.mkdir(parents=True, exist_ok=True)
        ref = htsim(args, c, d)
        runs = [sluice(args, c, d, t) for t in threads]
        s = runs[0]
        if ref["flows"] != s["flows"]:
            raise SystemExit(f"{case}: {ref['flows']} flows finished in htsim_uec, {s['flows']} in sluice")
        for t, r in zip(threads[1:], runs[1:]):
            if (r["median"], r["last"], r["rtx"]) != (s["median"], s["last"], s["rtx"]):
                raise SystemExit(f"{case}: sluice on {t} threads differs from {threads[0]}")
        timing = "; ".join(f"{r['wall']:.1f} s, {r['mem']:.0f} MB" for r in runs)
        plan = plan_target(args.uet_htsim / "htsim/sim/datacenter", *c)
        plan = f"{plan[0]:.0f} / {plan[1]:.2f}" if plan else "-"
        print(f"| {case_name(*c)} | {plan} | {ref['median']:.2f} / {ref['last']:.2f} | {s['median']:.2f} ({s['median'] / ref['median'] - 1:+.1%}) / "
              f"{s['last']:.2f} ({s['last'] / ref['last'] - 1:+.1%}) | {ref['rtx']:,} / {s['rtx']:,} | "
              f"{ref['wall']:.1f} s, {ref['mem']:.0f} MB | {timing} | {ref['wall'] / s['wall']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
