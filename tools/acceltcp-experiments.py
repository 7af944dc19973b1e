"""The AccelTCP experiments of docs/acceltcp.md (Moon et al., NSDI 2020): on
scenarios/acceltcp_kv.toml a key-value server with one connection per request, on 1 and 8 cores,
with the host stack doing everything and with the NIC offloading setup and teardown, and the NIC
table's size against fallbacks; on scenarios/acceltcp_proxy.toml an L7 proxy relaying request
bodies of 1 KB to 256 KB on its host or splicing them on its NIC. Prints the markdown tables of
docs/acceltcp.md and draws docs/figures/acceltcp_cpu_breakdown.png and
docs/figures/acceltcp_proxy_breakdown.png.
Run: target/venv-test/bin/python tools/acceltcp-experiments.py"""

import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import sluice  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "acceltcp_kv.toml"
PROXY = REPO / "scenarios" / "acceltcp_proxy.toml"
BODIES = ["1KB", "16KB", "64KB", "256KB"]
# Long enough for the 256 KB bodies' rate to settle (about 250 requests on the host stack).
PROXY_RUN = {"sim.duration": "41ms", "workloads.0.duration": "40ms"}
FIGURES = REPO / "docs" / "figures"
ACCEL = {"offload.hosts": "[0]"}
# Eight cores need more connections in flight to stay busy.
CORES = {1: {}, 8: {"cpu.cores": 8, "workloads.0.outstanding": 64}}
OPS = ["setup", "accept", "rx", "tx", "copy", "app", "teardown", "timer", "handover"]
TABLES = [1, 2, 4, 16384]


# A closed loop leaves requests in flight when the run ends; their flows have no FCT, which
# these figures do not use.
warnings.filterwarnings("ignore", category=sluice.SluiceWarning)


def figures(overrides: dict, scenario: Path = SCENARIO) -> dict:
    """One run's request rate, latency, CPU and offload figures."""
    s = sluice.run(scenario, set=overrides).summary
    return {"per_s": s["requests"]["per_s"], "p50": s["request_latency_ns"]["p50"] / 1e3,
            "p99": s["request_latency_ns"]["p99"] / 1e3,
            "mean": s["request_latency_ns"]["mean"] / 1e3, "cpu": s["cpu"], "offload": s.get("offload")}


def main():
    cells = [(n, a) for n in CORES for a in (False, True)]
    with ThreadPoolExecutor() as pool:
        runs = list(pool.map(lambda c: figures({**CORES[c[0]], **(ACCEL if c[1] else {})}), cells))
        tables = list(pool.map(lambda t: figures({**ACCEL, "offload.table_entries": t}), TABLES))
        lazy = pool.submit(figures, {**ACCEL, "offload.lazy_tcb": "true"})
        proxy_cells = [(b, a) for b in BODIES for a in (False, True)]
        proxy_runs = list(pool.map(
            lambda c: figures({**PROXY_RUN, "workloads.0.body_size": c[0], **(ACCEL if c[1] else {})}, PROXY),
            proxy_cells))
    proxy = dict(zip(proxy_cells, proxy_runs))
    by = dict(zip(cells, runs))
    print("| cores | host stack (k req/s) | AccelTCP (k req/s) | gain | cycles/request host / AccelTCP | p50 latency host / AccelTCP (us) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in CORES:
        h, a = by[(n, False)], by[(n, True)]
        print(f"| {n} | {h['per_s'] / 1e3:.0f} | {a['per_s'] / 1e3:.0f} | {a['per_s'] / h['per_s']:.2f}x | "
              f"{h['cpu']['cycles_per_request']:.0f} / {a['cpu']['cycles_per_request']:.0f} | {h['p50']:.0f} / {a['p50']:.0f} |")
    print()
    lazy, host = lazy.result(), by[(1, False)]
    print("| one core | k req/s | gain | cycles/request | accept cycles/request |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, r in [("AccelTCP", by[(1, True)]), ("AccelTCP with lazy TCB", lazy)]:
        accept = r["cpu"]["breakdown"]["accept"] * r["cpu"]["cycles_per_request"]
        print(f"| {name} | {r['per_s'] / 1e3:.0f} | {r['per_s'] / host['per_s']:.2f}x | "
              f"{r['cpu']['cycles_per_request']:.0f} | {accept:.0f} |")
    print()
    print("| operation | host stack (% of cycles) | AccelTCP (% of cycles) |")
    print("| --- | ---: | ---: |")
    for op in OPS:
        h, a = by[(1, False)]["cpu"]["breakdown"][op], by[(1, True)]["cpu"]["breakdown"][op]
        print(f"| {op} | {100 * h:.1f} | {100 * a:.1f} |")
    print()
    print("| NIC table entries | AccelTCP (k req/s) | closes offloaded | fallbacks |")
    print("| ---: | ---: | ---: | ---: |")
    for t, r in zip(TABLES, tables):
        o = r["offload"]
        print(f"| {t} | {r['per_s'] / 1e3:.0f} | {o['teardowns']} | {o['fallbacks']} |")
    print()
    print("| body | host stack (k req/s) | AccelTCP (k req/s) | gain | Gbit/s host / AccelTCP | proxy core busy host / AccelTCP | mean latency host / AccelTCP (us) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for b in BODIES:
        h, a = proxy[(b, False)], proxy[(b, True)]
        bits = (int(b[:-2]) * 1000 + 128) * 8 / 1e9
        print(f"| {b} | {h['per_s'] / 1e3:.1f} | {a['per_s'] / 1e3:.1f} | {a['per_s'] / h['per_s']:.2f}x | "
              f"{h['per_s'] * bits:.1f} / {a['per_s'] * bits:.1f} | {100 * h['cpu']['utilization']:.0f}% / "
              f"{100 * a['cpu']['utilization']:.0f}% | {h['mean']:.0f} / {a['mean']:.0f} |")
    print()

    FIGURES.mkdir(parents=True, exist_ok=True)
    breakdown(by[(1, False)], by[(1, True)], "acceltcp_cpu_breakdown.png")
    breakdown(proxy[("64KB", False)], proxy[("64KB", True)], "acceltcp_proxy_breakdown.png")


def breakdown(host: dict, accel: dict, name: str):
    """Cycles per request by operation, host stack against AccelTCP, one core."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    labels = ["host stack", "AccelTCP"]
    for i, r in enumerate((host, accel)):
        left = 0.0
        for j, op in enumerate(OPS):
            # Cycles per request by operation: the bar's length is the core's cost of a request.
            w = r["cpu"]["breakdown"][op] * r["cpu"]["cycles_per_request"]
            ax.barh(i, w, left=left, color=plt.cm.tab10(j), label=op if i == 0 else None)
            left += w
    ax.set_yticks([0, 1], labels)
    ax.set_xlabel("cycles per request (one core, 2.4 GHz)")
    ax.legend(ncol=3, fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(FIGURES / name, dpi=120)


if __name__ == "__main__":
    main()
