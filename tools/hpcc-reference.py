#!/usr/bin/env python3
"""sluice against the HPCC paper's simulator on the same flows: docs/rdma.md's agreement table.

Runs `sluice` on crates/sluice-sim/tests/hpcc_reference/scenario.toml for each algorithm and flow
file whose reference outputs are stored there (ref/<cc>_<workload>.txt, README.md says how they
were made), and prints slowdown p50/p95/p99 for all flows, flows under 100 KB and flows of at least
1 MB, with PFC pauses, sluice beside the reference. Slowdowns and percentiles are computed as the
reference's analysis/fct_analysis.py computes them: max(1, fct / standalone fct), the element at
index int(n p) of the sorted list.

  tools/hpcc-reference.py [--sluice target/release/sluice] [--cc dcqcn ...] [--workload ws50 ...]

With --paper it runs scenarios/hpcc_ws320.toml (the HPCC paper's setting, with its incast) for each
algorithm instead, and prints docs/rdma.md's table of that scenario.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "crates", "sluice-sim", "tests", "hpcc_reference")
CCS = ["dcqcn", "timely", "dctcp_rate", "hpcc"]
WORKLOADS = ["ws50", "fb30"]
# run.py's DCTCP thresholds: a step at 30 bw / 10 KB, pmax 1.
DCTCP_ECN = {
    "100Gbps": ("300KB", "300001B"),
    "400Gbps": ("1200KB", "1200001B"),
}


def pctl(values, p):
    s = sorted(values)
    return s[int(len(s) * p)] if s else float("nan")


def groups(rows):
    """rows: (size, slowdown). Returns {group: [slowdowns]}."""
    return {
        "all": [s for _, s in rows],
        "<100KB": [s for n, s in rows if n < 100_000],
        ">=1MB": [s for n, s in rows if n >= 1_000_000],
    }


def reference(cc, wl):
    rows, pauses = [], None
    with open(os.path.join(REF, "ref", f"{cc}_{wl}.txt")) as f:
        for line in f:
            if line.startswith("#"):
                if line.startswith("# pfc_pauses"):
                    pauses = int(line.split()[-1])
                continue
            size, fct, ideal = map(int, line.split())
            rows.append((size, max(1.0, fct / ideal)))
    return rows, pauses


def overrides(cc, wl=None):
    sets = [f"classes.default.cc={cc}"] + ([f"workloads.0.file={wl}.flows"] if wl else [])
    if cc == "dctcp_rate":
        for rate, (k, kmax) in DCTCP_ECN.items():
            sets += [f'switch.rates."{rate}".ecn.kmin={k}', f'switch.rates."{rate}".ecn.kmax={kmax}',
                     f'switch.rates."{rate}".ecn.pmax=1.0']
    return sets


def run_sluice(binary, cc, wl, extra, scenario=os.path.join(REF, "scenario.toml")):
    out = tempfile.mkdtemp(prefix=f"sluice-ref-{cc}-{wl}-")
    cmd = [binary, "run", scenario, "--out", out, "--quiet"]
    for s in overrides(cc, wl) + extra:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    rows = []
    with open(os.path.join(out, "flows.csv")) as f:
        for r in csv.DictReader(f):
            if r["fct_ns"]:
                rows.append((int(r["size_bytes"]), max(1.0, float(r["fct_ns"]) / float(r["ideal_fct_ns"]))))
    with open(os.path.join(out, "summary.json")) as f:
        pauses = json.load(f)["pfc_pauses"]
    return rows, pauses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=os.environ.get("SLUICE_BIN", os.path.join(HERE, "..", "target", "release", "sluice")))
    ap.add_argument("--cc", nargs="*", default=CCS)
    ap.add_argument("--workload", nargs="*", default=WORKLOADS)
    ap.add_argument("--set", action="append", default=[], help="an extra --set for every sluice run")
    ap.add_argument("--paper", action="store_true", help="run scenarios/hpcc_ws320.toml instead")
    a = ap.parse_args()
    if a.paper:
        paper(a)
        return
    print("| workload | cc | group | p50 sluice / ref | p95 sluice / ref | p99 sluice / ref | flows |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for wl in a.workload:
        for cc in a.cc:
            ref_path = os.path.join(REF, "ref", f"{cc}_{wl}.txt")
            if not os.path.exists(ref_path):
                print(f"no reference output {ref_path}", file=sys.stderr)
                continue
            ref_rows, ref_pauses = reference(cc, wl)
            sl_rows, sl_pauses = run_sluice(a.sluice, cc, wl, a.set)
            rg, sg = groups(ref_rows), groups(sl_rows)
            for g in ["all", "<100KB", ">=1MB"]:
                cells = []
                for p in (0.5, 0.95, 0.99):
                    s, r = pctl(sg[g], p), pctl(rg[g], p)
                    cells.append(f"{s:.2f} / {r:.2f} ({(s / r - 1) * 100:+.0f}%)")
                print(f"| {wl} | {cc} | {g} | {' | '.join(cells)} | {len(sg[g])} / {len(rg[g])} |")
            print(f"| {wl} | {cc} | PFC pauses | {sl_pauses} / {ref_pauses} | | | |")
            sys.stdout.flush()


def paper(a):
    scenario = os.path.join(HERE, "..", "scenarios", "hpcc_ws320.toml")
    print("| cc | <100KB p50 | <100KB p95 | <100KB p99 | >=1MB p50 | >=1MB p95 | >=1MB p99 | all p99 | PFC pauses |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for cc in a.cc:
        rows, pauses = run_sluice(a.sluice, cc, None, a.set, scenario)
        g = groups(rows)
        cells = [f"{pctl(g[k], p):.2f}" for k in ("<100KB", ">=1MB") for p in (0.5, 0.95, 0.99)]
        print(f"| `{cc}` | {' | '.join(cells)} | {pctl(g['all'], 0.99):.2f} | {pauses:,} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
