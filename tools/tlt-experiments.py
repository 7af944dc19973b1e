"""TLT's experiments (docs/tlt.md): the incast sweep on scenarios/tlt_incast.toml (one seed:
nothing in it is random), the baselines on scenarios/tlt_leafspine.toml over seeds 1-3 (mean
and 95% confidence interval) on TCP, and on RDMA queue pairs on scenarios/tlt_rdma.toml (one
seed: each run is 265 M events). Prints the markdown tables of
docs/tlt.md and draws docs/figures/tlt_incast.png and docs/figures/tlt_leafspine.png.
Run: target/venv-test/bin/python tools/tlt-experiments.py [--store DIR]"""

import argparse
import warnings
from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import sluice  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEEDS = [1, 2, 3]
INCAST_SEEDS = [1]
PER_SENDER = [1, 2, 4, 8, 12, 16, 20, 25]  # x 8 senders: N = 8 .. 200
RTO_200US = {"transport.rto_min": "200us", "transport.rto_init": "200us"}

# Each variant: its label and the overrides that make it.
INCAST = [
    ("DCTCP", {"tlt.enabled": "false"}),
    ("DCTCP + TLP", {"tlt.enabled": "false", "transport.tlp": "true"}),
    ("DCTCP, min RTO 200 us", {"tlt.enabled": "false", **RTO_200US}),
    ("DCTCP + TLT", {}),
]
LEAFSPINE = [
    ("DCTCP", {"tlt.enabled": "false"}),
    ("DCTCP + TLP", {"tlt.enabled": "false", "transport.tlp": "true"}),
    ("DCTCP, min RTO 200 us", {"tlt.enabled": "false", **RTO_200US}),
    ("DCTCP + PFC", {"tlt.enabled": "false", "pfc.enabled": "true"}),
    ("DCTCP + TLT", {}),
    ("DCTCP + TLT + TLP", {"transport.tlp": "true"}),
    ("DCTCP + TLT + PFC", {"pfc.enabled": "true"}),
]

# TLT on RDMA queue pairs, on scenarios/tlt_rdma.toml (the TLT paper's RDMA simulator's setting):
# "SACK" is its IRN without BDP flow control (the scenario's default), "IRN" its IRN with
# IrnRtoLow 454 us, IrnRtoHigh 1930 us and IrnBdp 18,750 bytes.
SACK_OFF, PFC = {"tlt.enabled": "false"}, {"pfc.enabled": "true"}
IRN = {"rdma.recovery": "irn", "rdma.rto": "1930us", "rdma.rto_low": "454us", "rdma.irn_window": "19"}
HPCC = {"classes.background.cc": "hpcc", "classes.foreground.cc": "hpcc"}
TLT_RDMA = [
    ("DCQCN+SACK", SACK_OFF),
    ("DCQCN+SACK + TLT", {}),
    ("DCQCN+IRN", {**IRN, **SACK_OFF}),
    ("DCQCN+IRN + TLT", IRN),
    ("HPCC+SACK", {**HPCC, **SACK_OFF}),
    ("HPCC+SACK + TLT", HPCC),
    ("DCQCN+SACK + PFC", {**SACK_OFF, **PFC}),
    ("DCQCN+SACK + TLT + PFC", PFC),
]


def run(scenario: str, grid: dict, fixed: dict, metrics: list, store: Path, seeds: list):
    """Mean and 95% CI over `seeds` per cell, as a DataFrame."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sluice.SluiceWarning)
        s = sluice.sweep(REPO / "scenarios" / scenario, grid, seeds, metrics, store=store, set=fixed, progress=False)
    return s.aggregated


def half_ci(row, metric: str) -> float:
    """Half the 95% confidence interval, 0 where one seed gives none (the interval is missing)."""
    lo, hi = row[f"{metric}:ci_lo"], row[f"{metric}:ci_hi"]
    return 0.0 if pd.isna(lo) or pd.isna(hi) else float(hi - lo) / 2


def cell(row, metric: str) -> str:
    mean, lo, hi = row[f"{metric}:mean"], row[f"{metric}:ci_lo"], row[f"{metric}:ci_hi"]
    return f"{mean:.0f}" if row[f"{metric}:n"] < 2 else f"{mean:.0f} ± {(hi - lo) / 2:.0f}"


def incast(store: Path):
    p99, timeouts = "classes.incast.fct_ns.p99:us", "timeouts"
    results = {}
    for label, fixed in INCAST:
        name = label.replace(" ", "").replace(",", "_").replace("+", "_")
        results[label] = run("tlt_incast.toml", {"workloads.0.flows_per_sender": PER_SENDER}, fixed, [p99, timeouts],
                             store / f"incast-{name}", INCAST_SEEDS)
    print("| N | " + " | ".join(f"{label} p99 (us) | timeouts" for label, _ in INCAST) + " |")
    print("| ---: |" + " ---: | ---: |" * len(INCAST))
    for i, k in enumerate(PER_SENDER):
        cols = [f"{cell(results[label].iloc[i], p99)} | {results[label].iloc[i][timeouts + ':mean']:.0f}" for label, _ in INCAST]
        print(f"| {8 * k} | " + " | ".join(cols) + " |")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    n = [8 * k for k in PER_SENDER]
    for label, _ in INCAST:
        r = results[label]
        a.plot(n, r[p99 + ":mean"], marker="o", label=label)
        b.plot(n, r[timeouts + ":mean"], marker="o", label=label)
    a.set(xlabel="incast flows N", ylabel="99th-percentile FCT (us)", yscale="log", title="tlt_incast: incast FCT")
    b.set(xlabel="incast flows N", ylabel="timeouts per run", title="tlt_incast: timeouts")
    a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(REPO / "docs" / "figures" / "tlt_incast.png", dpi=110)


def leafspine(store: Path, variants: list, prefix: str, figure: str, title: str, scenario="tlt_leafspine.toml",
              load=0.3, seeds=SEEDS):
    fg, bg = "classes.foreground.fct_ns.p999:us", "classes.background.fct_ns.mean:us"
    metrics = [fg, bg, "timeouts", "pfc_pauses"]
    print("| variant | foreground p99.9 FCT (us) | background mean FCT (us) | timeouts | PFC pauses |")
    print("| --- | ---: | ---: | ---: | ---: |")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label, fixed in variants:
        name = label.replace(" ", "").replace(",", "_").replace("+", "_")
        # A grid needs a key: the seed-independent workload load, at its scenario value.
        r = run(scenario, {"workloads.0.load": [load]}, fixed, metrics, store / f"{prefix}-{name}", seeds).iloc[0]
        pauses = f"{r['pfc_pauses:mean']:.0f}" if "pfc.enabled" in fixed else "-"
        print(f"| {label} | {cell(r, fg)} | {cell(r, bg)} | {r['timeouts:mean']:.0f} | {pauses} |")
        ax.errorbar(r[bg + ":mean"], r[fg + ":mean"], xerr=half_ci(r, bg), yerr=half_ci(r, fg), marker="o", capsize=3,
                    label=label, linestyle="none")
    ax.set(xlabel="background mean FCT (us)", ylabel="foreground p99.9 FCT (us)", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(REPO / "docs" / "figures" / figure, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="out/tlt-experiments", help="where the sweeps keep their runs (resumable)")
    store = Path(ap.parse_args().store)
    incast(store)
    print()
    leafspine(store, LEAFSPINE, "leafspine", "tlt_leafspine.png", "tlt_leafspine, TCP (seeds 1-3)")
    print()
    leafspine(store, TLT_RDMA, "rdma", "tlt_rdma.png", "tlt_rdma (seed 1)", "tlt_rdma.toml", 0.2131, [1])


if __name__ == "__main__":
    main()
