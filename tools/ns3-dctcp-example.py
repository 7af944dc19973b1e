#!/usr/bin/env python3
"""ns-3's examples/tcp/dctcp-example.cc beside sluice's scenarios/ns3_dctcp_example.toml: each
group's mean per-flow goodput over 4-5 s (S1 and S3 to R1, S2 to R2) and Jain's index.

sluice's side runs the scenario to 4 s and to 5 s for each seed and takes the difference of each
flow's delivered bytes, as the example counts its sinks' bytes over that second. ns-3's side is
crates/sluice-sim/tests/ns3_dctcp_reference/results.csv, or, with --ns3, fresh runs of the example
(RngRun 1 to --runs) that rewrite it.

  tools/ns3-dctcp-example.py [--sluice target/release/sluice] [--runs 3] [--ns3 ~/ns-3-dev]
"""
import argparse
import csv
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
SCENARIO = os.path.join(ROOT, "scenarios", "ns3_dctcp_example.toml")
REFERENCE = os.path.join(ROOT, "crates", "sluice-sim", "tests", "ns3_dctcp_reference", "results.csv")
GROUPS = [("s1", "s1-r1", 23.0), ("s2", "s2-r2", 471.0), ("s3", "s3-r1", 74.0)]


def sluice_run(binary, seed):
    """Per-flow goodput (Mb/s) over 4-5 s of one seed, by group."""
    delivered = {}
    with tempfile.TemporaryDirectory() as tmp:
        for end in ("4s", "5s"):
            out = os.path.join(tmp, end)
            subprocess.run([binary, "run", SCENARIO, "--set", f'sim.duration="{end}"', "--set", f"sim.seed={seed}",
                            "--out", out], check=True, capture_output=True)
            with open(os.path.join(out, "flows.csv")) as f:
                delivered[end] = {r["id"]: (r["class"], int(r["bytes_delivered"])) for r in csv.DictReader(f)}
    groups = {}
    for fid, (group, b) in delivered["5s"].items():
        groups.setdefault(group, []).append((b - delivered["4s"][fid][1]) * 8 / 1e6)
    return groups


def ns3_runs(checkout, runs):
    """Runs the example in an ns-3 checkout; rewrites the reference CSV."""
    rows = []
    for rng in range(1, runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["./ns3", "run", "--no-build", f"--cwd={tmp}", f"dctcp-example --RngRun={rng}"],
                           cwd=checkout, check=True, capture_output=True)
            for group, name, _ in GROUPS:
                with open(os.path.join(tmp, f"dctcp-example-{name}-throughput.dat")) as f:
                    for line in f:
                        if not line.startswith("#"):
                            _, flow, mbps = line.split()
                            rows.append([rng, group, int(flow), mbps])
    with open(REFERENCE, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rng_run", "group", "flow", "mbps"])
        w.writerows(rows)


def reference():
    """ns-3's per-flow goodput by run and group."""
    runs = {}
    with open(REFERENCE) as f:
        for r in csv.DictReader(f):
            runs.setdefault(r["rng_run"], {}).setdefault(r["group"], []).append(float(r["mbps"]))
    return list(runs.values())


def mean(v):
    return sum(v) / len(v)


def jain(v):
    return sum(v) ** 2 / (len(v) * sum(x * x for x in v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target", "release", "sluice"))
    ap.add_argument("--runs", type=int, default=3, help="seeds (sluice) and RngRuns (ns-3)")
    ap.add_argument("--ns3", help="an ns-3-dev checkout with dctcp-example built: run it again")
    args = ap.parse_args()
    if args.ns3:
        ns3_runs(args.ns3, args.runs)
    ns3 = reference()
    ours = [sluice_run(args.sluice, seed) for seed in range(1, args.runs + 1)]
    print("| group | example's figure | ns-3-dev (runs) | Jain | sluice (seeds) | Jain | vs example | vs ns-3-dev |")
    print("|---|---|---|---|---|---|---|---|")
    for group, _, stated in GROUPS:
        n = [mean(r[group]) for r in ns3]
        s = [mean(r[group]) for r in ours]
        nj = min(jain(r[group]) for r in ns3)
        sj = min(jain(r[group]) for r in ours)
        print(f"| {group.upper()} | {stated:g} | {mean(n):.1f} ({min(n):.1f}-{max(n):.1f}) | {nj:.3f} | "
              f"{mean(s):.1f} ({min(s):.1f}-{max(s):.1f}) | {sj:.3f} | {mean(s) / stated - 1:+.1%} | {mean(s) / mean(n) - 1:+.1%} |")


if __name__ == "__main__":
    main()
