//! The memory a run's flows and samples will take.

use crate::time::{Rate, Time};
use crate::transport::tcp::TcpConfig;
use crate::workload::FlowSpec;

/// What a run keeps in memory (measured on this engine, 64-bit Linux):
/// - every flow's record, spec and statistics, to the end of the run: 250,000 1 KB flows spread
///   over 100 ms (few open at once) peak at 133 MB;
/// - while its connection is open, both endpoints with their congestion control and buffers:
///   250,000 1-byte flows, nearly all open at once, peak at 426 MB;
/// - each queue or window sample and each captured packet, to the end of the run.
const FLOW_BYTES: u64 = 520;
/// See [`FLOW_BYTES`].
const OPEN_FLOW_BYTES: u64 = 1_150;
/// A queue-depth sample (time, port, bytes).
const QUEUE_SAMPLE_BYTES: u64 = 24;
/// A window sample with a few named state variables.
const CWND_SAMPLE_BYTES: u64 = 96;
/// A captured packet's headers and timestamp.
const CAPTURED_BYTES: u64 = 128;
/// The program and its tables before any element or flow.
const BASE_BYTES: u64 = 8_000_000;
/// What a run adds to the world as built, per host of the fabric: the event list, the packets on
/// the wires and in the queues, the windows of the open flows (fitted to the 10,240-host fat
/// tree's 0.3 ms prefix on one thread, which grows by 64 MB from its build to its peak,
/// `docs/engine.md`). Queues that fill far past their marking thresholds take more.
const RUN_BYTES_PER_HOST: u64 = 6_000;
/// What a thread's shard holds besides its copy of the elements' shape and its flow index, once
/// it runs: its thread and allocator arena, and per host of the fabric about 1.3 KB of event
/// list and wire store (fitted to `websearch_leafspine`, `ws320` and the 10,240-host fat tree's
/// 0.3 ms prefix on 1, 2 and 8 threads, `docs/engine.md`).
const SHARD_RUN_BYTES: (u64, u64) = (2_000_000, 1_300);

/// What a scenario will hold in memory, from what it creates; each term names the scenario key
/// that drives it, for a refusal to point at.
pub struct Footprint {
    /// Bytes for flows, with the workload that makes the most of them.
    pub flows: (u64, String),
    /// Flows known before the run.
    pub flow_count: u64,
    /// The most of them open at once, by [`most_open`].
    pub open: u64,
    /// Bytes for queue and window samples, with the key of the larger.
    pub samples: (u64, String),
    /// Bytes for captured packets.
    pub captured: u64,
    /// Bytes of the network's elements as built (0 until the world is).
    pub elements: u64,
    /// Bytes the run itself adds on the first thread (0 until the world is built).
    pub run: u64,
    /// Bytes each thread past the first adds: its shard (0 until the world is built).
    pub shard: u64,
}

impl Footprint {
    /// Bytes a run on one thread takes at the peak, about: its flows, samples and elements, the
    /// run's working set and the program's own.
    pub fn bytes(&self) -> u64 {
        BASE_BYTES + self.elements + self.run + self.flows.0 + self.samples.0 + self.captured
    }

    /// Bytes a run on `threads` threads takes at the peak, about: one thread's, and a shard for
    /// each other.
    pub fn bytes_on(&self, threads: usize) -> u64 {
        self.bytes() + threads.saturating_sub(1) as u64 * self.shard
    }

    /// Takes in the sizes of the world built: its elements, and a shard's.
    pub(crate) fn measure(&mut self, world: &crate::world::World) {
        let hosts = world.host_count() as u64;
        self.elements = world.element_bytes();
        self.run = RUN_BYTES_PER_HOST * hosts;
        self.shard = self.elements + world.flow_index_bytes() + SHARD_RUN_BYTES.0 + SHARD_RUN_BYTES.1 * hosts;
    }

    /// What flows and samples cost, from their counts; `most_made` is the workload key that makes
    /// the most flows.
    pub(crate) fn new(
        flows: &[FlowSpec],
        most_made: String,
        host_rates: &[Rate],
        tcp: &TcpConfig,
        queue_samples: f64,
        cwnd_samples: f64,
        captured: u64,
    ) -> Footprint {
        let open = most_open(flows, host_rates, tcp);
        let queue = (queue_samples * QUEUE_SAMPLE_BYTES as f64) as u64;
        let cwnd = (cwnd_samples * CWND_SAMPLE_BYTES as f64) as u64;
        let samples = if queue >= cwnd {
            (queue + cwnd, "output.queues.interval")
        } else {
            (queue + cwnd, "output.cwnd.interval")
        };
        Footprint {
            flows: (flows.len() as u64 * FLOW_BYTES + open * OPEN_FLOW_BYTES, most_made),
            flow_count: flows.len() as u64,
            open,
            samples: (samples.0, samples.1.to_string()),
            captured: captured.saturating_mul(CAPTURED_BYTES),
            elements: 0,
            run: 0,
            shard: 0,
        }
    }

    /// How many threads' runs fit in `limit` (or what this process may use), if it is known:
    /// the first holds the world, each other a shard of it.
    pub(crate) fn fit(&self, limit: Option<u64>) -> Option<u64> {
        let cap = limit.or_else(|| machine_memory().map(|(m, _)| m))?;
        Some(match cap.checked_sub(self.bytes()) {
            Some(left) => 1 + left / self.shard.max(1),
            None => 0,
        })
    }

    /// Refuses a footprint above `limit` (`limits.memory`) or, without one, above what this
    /// process may use, naming the key of its largest term.
    pub(crate) fn within(&self, limit: Option<u64>) -> Result<(), String> {
        let (cap, what) = match limit {
            Some(l) => (l, format!("limits.memory = {}", crate::words::bytes(l))),
            None => match machine_memory() {
                Some((m, why)) => (m, format!("the {} this process may use ({why})", crate::words::bytes(m))),
                None => return Ok(()),
            },
        };
        let need = self.bytes();
        if need <= cap {
            return Ok(());
        }
        let fix = "or set limits.memory to the memory the run may take";
        let (key, what_drives, fewer) = if self.flows.0 >= self.samples.0.max(self.captured) {
            let flows = crate::words::count(self.flow_count, "flow", "flows");
            (self.flows.1.as_str(), format!("its {flows} (up to {} of them open at once)", self.open), "make fewer flows")
        } else if self.samples.0 >= self.captured {
            (self.samples.1.as_str(), "its queue and window samples".to_string(), "sample less often")
        } else {
            ("output.pcap.max_packets", "its captured packets".to_string(), "capture fewer packets")
        };
        Err(format!(
            "{key}: a run would take about {} of memory for {what_drives}, more than {what}; {fewer}, {fix}",
            crate::words::bytes(need)
        ))
    }
}

/// The most flows open at once, by a fluid model: each host link sends (and receives) its flows'
/// frames one after another at line rate, so a flow is open at least from its start until both
/// its links have carried it; a flow without a size stays open. Flows are in start order. Real
/// flows finish later still (round trips, queues), so this errs low where flows are spread out,
/// and is exact where a link is overloaded and nearly every flow waits.
fn most_open(flows: &[FlowSpec], host_rates: &[Rate], tcp: &TcpConfig) -> u64 {
    let mut busy = vec![(Time::ZERO, Time::ZERO); host_rates.len()];
    let mut changes: Vec<(Time, i64)> = Vec::with_capacity(2 * flows.len());
    for f in flows {
        changes.push((f.start, 1));
        let Some(size) = f.size else { continue };
        let wire = tcp.wire_bytes_at(size, tcp.mss());
        let mut through = |host: usize, sending: bool| {
            let rate = host_rates[host];
            let link = if sending { &mut busy[host].0 } else { &mut busy[host].1 };
            *link = (*link).max(f.start) + rate.tx_time(wire);
            *link
        };
        let done = through(f.src, true).max(through(f.dst, false));
        changes.push((done, -1));
    }
    // A flow that finishes as another starts is not open with it.
    changes.sort_unstable();
    let (mut open, mut most) = (0i64, 0i64);
    for (_, d) in changes {
        open += d;
        most = most.max(open);
    }
    most as u64
}

/// The memory this process may use, and what sets it: the least of the machine's memory, its
/// control group's `memory.max` (and its ancestors'), and its address-space and data-size limits
/// (`ulimit -v`, `ulimit -d`). `None` where none of these can be read.
fn machine_memory() -> Option<(u64, &'static str)> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let mut found: Vec<(u64, &'static str)> = Vec::new();
    if let Some(kb) = read("/proc/meminfo").and_then(|m| field(&m, "MemTotal:")) {
        found.push((kb.saturating_mul(1024), "the machine's memory"));
    }
    if let Some(mut group) =
        read("/proc/self/cgroup").and_then(|c| c.lines().find_map(|l| l.strip_prefix("0::").map(String::from)))
    {
        loop {
            let max = read(&format!("/sys/fs/cgroup{}/memory.max", group.trim_end_matches('/')));
            if let Some(bytes) = max.and_then(|m| m.trim().parse().ok()) {
                found.push((bytes, "its control group's memory.max"));
            }
            match group.rsplit_once('/') {
                Some((up, _)) if !group.is_empty() && group != "/" => group = up.to_string(),
                _ => break,
            }
        }
    }
    if let Some(limits) = read("/proc/self/limits") {
        for (name, why) in [
            ("Max address space", "its address-space limit, ulimit -v"),
            ("Max data size", "its data-size limit, ulimit -d"),
        ] {
            if let Some(bytes) = field(&limits, name) {
                found.push((bytes, why));
            }
        }
    }
    found.into_iter().min_by_key(|&(bytes, _)| bytes)
}

/// The first number after `name` on its line of a /proc table (`MemTotal:  16318464 kB`,
/// `Max address space  4294967296  unlimited  bytes`); none for "unlimited".
fn field(table: &str, name: &str) -> Option<u64> {
    table.lines().find_map(|l| l.strip_prefix(name))?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: usize, dst: usize, size: Option<u64>, start_us: u64) -> FlowSpec {
        FlowSpec {
            src,
            dst,
            size,
            start: Time::from_us(start_us),
            class: 0,
            qos: Default::default(),
            response: None,
            relay: None,
        }
    }

    #[test]
    fn open_flows_follow_the_links_that_carry_them() {
        let tcp = TcpConfig::default();
        let rates = [Rate::gbps(10); 4];
        // 1,448 payload bytes make one 1,538-byte frame: 1.2304 us at 10 Gb/s.
        let apart: Vec<FlowSpec> = (0..10).map(|i| flow(0, 1, Some(1448), 2 * i)).collect();
        assert_eq!(most_open(&apart, &rates, &tcp), 1, "each is carried before the next starts");
        let together: Vec<FlowSpec> = (0..10).map(|_| flow(0, 1, Some(1448), 0)).collect();
        assert_eq!(most_open(&together, &rates, &tcp), 10);
        // Three senders into one receiver: its link carries one frame per 1.23 us, so flows
        // starting every 1 us from different hosts pile up there.
        let incast: Vec<FlowSpec> = (0..30).map(|i| flow(1 + (i as usize % 3), 0, Some(1448), i)).collect();
        let open = most_open(&incast, &rates, &tcp);
        assert!((6..=8).contains(&open), "30 flows of 1.23 us each at one per us leave 30 x 0.23 = 7 waiting: {open}");
        let endless = [flow(0, 1, None, 0), flow(2, 3, Some(1448), 5)];
        assert_eq!(most_open(&endless, &rates, &tcp), 2, "a flow without a size stays open");
    }

    #[test]
    fn proc_tables_are_read_by_field() {
        let meminfo = "MemTotal:       16318464 kB\nMemFree:         1234 kB\n";
        assert_eq!(field(meminfo, "MemTotal:"), Some(16_318_464));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max data size             unlimited            unlimited            bytes\n\
                      Max address space         4294967296           unlimited            bytes\n";
        assert_eq!(field(limits, "Max address space"), Some(4_294_967_296));
        assert_eq!(field(limits, "Max data size"), None, "unlimited");
    }
}
