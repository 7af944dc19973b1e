"""A run's outputs as pandas DataFrames, read from the files the simulator writes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

# Column dtypes of each table. Nullable pandas dtypes throughout: a flow that did not finish has
# <NA> finish_ns, fct_ns and slowdown; an endless flow has <NA> size_bytes. Times are nanoseconds
# (Float64: sluice keeps picosecond decimals); sizes and counts are Int64; names are `string`.
# Ports go by name in every table (`port`: "sw0->h2", sw0's egress towards h2), as scenarios name them.
SCHEMAS: dict[str, dict[str, str]] = {
    "flows": {
        "id": "Int64", "src": "Int64", "dst": "Int64", "class": "string", "cc": "string",
        "size_bytes": "Int64", "start_ns": "Float64", "finish_ns": "Float64", "fct_ns": "Float64",
        "ideal_fct_ns": "Float64", "slowdown": "Float64", "retransmits": "Int64", "timeouts": "Int64",
        "negotiation": "string", "bytes_delivered": "Int64", "goodput_bps": "Float64",
    },
    "requests": {"class": "string", "start_ns": "Float64", "end_ns": "Float64", "latency_ns": "Float64"},
    "queues": {"t_ns": "Float64", "node": "string", "port": "string", "bytes": "Int64"},
    "cwnd": {"t_ns": "Float64", "flow": "Int64", "cwnd_bytes": "Int64"},
    "utilization": {"node": "string", "port": "string", "tx_bytes": "Int64", "utilization": "Float64"},
    "ports": {"port": "string", "node": "string", "peer": "string", "rate_bps": "Int64"},
    "fct_buckets": {
        "class": "string", "bucket_lo_bytes": "Int64", "bucket_hi_bytes": "Int64", "count": "Int64",
        "fct_mean_ns": "Float64", "fct_p50_ns": "Float64", "fct_p99_ns": "Float64",
        "slowdown_mean": "Float64", "slowdown_p50": "Float64", "slowdown_p95": "Float64",
        "slowdown_p99": "Float64", "slowdown_p999": "Float64",
    },
    "telemetry": {
        "t_ns": "Float64", "flow": "Int64", "srtt_ns": "Float64", "cwnd_bytes": "Int64", "util": "Float64",
        "qdepth_bytes": "Int64", "path_latency_ns": "Float64", "hop_id": "Int64",
    },
    "circuit": {
        "start_ns": "Float64", "end_ns": "Float64", "src_rack": "Int64", "dst_rack": "Int64",
        "circuit_bytes": "Int64", "busy": "Float64", "counted": "Int64",
    },
}


def read_table(path: Path, name: str) -> pd.DataFrame:
    """Reads one of a run's CSVs with its documented dtypes; an absent file is an empty table."""
    schema = SCHEMAS[name]
    if not path.exists():
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in schema.items()})
    # Read everything as text first so a column keeps its documented dtype even when every value
    # is empty, then convert; columns this version does not know keep pandas' inference.
    raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    out = {}
    for col in raw.columns:
        dtype = schema.get(col)
        if dtype in ("Int64", "Float64"):
            out[col] = pd.to_numeric(raw[col]).astype(dtype)
        elif dtype == "string":
            out[col] = raw[col].astype("string")
        else:
            out[col] = raw[col].convert_dtypes()
    return pd.DataFrame(out, columns=raw.columns)


@dataclass
class Result:
    """One run: its summary.json as a dict and each output table as a DataFrame.

    Tables a scenario does not produce (no sampled queues, no closed-loop requests) are empty with
    their documented columns. `dir` is where the files are when `out=` was given, else None.
    """

    summary: dict
    flows: pd.DataFrame
    requests: pd.DataFrame
    queues: pd.DataFrame
    cwnd: pd.DataFrame
    utilization: pd.DataFrame
    fct_buckets: pd.DataFrame
    telemetry: pd.DataFrame
    ports: pd.DataFrame
    circuit: pd.DataFrame
    run: dict = field(default_factory=dict)
    dir: Path | None = None

    @classmethod
    def read(cls, directory: Path, keep: bool) -> "Result":
        """Reads a run directory written by the simulator."""
        d = Path(directory)
        tables = {name: read_table(d / f"{name}.csv", name) for name in SCHEMAS}
        summary = json.loads((d / "summary.json").read_text())
        run = json.loads((d / "run.json").read_text()) if (d / "run.json").exists() else {}
        return cls(summary=summary, run=run, dir=d if keep else None, **tables)

    def __repr__(self) -> str:
        f = self.summary.get("flows", {})
        return f"<sluice.Result seed={self.summary.get('seed')} flows {f.get('completed')}/{f.get('total')}>"
