"""The reconfigurable-network experiments of docs/rdcn.md on scenarios/rdcn_etalon.toml (Etalon's
buffer study, Mukerjee et al., NSDI 2020): the headline table beside the paper's figures, and the
sweeps of static VOQ capacity, prebuffering tau, reTCP's tau and night length. One seed: nothing
in the scenario is random. Prints the markdown tables of docs/rdcn.md and draws
docs/figures/rdcn_sweeps.png and docs/figures/rdcn_timeline.png.
Run: target/venv-test/bin/python tools/rdcn-experiments.py"""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import sluice  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "rdcn_etalon.toml"
FIGURES = REPO / "docs" / "figures"

RESIZE = {"circuit.voq_large_packets": 50}
RETCP = {"classes.default.cc": "retcp"}
# The paper's headline figures (Etalon, experiments/buffers/graphs/nsdi2020/calcs.txt):
# utilization % and p99 latency in us.
HEADLINE = [
    ("static VOQ, 16 packets", {}, (48.7, 123)),
    ("static VOQ, 64 packets", {"circuit.voq_packets": 64}, (99.9, 484)),
    ("resize 1,800 us ahead", {**RESIZE, "circuit.tau": "1800us"}, (91.1, 286)),
    ("resize 150 us ahead + reTCP", {**RESIZE, "circuit.tau": "150us", **RETCP}, (92.7, 147)),
]
STATIC = [4, 8, 16, 32, 64, 128]
LONG_TAU = list(range(0, 3001, 300))
SHORT_TAU = list(range(0, 301, 50))
NIGHTS = [2**k for k in range(2, 12)]


def figures(overrides: dict) -> dict:
    """One run's circuit figures and cost."""
    start = time.perf_counter()
    s = sluice.run(SCENARIO, set=overrides).summary
    c = s["circuit"]
    return {"util": 100 * c["utilization"], "p50": c["latency_ns"]["p50"] / 1e3, "p99": c["latency_ns"]["p99"] / 1e3,
            "drops": c["voq_drops"], "timeouts": s["timeouts"], "events": s["events"],
            "wall": time.perf_counter() - start}


def run_all(cells: list) -> list:
    with ThreadPoolExecutor() as pool:
        return list(pool.map(figures, cells))


def table(head: str, rows: list):
    print(f"| {head} | circuit utilization (%) | p50 latency (us) | p99 latency (us) | VOQ drops | timeouts |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, r in rows:
        print(f"| {label} | {r['util']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} | {r['drops']} | {r['timeouts']} |")
    print()


def night_overrides(night: int, retcp: bool) -> dict:
    """Etalon's night sweep: day = 9 nights; the run lasts ten weeks (at least 50 ms); reTCP
    resizes 150 us ahead or 75% of the pair's time without a circuit, whichever is less."""
    day, week = 9 * night, 7 * 10 * night
    o = {"circuit.night": f"{night}us", "circuit.day": f"{day}us", "sim.duration": f"{max(50_000, 10 * week)}us"}
    if retcp:
        o.update({**RESIZE, **RETCP, "circuit.tau": f"{min(0.75 * (week - day), 150):.0f}us"})
    return o


def main():
    start = time.perf_counter()
    headline = run_all([o for _, o, _ in HEADLINE])
    print("| variant | utilization: sluice / paper (%) | p99 latency: sluice / paper (us) | p99 / static 16's: sluice / paper |")
    print("| --- | ---: | ---: | ---: |")
    base, paper_base = headline[0]["p99"], HEADLINE[0][2][1]
    for (label, _, (u, p99)), r in zip(HEADLINE, headline):
        print(f"| {label} | {r['util']:.1f} / {u} | {r['p99']:.0f} / {p99} | {r['p99'] / base:.2f} / {p99 / paper_base:.2f} |")
    print()
    rto5 = run_all([{**o, "transport.rto_min": "5ms"} for _, o, _ in HEADLINE])
    print("| variant | utilization with rto_min 1 ms / 5 ms (%) | timeouts 1 ms / 5 ms |")
    print("| --- | ---: | ---: |")
    for (label, _, _), a, b in zip(HEADLINE, headline, rto5):
        print(f"| {label} | {a['util']:.1f} / {b['util']:.1f} | {a['timeouts']} / {b['timeouts']} |")
    print()

    static = run_all([{"circuit.voq_packets": n} for n in STATIC])
    static_retcp = run_all([{"circuit.voq_packets": n, **RETCP} for n in STATIC])
    table("static VOQ (packets), CUBIC", [(n, r) for n, r in zip(STATIC, static)])
    table("static VOQ (packets), reTCP", [(n, r) for n, r in zip(STATIC, static_retcp)])
    long_tau = run_all([{**RESIZE, "circuit.tau": f"{t}us"} for t in LONG_TAU])
    table("resize tau (us), CUBIC, 16/50 packets", [(t, r) for t, r in zip(LONG_TAU, long_tau)])
    short_tau = run_all([{**RESIZE, **RETCP, "circuit.tau": f"{t}us"} for t in SHORT_TAU])
    table("resize tau (us), reTCP, 16/50 packets", [(t, r) for t, r in zip(SHORT_TAU, short_tau)])
    night_static = run_all([night_overrides(n, False) for n in NIGHTS])
    night_retcp = run_all([night_overrides(n, True) for n in NIGHTS])
    print("| night (us) | day (us) | static 16, CUBIC: utilization (%) / p99 (us) | resize + reTCP: utilization (%) / p99 (us) |")
    print("| ---: | ---: | ---: | ---: |")
    for n, a, b in zip(NIGHTS, night_static, night_retcp):
        print(f"| {n} | {9 * n} | {a['util']:.1f} / {a['p99']:.0f} | {b['util']:.1f} / {b['p99']:.0f} |")
    print()
    everything = headline + rto5 + static + static_retcp + long_tau + short_tau + night_static + night_retcp
    walls = sorted(r["wall"] for r in everything)
    events = sum(r["events"] for r in everything)
    print(f"{len(everything)} runs, {events:,} events, in {time.perf_counter() - start:.1f} s wall "
          f"(per run {walls[0]:.2f}-{walls[-1]:.2f} s)")

    FIGURES.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    a = axes[0]
    a.plot(STATIC, [r["util"] for r in static], marker="o", label="CUBIC")
    a.plot(STATIC, [r["util"] for r in static_retcp], marker="s", label="reTCP")
    a.set(xscale="log", xlabel="static VOQ capacity (packets)", ylabel="circuit utilization (%)", title="Static VOQs")
    a.set_xticks(STATIC, [str(n) for n in STATIC])
    a.legend(fontsize=8)
    b = axes[1]
    b.plot(LONG_TAU, [r["util"] for r in long_tau], marker="o", label="CUBIC, utilization")
    b.plot(SHORT_TAU, [r["util"] for r in short_tau], marker="s", label="reTCP, utilization")
    b2 = b.twinx()
    b2.plot(LONG_TAU, [r["p99"] for r in long_tau], linestyle="--", color="C0", label="CUBIC, p99")
    b2.plot(SHORT_TAU, [r["p99"] for r in short_tau], linestyle="--", color="C1", label="reTCP, p99")
    b.set(xlabel="prebuffering tau (us)", ylabel="circuit utilization (%)", title="Dynamic VOQs, 16 -> 50 packets")
    b2.set_ylabel("p99 latency (us, dashed)")
    b.legend(fontsize=8, loc="lower right")
    c = axes[2]
    c.plot(NIGHTS, [r["util"] for r in night_static], marker="o", label="static 16, CUBIC")
    c.plot(NIGHTS, [r["util"] for r in night_retcp], marker="s", label="resize + reTCP")
    c.set(xscale="log", xlabel="night length (us; day = 9 nights)", ylabel="circuit utilization (%)", title="Night length")
    c.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(FIGURES / "rdcn_sweeps.png", dpi=110)
    plt.close(fig)

    # Two weeks of the VOQ and the windows of the headline variants in steady state, days shaded.
    sample = {"sim.duration": "24ms", "output.queues.ports": '["sw0->sw3"]', "output.queues.interval": "2us",
              "output.cwnd.interval": "2us"}
    fig, axes = plt.subplots(2, len(HEADLINE), figsize=(16, 5.5), sharex=True)
    for i, (label, o, _) in enumerate(HEADLINE):
        r = sluice.run(SCENARIO, set={**o, **sample})
        shown = lambda df: df[(df["t_ns"] >= 20e6) & (df["t_ns"] <= 23e6)]  # noqa: E731
        q, w = shown(r.queues), shown(r.cwnd).groupby("t_ns")["cwnd_bytes"].sum()
        days = r.circuit[r.circuit["counted"] == 1]
        for ax in axes[:, i]:
            for _, d in days.iterrows():
                ax.axvspan(d["start_ns"] / 1e3, d["end_ns"] / 1e3, color="#dcebfa")
        axes[0, i].plot(q["t_ns"] / 1e3, q["bytes"] / 9038, lw=1)
        axes[0, i].set(title=label, ylabel="VOQ 0 -> 1 (packets)" if i == 0 else None)
        axes[1, i].plot(w.index / 1e3, w.values / 9038, lw=1, color="C1")
        axes[1, i].set(xlabel="time (us)", ylabel="sum of cwnd (packets)" if i == 0 else None, xlim=(20_000, 23_000), ylim=(0, None))
    fig.tight_layout()
    fig.savefig(FIGURES / "rdcn_timeline.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
