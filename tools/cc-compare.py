"""NSCC beside HPCC, DCQCN, Swift and DCTCP on one fabric (docs/uet.md, scenarios/cc_compare.toml):
a permutation of 1 MB messages over the 128-host k = 8 fat tree and a 32-to-1 incast of 1 MB
each into h0, each with every link healthy and with core 0's link down to pod 0's first
aggregation switch (sw64->sw32) at a quarter of its rate, the link the UEC reference's -failed 1
degrades in its fat tree. Each transport keeps its own loss handling: TCP drops, RDMA runs over
PFC, UET trims.
Prints the markdown tables of docs/uet.md (means over seeds 1-3: the seed draws the permutation's
pairs and ECMP's hashes, which decide where flows meet) and draws docs/figures/cc_compare.png.
Run: target/venv-test/bin/python tools/cc-compare.py [--out DIR]"""

import argparse
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import sluice  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "cc_compare.toml"

# Each row: its label, transport, algorithm, and the settings it runs with (the full-queue
# handling its transport expects).
ALGORITHMS = [
    ("DCTCP", "tcp", "dctcp", {}),
    # Every packet on an ECMP hash of its own, as UET's are.
    ("DCTCP, sprayed", "tcp", "dctcp", {"classes.default.spray": True}),
    ("Swift", "tcp", "swift", {}),
    ("DCQCN", "rdma", "dcqcn", {"pfc.enabled": True}),
    ("HPCC", "rdma", "hpcc", {"pfc.enabled": True}),
    ("NSCC", "uet", "nscc", {"switch.trim.enabled": True}),
    # Spraying turned off (every packet of a flow on one ECMP path, as TCP's and RDMA's are).
    ("NSCC, 1 path", "uet", "nscc", {"switch.trim.enabled": True, "uet.paths": 1}),
    ("RCCC", "uet", "rccc", {"switch.trim.enabled": True}),
    ("NSCC + RCCC", "uet", "nscc", {"switch.trim.enabled": True, "classes.default.params.receiver_cc": True}),
]
LOSS = {"tcp": "drops", "rdma": "PFC pauses", "uet": "trims"}
# 32 senders spread over every pod, h1 beside the receiver among them.
INCAST = {"kind": "incast", "senders": list(range(1, 128, 4)), "receiver": 0, "size": "1MB", "rounds": 1}
FAILURE = {"link": "sw64->sw32", "rate": 0.25, "one_way": True}
WORKLOADS = ["permutation", "incast"]
SEEDS = [1, 2, 3]


def scenario(workload: str, failed: bool) -> dict:
    """The bundled scenario with `workload` and, if `failed`, the degraded link."""
    sc = tomllib.loads(SCENARIO.read_text())
    if workload == "incast":
        sc["workloads"] = [INCAST]
    if failed:
        sc["failures"] = [FAILURE]
    return sc


def run(workload: str, failed: bool, transport: str, cc: str, extra: dict, seed: int, out: Path) -> dict:
    """One run's figures: median and last FCT and what its transport did about congestion."""
    sets = {"classes.default.transport": transport, "classes.default.cc": cc, **extra}
    r = sluice.run(scenario(workload, failed), set=sets, seed=seed, out=out, progress=False)
    s, fct = r.summary, r.flows["fct_ns"]
    if s["flows"]["completed"] != s["flows"]["total"]:
        raise SystemExit(f"{out}: {s['flows']['total'] - s['flows']['completed']} flows left unfinished")
    trims = s.get("trimming", {})
    # What took the place of a full queue's drop: a drop, a trim (of the arrival or of the packet
    # queued last), or a pause.
    loss = {"tcp": s["drops"], "rdma": s["pfc_pauses"], "uet": trims.get("trimmed", 0) + trims.get("evicted", 0)}
    return {
        "p50": float(fct.median()) / 1e3,
        "last": float(fct.max()) / 1e3,
        "loss": loss[transport],
        "resent": s["retransmits"],
        "timeouts": s["timeouts"],
    }


def cell(runs: list) -> dict:
    """The mean of each figure over seeds, and the range of the last FCT."""
    mean = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    return {**mean, "last_lo": min(r["last"] for r in runs), "last_hi": max(r["last"] for r in runs)}


def table(results: dict):
    for workload in WORKLOADS:
        print(f"| {workload} | transport, full queue | median FCT (us) | last FCT (us) | median, link at 25% | "
              "last, link at 25% | drops, trims or pauses | resent | timeouts |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, transport, _, _ in ALGORITHMS:
            h, f = results[label, workload, False], results[label, workload, True]
            print(f"| {label} | {transport}, {LOSS[transport]} | {h['p50']:.1f} | {h['last']:.1f} | {f['p50']:.1f} | "
                  f"{f['last']:.1f} | {h['loss']:.0f} / {f['loss']:.0f} | {h['resent']:.0f} / {f['resent']:.0f} | "
                  f"{h['timeouts']:.1f} / {f['timeouts']:.1f} |")
        print()


def figure(results: dict):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    labels = [label for label, *_ in ALGORITHMS]
    x = range(len(labels))
    for ax, workload in zip(axes, WORKLOADS):
        for i, (failed, colour) in enumerate([(False, "tab:blue"), (True, "tab:red")]):
            off = [j + (i - 0.5) * 0.38 for j in x]
            cells = [results[label, workload, failed] for label in labels]
            last = [c["last"] for c in cells]
            spread = [[c["last"] - c["last_lo"] for c in cells], [c["last_hi"] - c["last"] for c in cells]]
            p50 = [c["p50"] for c in cells]
            ax.bar(off, last, width=0.36, color=colour, alpha=0.35, yerr=spread, capsize=2,
                   label="last (seeds' range), " + ("sw64->sw32 at 25%" if failed else "healthy"))
            ax.scatter(off, p50, color=colour, marker="_", s=200, zorder=3,
                       label="median, " + ("sw64->sw32 at 25%" if failed else "healthy"))
        ax.set_xticks(list(x), labels, rotation=30, ha="right", fontsize=8)
        # The permutation's tails span a decade; the incast's all end near 32 MB at line rate.
        ax.set(ylabel="flow completion time (us)", yscale="log" if workload == "permutation" else "linear",
               title=f"cc_compare: {'permutation, 128 x 1 MB' if workload == 'permutation' else 'incast, 32 x 1 MB into h0'}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(REPO / "docs" / "figures" / "cc_compare.png", dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/cc-compare", help="where each run's files go")
    out = Path(ap.parse_args().out)
    results = {}
    for workload in WORKLOADS:
        for failed in (False, True):
            for label, transport, cc, extra in ALGORITHMS:
                name = f"{workload}-{'failed' if failed else 'healthy'}-{label.replace(' + ', '_').replace(', ', '_').replace(' ', '').lower()}"
                runs = [run(workload, failed, transport, cc, extra, seed, out / name / f"seed={seed}") for seed in SEEDS]
                results[label, workload, failed] = cell(runs)
    table(results)
    figure(results)


if __name__ == "__main__":
    main()
