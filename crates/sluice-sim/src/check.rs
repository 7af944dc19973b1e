//! Every problem of a scenario in one pass, as `sluice check` reports them, and the memory a run's
//! flows and samples will take.
//!
//! Parsing and validation stop at the first problem, which names its key path. To find the next,
//! the check edits the scenario past it and reads it again, until it reads clean or a problem
//! cannot be read past. A value that is a near miss is corrected ("dctpc" to "dctcp", so that the
//! class's parameters are still checked against the algorithm meant); any other key is set aside
//! (removed, so its default applies). A problem that only an edit caused (a required key now
//! missing, a mode left without its threshold) is not the user's: that edit widens instead, from
//! a correction to a removal, then to the table around the key. The check stops at a problem
//! without a key path, one whose key is a list entry (removing it would renumber the entries
//! after it), or one no edit clears.

use crate::scenario::{self, LoadedScenario, ScenarioError};
use crate::time::{Rate, Time};
use crate::transport::tcp::TcpConfig;
use crate::workload::FlowSpec;
use crate::world::World;
use std::path::Path;

/// At most this many problems are listed; a file with more is better fixed a screenful at a time.
const MAX_PROBLEMS: usize = 20;

/// A scenario that checked clean: what it builds, and about how much memory its flows and samples
/// take in a run.
pub struct Checked {
    /// The scenario as read, overrides applied.
    pub loaded: LoadedScenario,
    /// The world it builds.
    pub world: World,
    /// Bytes its flows and samples take in a run, at the peak ([`Footprint::bytes`]).
    pub memory: u64,
}

/// Reads `path` with `overrides` and builds its world, or lists every problem found on the way.
pub fn check(path: &Path, overrides: &[String]) -> Result<Checked, Vec<ScenarioError>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ScenarioError { file: file.clone(), line: None, message: format!("cannot read the scenario: {e}") }]
    })?;
    check_text(&text, &file, path.parent().unwrap_or(Path::new("")), overrides)
}

/// [`check`] of scenario text; `file` names it in errors and relative paths resolve in `base_dir`.
pub fn check_text(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
) -> Result<Checked, Vec<ScenarioError>> {
    let mut problems: Vec<ScenarioError> = Vec::new();
    let mut edits: Vec<Edit> = Vec::new();
    // Each round lists a problem or widens an edit, so this bound is never the reason to stop.
    for _ in 0..4 * MAX_PROBLEMS {
        let found = scenario::parse_edited(text, file, base_dir, overrides, &edits).and_then(|loaded| {
            let (world, footprint) = scenario::build_measured(&loaded).map_err(|m| loaded.error_at(m))?;
            Ok(Checked { loaded, world, memory: footprint.bytes() })
        });
        let problem = match found {
            Ok(checked) if problems.is_empty() => return Ok(checked),
            Ok(_) => return Err(problems),
            Err(problem) => problem,
        };
        if problems.contains(&problem) {
            return Err(problems); // no edit cleared it
        }
        if let Some(i) = caused_by(&problem.message, &edits) {
            match edits[i].widened() {
                Some(wider) => edits[i] = wider,
                None => return Err(problems),
            }
            continue;
        }
        let edit =
            key_of(&problem.message).filter(|k| !k.ends_with(']') && !edits.iter().any(|e| e.key() == k)).map(|key| {
                match suggestion(&problem.message) {
                    Some(to) => Edit::Correct { key, to },
                    None => Edit::Remove(key),
                }
            });
        problems.push(problem);
        match edit {
            Some(edit) if problems.len() < MAX_PROBLEMS => edits.push(edit),
            _ => return Err(problems),
        }
    }
    Err(problems)
}

/// How the check reads on past a problem.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Edit {
    /// The key is removed, so its default applies.
    Remove(String),
    /// The key's text value becomes `to`, the near miss it most likely meant; a key whose value
    /// is not a near miss of `to` (an unknown key, whose name was the miss) is removed.
    Correct { key: String, to: String },
}

impl Edit {
    /// The key path the edit is at.
    fn key(&self) -> &str {
        match self {
            Edit::Remove(key) | Edit::Correct { key, .. } => key,
        }
    }

    /// The next edit to try when this one caused a problem of its own: a correction becomes a
    /// removal; a removal, the removal of the table around the key. `None` at the top level or
    /// in a list entry.
    fn widened(&self) -> Option<Edit> {
        match self {
            Edit::Correct { key, .. } => Some(Edit::Remove(key.clone())),
            Edit::Remove(key) => {
                let (table, _) = key.rsplit_once('.')?;
                (!table.ends_with(']')).then(|| Edit::Remove(table.to_string()))
            }
        }
    }

    /// Makes the edit in a scenario document; false when the key is not there.
    pub(crate) fn apply(&self, doc: &mut toml_edit::DocumentMut) -> bool {
        let Some((table, last)) = parent(doc, self.key()) else { return false };
        if let Edit::Correct { to, .. } = self {
            let value = table.get(&last).and_then(|item| item.as_str());
            if value.is_some_and(|v| crate::words::near_miss(v, [to.as_str()]).is_some()) {
                table.insert(&last, toml_edit::value(to.as_str()));
                return true;
            }
        }
        table.remove(&last).is_some()
    }
}

/// The key path a problem's message starts with (`switch.ecn.k: ...`), or the key of the
/// override it cites (`--set classes.q.cc=x: ...`).
fn key_of(message: &str) -> Option<String> {
    let key = match message.strip_prefix("--set ") {
        Some(o) => o.split_once('=')?.0.trim(),
        None => message.split_once(": ")?.0,
    };
    let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.[]".contains(c));
    is_key.then(|| key.to_string())
}

/// The near miss a problem's message suggests ("...; did you mean `dctcp`?").
fn suggestion(message: &str) -> Option<String> {
    let rest = message.rsplit_once("did you mean `")?.1;
    Some(rest.split_once('`')?.0.to_string())
}

/// The edit a problem follows from, if it is no problem of the user's: a required key that an
/// edit removed is now missing (`classes.default: missing field `cc``, after
/// `classes.default.cc` was removed), or the problem is at a key an edit changed or inside it
/// (`switch.ecn.k: required for mode = "step"`, after `switch.ecn.k` was removed).
fn caused_by(message: &str, edits: &[Edit]) -> Option<usize> {
    let at = |key: &str| {
        edits.iter().position(|e| {
            let k = e.key();
            key == k || key.strip_prefix(k).is_some_and(|rest| rest.starts_with(['.', '[']))
        })
    };
    // Past the override an error cites, its own key path: `--set switch.ecn.mode=step: switch.ecn.k: ...`.
    let message = match message.strip_prefix("--set ") {
        Some(rest) => rest.split_once(": ").map_or(message, |(_, m)| m),
        None => message,
    };
    if let Some((table, rest)) = message.split_once("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        return match key_of(&format!("{}: ", table.trim_end_matches(": "))) {
            Some(table) => at(&format!("{table}.{field}")),
            None => at(field),
        };
    }
    at(&key_of(message)?)
}

/// The table holding the item at a key path like `workloads[1].size`, and the item's name; none
/// when a step is missing or the path ends in a list entry.
fn parent<'d>(doc: &'d mut toml_edit::DocumentMut, key: &str) -> Option<(&'d mut dyn toml_edit::TableLike, String)> {
    let mut steps = Vec::new();
    for part in key.split('.') {
        let mut pieces = part.split('[');
        steps.push(Step::Key(pieces.next().unwrap_or_default()));
        for index in pieces {
            steps.push(Step::Index(index.strip_suffix(']').and_then(|i| i.parse().ok())?));
        }
    }
    let (Step::Key(last), path) = steps.split_last()? else { return None };
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut at = path.iter().peekable();
    while let Some(step) = at.next() {
        let Step::Key(k) = step else { return None };
        let item = table.get_mut(k)?;
        table = match at.peek() {
            Some(Step::Index(i)) => {
                at.next();
                match item {
                    toml_edit::Item::ArrayOfTables(a) => a.get_mut(*i)?,
                    toml_edit::Item::Value(toml_edit::Value::Array(a)) => a.get_mut(*i)?.as_inline_table_mut()?,
                    _ => return None,
                }
            }
            _ => item.as_table_like_mut()?,
        };
    }
    Some((table, last.to_string()))
}

/// One step of a key path.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

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
/// The program, its tables and the network's elements before any flow.
const BASE_BYTES: u64 = 8_000_000;

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
}

impl Footprint {
    /// Bytes a run's flows and samples take at the peak, with the program's own, about; packets
    /// queued in the network come on top.
    pub fn bytes(&self) -> u64 {
        BASE_BYTES + self.flows.0 + self.samples.0 + self.captured
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
        }
    }

    /// Refuses a footprint above `limit` (`limits.memory`) or, without one, above what this
    /// process may use, naming the key of its largest term.
    /// How many runs of this size fit in `limit` (or what this process may use), if it is known:
    /// each thread of a run holds a replica of the world.
    pub(crate) fn fit(&self, limit: Option<u64>) -> Option<u64> {
        let cap = limit.or_else(|| machine_memory().map(|(m, _)| m))?;
        Some(cap / self.bytes().max(1))
    }

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

    #[test]
    fn keys_are_read_from_messages_and_overrides() {
        assert_eq!(key_of("switch.ecn.k: expected a size").as_deref(), Some("switch.ecn.k"));
        assert_eq!(key_of("workloads[2].size: expected a size").as_deref(), Some("workloads[2].size"));
        assert_eq!(key_of("--set sim.seed=x: sim.seed: expected").as_deref(), Some("sim.seed"));
        assert_eq!(key_of("not valid TOML: expected `=`"), None);
        assert_eq!(key_of("cannot read the scenario: No such file"), None);
        assert_eq!(
            suggestion("classes.q.cc: unknown congestion control \"dctpc\"; expected one of: x; did you mean `dctcp`?")
                .as_deref(),
            Some("dctcp")
        );
        assert_eq!(suggestion("classes.q.cc: unknown congestion control \"zz\"; expected one of: x"), None);
    }

    #[test]
    fn a_problem_an_edit_caused_is_not_a_second_problem() {
        let edits = [Edit::Remove("classes.default.cc".into()), Edit::Remove("switch.ecn.k".into())];
        assert_eq!(caused_by("classes.default: missing field `cc`", &edits), Some(0));
        assert_eq!(caused_by("classes.bulk: missing field `cc`", &edits), None);
        assert_eq!(caused_by("classes.default.cc: unknown congestion control", &edits), Some(0));
        assert_eq!(caused_by("switch.ecn.k: required for mode = \"step\"", &edits), Some(1));
        assert_eq!(caused_by("--set switch.ecn.mode=step: switch.ecn.k: required", &edits), Some(1));
        assert_eq!(caused_by("switch.ecn.kmin: not used by mode = \"step\"", &edits), None);
        assert_eq!(caused_by("missing field `topology`", &[Edit::Remove("topology".into())]), Some(0));
        // A removal widens to its table, a correction to a removal, the top level to nothing.
        assert_eq!(edits[1].widened(), Some(Edit::Remove("switch.ecn".into())));
        let fix = Edit::Correct { key: "classes.q.cc".into(), to: "dctcp".into() };
        assert_eq!(fix.widened(), Some(Edit::Remove("classes.q.cc".into())));
        assert_eq!(Edit::Remove("sim".into()).widened(), None);
        assert_eq!(Edit::Remove("workloads[0].flows[0].dst".into()).widened(), None, "a list entry stays");
    }

    #[test]
    fn edits_reach_into_lists_of_tables_and_inline_tables() {
        let mut doc: toml_edit::DocumentMut =
            "[switch]\nalpha = 1\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1 }]\n".parse().unwrap();
        assert!(Edit::Remove("switch.alpha".into()).apply(&mut doc));
        assert!(Edit::Remove("workloads[0].flows[0].dst".into()).apply(&mut doc));
        assert!(
            !Edit::Remove("workloads[0].flows[0]".into()).apply(&mut doc),
            "a list entry stays: removing it renumbers the rest"
        );
        assert!(!Edit::Remove("workloads[3].kind".into()).apply(&mut doc));
        assert!(!Edit::Remove("switch.alpha".into()).apply(&mut doc), "already gone");
        assert_eq!(doc.to_string(), "[switch]\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0}]\n");
    }

    #[test]
    fn a_correction_changes_a_near_miss_and_removes_anything_else() {
        let mut doc: toml_edit::DocumentMut =
            "[classes.q]\ncc = \"dctpc\"\n[switch]\nbufer = \"1MB\"\n".parse().unwrap();
        assert!(Edit::Correct { key: "classes.q.cc".into(), to: "dctcp".into() }.apply(&mut doc));
        // The miss was the key's name, not its value: the key goes.
        assert!(Edit::Correct { key: "switch.bufer".into(), to: "buffer".into() }.apply(&mut doc));
        let t: toml::Table = doc.to_string().parse().unwrap();
        assert_eq!(t["classes"]["q"]["cc"].as_str(), Some("dctcp"));
        assert!(t["switch"].as_table().unwrap().is_empty(), "{t}");
    }

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
