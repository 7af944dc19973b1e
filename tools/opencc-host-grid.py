"""The open CC draft's Appendix A on real kernels and in the simulator (docs/twin.md,
docs/platform.md): scenarios/opencc_storage.toml's 4 x 4 grid of query and backup algorithms,
each cell one `sluice twin` (the netns testbed with the classes applied by `sluice agent`, and the
simulator, on the same scenario). Writes each cell's twin under --out/<query>-<backup>/, and
table.md and table.csv: per cell, the queries' mean and 95th percentile and the backups'
throughput, kernel (mean, range) beside simulator, whether each agrees within the twin's bound,
and whether the backup algorithms rank the same on both halves for each query algorithm.

  S1 (h0) receives backups from h1 and h2 and reads queries from h3;
  S2 (h1) receives backups from h0 and h3 and reads queries from h2.

Query readers keep one persistent connection, as the testbed's do. Run as root, with the Linux
half built:
  cargo build --release -p sluice-cli --features host
  sudo python3 tools/opencc-host-grid.py [--rate 100Mbps] [--secs 1] [--repeats 3] [--offloads off|linux]
"""

import argparse
import csv
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALGS = ["reno", "cubic", "bbr", "dctcp"]
SCENARIO = REPO / "scenarios/opencc_storage.toml"
# (class, figure) of twin.csv shown per cell, with the table's heading.
SHOWN = [
    ("query", "completion_mean_ms", "query mean, ms"),
    ("query", "completion_p95_ms", "query p95, ms"),
    ("backup", "throughput_mbps", "backups, Mb/s"),
]


def twin(a, query, backup):
    """Runs one cell's `sluice twin` (or, with --tables-only, takes the one already under
    --out); returns its twin.csv rows by (class, figure)."""
    out = a.out / f"{query}-{backup}"
    if a.tables_only:
        return read_twin(out)
    sets = [
        f'topology.host_rate="{a.rate}"',
        f'sim.duration="{a.secs:g}s"',
        'workloads[0].connections="persistent"',
        'workloads[1].connections="persistent"',
        f'workloads[0].duration="{a.secs:g}s"',
        f'workloads[1].duration="{a.secs:g}s"',
        f'classes.query.cc="{query}"',
        f'classes.backup.cc="{backup}"',
    ]
    cmd = [a.sluice, "twin", str(SCENARIO), "--out", str(out), "--repeats", str(a.repeats)]
    cmd += ["--offloads", a.offloads, "--host-queue", a.host_queue, "--stack", a.stack]
    for s in sets:
        cmd += ["--set", s]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"opencc-host-grid: {' '.join(cmd)} failed:\n{done.stderr}")
    return read_twin(out)


def read_twin(out):
    """A cell's twin.csv rows by (class, figure)."""
    try:
        with open(out / "twin.csv", newline="") as f:
            return {(r["class"], r["figure"]): r for r in csv.DictReader(f)}
    except OSError as e:
        sys.exit(f"opencc-host-grid: {out / 'twin.csv'}: {e.strerror}; run the cell first (without --tables-only)")


def number(v):
    """A figure as the twin's tables show it: three significant digits."""
    return "-" if v == "" else f"{float(v):.3g}" if float(v) < 1000 else f"{float(v):.0f}"


def cell(row):
    """One figure of one cell: kernel mean (range) / simulator, starred where it disagrees."""
    if row is None or row["kernel_mean"] == "":
        return "-"
    star = "" if row["agrees"] == "true" else " *"
    return f"{number(row['kernel_mean'])} ({number(row['kernel_min'])}-{number(row['kernel_max'])}) / {number(row['simulator'])}{star}"


BOUND = 0.15  # the twin's bound: closer than this, two algorithms' means are a tie


def mean(grid, query, backup, side):
    """The queries' mean completion beside one backup algorithm, on one side."""
    return float(grid[(query, backup)][("query", "completion_mean_ms")]["kernel_mean" if side == "kernel" else "simulator"])


def apart(a, b):
    """Whether two means differ by more than the twin's bound."""
    lo, hi = sorted((a, b))
    return hi > lo * (1 + BOUND)


def ranking(grid, query, side):
    """The backup algorithms from the queries' best neighbour to their worst on one side, `~`
    between two within the bound of each other."""
    algs = sorted(ALGS, key=lambda b: mean(grid, query, b, side))
    text = algs[0]
    for prev, b in zip(algs, algs[1:]):
        text += (" < " if apart(mean(grid, query, prev, side), mean(grid, query, b, side)) else " ~ ") + b
    return text


def reversed_pairs(grid, query):
    """Pairs of backup algorithms the two halves order oppositely where at least one half sets
    them apart by more than the bound (a reversal inside both halves' bound is a tie)."""
    out = []
    for i, b1 in enumerate(ALGS):
        for b2 in ALGS[i + 1:]:
            k1, k2 = mean(grid, query, b1, "kernel"), mean(grid, query, b2, "kernel")
            s1, s2 = mean(grid, query, b1, "simulator"), mean(grid, query, b2, "simulator")
            if (k1 < k2) != (s1 < s2) and (apart(k1, k2) or apart(s1, s2)):
                out.append(f"{b1}/{b2}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", default="100Mbps", help="every link's rate (the scenario's is 1Gbps; a 2-core machine's testbed keeps up with 100Mbps)")
    ap.add_argument("--secs", type=float, default=1.0, help="measured seconds per run, after the twin's 1 s warm-up")
    ap.add_argument("--repeats", type=int, default=3, help="testbed runs per cell")
    ap.add_argument("--offloads", choices=["off", "linux"], default="off", help="the testbed's segmentation and receive offloads")
    ap.add_argument("--host-queue", choices=["flows", "fifo"], default="flows", help="each testbed host's transmit queue")
    ap.add_argument("--stack", choices=["linux", "rfc"], default="linux", help="the simulator's host TCP stack")
    ap.add_argument("--out", type=Path, default=REPO / "out/opencc-host")
    ap.add_argument("--tables-only", action="store_true", help="write table.md and table.csv from the cells already under --out")
    ap.add_argument("--sluice", default=str(REPO / "target/release/sluice"), help="the sluice binary, built with --features host")
    a = ap.parse_args()
    if a.secs <= 0 or a.repeats < 1:
        sys.exit("opencc-host-grid: --secs must be above 0 and --repeats at least 1")
    a.out.mkdir(parents=True, exist_ok=True)
    grid = {}
    for query in ALGS:
        for backup in ALGS:
            print(f"query {query}, backup {backup}", flush=True)
            grid[(query, backup)] = twin(a, query, backup)

    with open(a.out / "table.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query", "backup", "class", "figure", "kernel_mean", "kernel_min", "kernel_max", "kernel_runs", "simulator", "agrees"])
        for (query, backup), rows in grid.items():
            for (cls, fig), r in rows.items():
                w.writerow([query, backup, cls, fig, r["kernel_mean"], r["kernel_min"], r["kernel_max"], r["kernel_runs"], r["simulator"], r["agrees"]])

    md = [f"Each cell: kernel mean (lowest-highest) over {a.repeats} testbed runs / simulator ({a.stack} stack); * outside the twin's bound.", ""]
    md.append("| query | backup | " + " | ".join(h for _, _, h in SHOWN) + " |")
    md.append("| --- | --- | " + " | ".join("---:" for _ in SHOWN) + " |")
    for (query, backup), rows in grid.items():
        md.append(f"| {query} | {backup} | " + " | ".join(cell(rows.get((c, fig))) for c, fig, _ in SHOWN) + " |")
    md += ["", f"Backup algorithms by the queries' mean completion, best neighbour first (`~`: within {BOUND:.0%} of each other, a tie):", ""]
    md += ["| query | kernel | simulator | same | reversed |", "| --- | --- | --- | :---: | --- |"]
    for query in ALGS:
        rev = reversed_pairs(grid, query)
        md.append(f"| {query} | {ranking(grid, query, 'kernel')} | {ranking(grid, query, 'simulator')} | {'NO' if rev else 'yes'} | {', '.join(rev)} |")
    (a.out / "table.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {a.out}/table.md, table.csv and each cell's twin under {a.out}")


if __name__ == "__main__":
    main()
