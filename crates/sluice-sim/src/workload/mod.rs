//! Workloads: the scenario's `[[workloads]]` entries turned into the flows a run starts.

pub mod cdf;
pub mod trace;

use crate::time::{Bytes, Time};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One flow to start: endpoints as host ordinals, size (None = endless), start time, class index.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Sending host ordinal.
    pub src: usize,
    /// Receiving host ordinal.
    pub dst: usize,
    /// Bytes to transfer; `None` keeps sending until the run ends.
    pub size: Option<u64>,
    /// When the application opens the flow.
    pub start: Time,
    /// Index into the scenario's class table.
    pub class: usize,
}

/// One entry of an explicit flow list.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    /// Sending host ordinal.
    pub src: usize,
    /// Receiving host ordinal.
    pub dst: usize,
    /// Bytes to transfer.
    pub size: Bytes,
    /// Start time (default 0).
    #[serde(default)]
    pub start: Time,
    /// Class name (default: the workload's class).
    pub class: Option<String>,
}

/// A `[[workloads]]` entry. One flat table serves every kind so that errors can name the key.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// "flows" (explicit list), "trace" (a flow file) or "bulk" (long-lived N-to-1).
    pub kind: String,
    /// Traffic class of the flows (default "default").
    pub class: Option<String>,
    /// kind = "flows": the list.
    pub flows: Option<Vec<FlowEntry>>,
    /// kind = "trace": path to the file, relative to the scenario.
    pub file: Option<String>,
    /// kind = "trace": "csv" (`src,dst,size_bytes,start`) or "hpcc" (the HPCC simulator's flow file).
    pub format: Option<String>,
    /// kind = "bulk": sending host ordinals.
    pub senders: Option<Vec<usize>>,
    /// kind = "bulk": the receiving host ordinal.
    pub receiver: Option<usize>,
    /// kind = "bulk": bytes per flow (absent: endless).
    pub size: Option<Bytes>,
    /// kind = "bulk": start time (default 0).
    pub start: Option<Time>,
}

/// What a workload needs to know about the scenario to produce flows.
pub struct WorkloadContext<'a> {
    /// Number of hosts in the topology.
    pub hosts: usize,
    /// Directory relative file paths resolve against.
    pub base_dir: &'a Path,
    /// Resolves a class name to its index, or explains the error.
    pub class_index: &'a dyn Fn(&str) -> Option<usize>,
    /// Class names, for error messages.
    pub class_names: &'a [String],
}

impl WorkloadConfig {
    /// Produces this workload's flows; `key` is its path in the scenario (e.g. "workloads[0]").
    pub fn flows(&self, key: &str, ctx: &WorkloadContext) -> Result<Vec<FlowSpec>, String> {
        let class_of = |name: Option<&str>, at: &str| -> Result<usize, String> {
            let name = name.unwrap_or("default");
            (ctx.class_index)(name).ok_or_else(|| {
                format!("{at}.class: unknown class \"{name}\"; defined classes: {}", ctx.class_names.join(", "))
            })
        };
        let class = class_of(self.class.as_deref(), key)?;
        let host = |h: usize, at: String| -> Result<usize, String> {
            if h < ctx.hosts {
                Ok(h)
            } else {
                Err(format!("{at}: host {h} does not exist; the topology has hosts 0 to {}", ctx.hosts - 1))
            }
        };
        let only = |allowed: &[&str]| -> Result<(), String> {
            let present = [
                ("flows", self.flows.is_some()),
                ("file", self.file.is_some()),
                ("format", self.format.is_some()),
                ("senders", self.senders.is_some()),
                ("receiver", self.receiver.is_some()),
                ("size", self.size.is_some()),
                ("start", self.start.is_some()),
            ];
            match present.iter().find(|(k, p)| *p && !allowed.contains(k)) {
                Some((k, _)) => Err(format!("{key}.{k}: not used by kind = \"{}\"", self.kind)),
                None => Ok(()),
            }
        };
        let required = |present: bool, k: &str| -> Result<(), String> {
            if present {
                Ok(())
            } else {
                Err(format!("{key}.{k}: required for kind = \"{}\"", self.kind))
            }
        };
        match self.kind.as_str() {
            "flows" => {
                only(&["flows"])?;
                required(self.flows.is_some(), "flows")?;
                let mut out = Vec::new();
                for (i, f) in self.flows.iter().flatten().enumerate() {
                    let at = format!("{key}.flows[{i}]");
                    let (src, dst) = (host(f.src, format!("{at}.src"))?, host(f.dst, format!("{at}.dst"))?);
                    if src == dst {
                        return Err(format!("{at}: src and dst are both host {src}; a flow needs two hosts"));
                    }
                    if f.size.0 == 0 {
                        return Err(format!("{at}.size: expected a positive size like \"1MB\""));
                    }
                    let class = match &f.class {
                        Some(c) => class_of(Some(c), &at)?,
                        None => class,
                    };
                    out.push(FlowSpec { src, dst, size: Some(f.size.0), start: f.start, class });
                }
                Ok(out)
            }
            "trace" => {
                only(&["file", "format"])?;
                required(self.file.is_some(), "file")?;
                let file = self.file.as_deref().unwrap_or_default();
                let path = ctx.base_dir.join(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{key}.file: cannot read \"{}\": {e}", path.display()))?;
                let name = path.display().to_string();
                let flows = match self.format.as_deref().unwrap_or("csv") {
                    "csv" => trace::parse_csv_trace(&text, &name)?,
                    "hpcc" => trace::parse_hpcc_flows(&text, &name)?,
                    f => return Err(format!("{key}.format: expected \"csv\" or \"hpcc\", got \"{f}\"")),
                };
                trace::validate(&flows, ctx.hosts, &name)?;
                Ok(flows
                    .iter()
                    .map(|f| FlowSpec { src: f.src, dst: f.dst, size: Some(f.size_bytes), start: f.start, class })
                    .collect())
            }
            "bulk" => {
                only(&["senders", "receiver", "size", "start"])?;
                required(self.senders.is_some(), "senders")?;
                required(self.receiver.is_some(), "receiver")?;
                let dst = host(self.receiver.unwrap_or_default(), format!("{key}.receiver"))?;
                let senders = self.senders.as_deref().unwrap_or_default();
                if senders.is_empty() {
                    return Err(format!("{key}.senders: expected at least one host"));
                }
                if self.size.is_some_and(|s| s.0 == 0) {
                    return Err(format!("{key}.size: expected a positive size, or no size for endless flows"));
                }
                let mut out = Vec::new();
                for (i, &s) in senders.iter().enumerate() {
                    let src = host(s, format!("{key}.senders[{i}]"))?;
                    if src == dst {
                        return Err(format!("{key}.senders[{i}]: host {src} is also the receiver"));
                    }
                    out.push(FlowSpec { src, dst, size: self.size.map(|b| b.0), start: self.start.unwrap_or_default(), class });
                }
                Ok(out)
            }
            k => Err(format!("{key}.kind: expected \"flows\", \"trace\" or \"bulk\", got \"{k}\"")),
        }
    }
}
