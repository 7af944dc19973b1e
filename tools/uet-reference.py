#!/usr/bin/env python3
"""The UEC reference simulator (uet-htsim's htsim_uec) on its own validation cases: the figures
crates/sluice-sim/tests/uet_reference.rs holds sluice to.

Runs htsim_uec on each case of its validate_uec_{sender,rcv,both}.txt plans that the test covers
(one flow, the 16- and 128-host incasts, the 1024-host permutation with and without -failed 1),
with exactly the plans' flags, and writes one row a run to
crates/sluice-sim/tests/uet_reference/ref/results.csv: the finish times of the first, median,
99th-percentile and last flows (the reference's own "finished at" times, in us) and its summary
counters. README.md beside it says how htsim_uec was built.

  tools/uet-reference.py --htsim /path/to/uet-htsim/htsim/sim/datacenter/htsim_uec
"""
import argparse
import csv
import os
import subprocess

import htsim_output

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "crates", "sluice-sim", "tests", "uet_reference", "ref", "results.csv")

MODES = {"sender": ["-sender_cc_only"], "rcv": ["-receiver_cc_only"], "both": ["-sender_cc", "-receiver_cc"]}
# (case, matrix, flags), as the plans write them; the plans end the failed permutation at
# 400, 1500 and 1000 us for sender, rcv and both.
CASES = [
    ("one", "one.cm", ["-end", "1000"]),
    ("incast", "incast.cm", ["-end", "3000"]),
    ("incast_128", "incast_128.cm", ["-end", "30000"]),
    ("perm_1024", "perm_1024n_1024c_0u_2000000b.cm", ["-end", "400", "-paths", "128"]),
    ("perm_1024_failed", "perm_1024n_1024c_0u_2000000b.cm", ["-failed", "1", "-paths", "128"]),
]
FAILED_END = {"sender": "400", "rcv": "1500", "both": "1000"}
COUNTERS = ["New", "Rtx", "RTS", "ACKs", "NACKs", "Pulls"]


def summarize(stdout):
    """Finish times (first, median, p99, last) and the summary line's counters of one run."""
    fin, counts = htsim_output.finishes(stdout), htsim_output.counters(stdout)
    n = len(fin)
    return [n, fin[0], fin[n // 2], fin[max(int(n * 0.99) - 1, 0)], fin[-1]] + [counts[c] for c in COUNTERS]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--htsim", required=True, help="the htsim_uec binary, in its datacenter/ directory")
    args = ap.parse_args()
    datacenter = os.path.dirname(os.path.abspath(args.htsim))
    rows = []
    for mode, mode_flags in MODES.items():
        for case, cm, flags in CASES:
            flags = flags + (["-end", FAILED_END[mode]] if case == "perm_1024_failed" else [])
            cmd = [args.htsim, "-tm", os.path.join("connection_matrices", cm)] + mode_flags + flags
            out = subprocess.run(cmd, cwd=datacenter, capture_output=True, text=True, check=True).stdout
            rows.append([mode, case, " ".join(["htsim_uec"] + cmd[1:])] + summarize(out))
            print(*rows[-1][:2], *rows[-1][3:], flush=True)
    with open(OUT, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "case", "command", "flows", "first_us", "median_us", "p99_us", "last_us"] + [c.lower() for c in COUNTERS])
        w.writerows(rows)


if __name__ == "__main__":
    main()
