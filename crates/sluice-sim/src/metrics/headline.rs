//! The headline a run prints under its performance line: first the figures of the mechanisms the
//! scenario exercises (negotiation fallbacks, circuits, PFC, TLT, TCP-INT, host CPU, NIC offload),
//! each on a line named after it, then the traffic: requests, sized flows with their FCTs,
//! persistent connections and endless flows with their goodput, per class when several classes
//! carry traffic. Everything comes from the summary, so the headline never says what
//! summary.json does not.

use super::summary::{ClassSummary, FlowCounts, RequestCounts, Summary};
use super::Stats;

/// `x` to three significant digits with a decimal SI prefix and `unit`: "1.34 k/s", "36.8 Gb/s".
pub fn si(x: f64, unit: &str) -> String {
    let prefixes = ["", "k", "M", "G", "T", "P"];
    let mut v = x;
    let mut i = 0;
    while v.abs() >= 999.5 && i + 1 < prefixes.len() {
        v /= 1000.0;
        i += 1;
    }
    let digits = match v.abs() {
        a if a >= 99.95 || a == 0.0 => 0,
        a if a >= 9.995 => 1,
        _ => 2,
    };
    // Without a prefix, a rate reads "347/s" and a size "512 B".
    let sep = if prefixes[i].is_empty() && unit.starts_with('/') { "" } else { " " };
    // Byte sizes follow the scenarios' and the report's spelling: KB, MB, GB.
    let prefix = if i == 1 && unit == "B" { "K" } else { prefixes[i] };
    format!("{v:.digits$}{sep}{prefix}{unit}")
}

/// A time given in ns, in ns, us, ms or s as its size calls for.
pub fn time(ns: f64) -> String {
    match ns {
        x if x < 1e3 => format!("{x:.0} ns"),
        x if x < 1e6 => format!("{:.1} us", x / 1e3),
        x if x < 1e9 => format!("{:.2} ms", x / 1e6),
        x => format!("{:.2} s", x / 1e9),
    }
}

/// A fraction as a percentage.
fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// "1 flow", "3 flows".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A Chakra trace's line: its ranks, nodes and messages, and when its ranks were done.
fn chakra_line(c: &super::chakra::ChakraFigures) -> String {
    let n = &c.nodes;
    let kinds = [(n.compute, "compute"), (n.memory, "memory"), (n.collective, "collective"), (n.send, "send"), (n.recv, "recv"), (n.other, "other")];
    let kinds: Vec<String> = kinds.iter().filter(|(k, _)| *k > 0).map(|(k, what)| format!("{k} {what}")).collect();
    let done = match (c.time_ns, c.first_rank_ns) {
        (Some(t), Some(f)) => format!("all {} ranks done in {} (first {})", c.ranks, time(t), time(f)),
        _ => format!("{} of {} ranks done", c.ranks_done, c.ranks),
    };
    format!(
        "chakra {}: {} over {} ranks, {} nodes ({}), {}, {}: {done}",
        c.workload,
        c.file,
        c.ranks,
        n.compute + n.memory + n.collective + n.send + n.recv + n.other,
        kinds.join(", "),
        count(c.collectives, "collective", "collectives"),
        count(c.messages, "message", "messages"),
    )
}

/// The headline's lines for a run's summary.
pub fn headline(s: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, c) in &s.classes {
        if c.fallbacks.flows > 0 {
            let ran: Vec<&str> = c.fallbacks.cc.keys().copied().collect();
            let why: Vec<String> =
                c.fallbacks.reasons.iter().filter(|(_, n)| **n > 0).map(|(r, n)| format!("{r} {n}")).collect();
            lines.push(format!(
                "negotiation: class {name} asks for {}, but {} of its {} flows ran {} ({})",
                c.cc,
                c.fallbacks.flows,
                c.flows.total,
                ran.join(", "),
                why.join(", ")
            ));
        }
    }
    if let Some(c) = &s.circuit {
        let util = match c.utilization {
            Some(u) => format!("utilization {} over {}", pct(u), count(c.days, "day", "days")),
            None => "utilization n/a (no whole day of a pair with data)".into(),
        };
        let lat = c.latency_ns.defined().map_or("n/a".into(), |l| format!("mean {}, p99 {}", time(l.mean), time(l.p99)));
        lines.push(format!(
            "circuit: {util}; {} through circuits; ToR latency {lat}; VOQ drops {}",
            si(c.circuit_bytes as f64, "B"),
            c.voq_drops
        ));
    }
    if let Some(p) = &s.pfc {
        lines.push(if p.pauses == 0 {
            "PFC: no pauses".into()
        } else {
            format!(
                "PFC: {} pauses from {}; {} paused ({} host NICs), the longest for {}",
                p.pauses,
                count(p.ports_pausing, "port", "ports"),
                count(p.ports_paused, "port", "ports"),
                p.host_ports_paused,
                time(p.paused_ns_max)
            )
        });
    }
    if let Some(t) = &s.tlt {
        lines.push(format!(
            "TLT: {} important packets, {} echoes, {} proactive retransmissions, {} colour drops",
            t.counts.important_packets, t.counts.echoes, t.counts.proactive_retransmissions, t.colour_drops
        ));
    }
    if let Some(t) = &s.trimming {
        lines.push(format!(
            "trimming: {} packets cut to headers as they arrived, {} queued ones cut to make room; {} headers dropped at a full header queue, {} discarded by receivers that take none",
            t.trimmed, t.evicted, t.header_drops, t.headers_discarded
        ));
    }
    if let Some(u) = &s.uet {
        let mut line = format!(
            "UET: {} new packets, {} resent; {} ACKs, {} NACKs ({} for packets already acknowledged or queued); {} spurious arrivals",
            u.new, u.rtx, u.acks, u.nacks, u.nacks_ignored, u.spurious
        );
        if u.pulls > 0 || u.rts > 0 {
            line += &format!("; {} PULLs, {} RTSs", u.pulls, u.rts);
        }
        lines.push(line);
    }
    if let Some(t) = &s.telemetry {
        let mut parts = vec![format!("TCP-INT: {} echoes", t.echoes)];
        if let Some(l) = t.fields.get("path_latency_ns").filter(|h| h.count > 0) {
            parts.push(format!("path latency p50 {}, p99 {}", time(l.p50 as f64), time(l.p99 as f64)));
        }
        if let Some(q) = t.fields.get("qdepth_bytes").filter(|h| h.count > 0) {
            parts.push(format!("queue p50 {}, p99 {}", si(q.p50 as f64, "B"), si(q.p99 as f64, "B")));
        }
        if let Some(u) = t.fields.get("util_permille").filter(|h| h.count > 0) {
            parts.push(format!("utilization p50 {}, p99 {}", pct(u.p50 as f64 / 1e3), pct(u.p99 as f64 / 1e3)));
        }
        lines.push(parts.join("; "));
    }
    if let Some(c) = &s.cpu {
        let mut top: Vec<(&str, f64)> = c.breakdown.iter().map(|(k, v)| (*k, *v)).filter(|(_, v)| *v > 0.0).collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = top.iter().take(3).map(|(k, v)| format!("{k} {:.0}%", v * 100.0)).collect();
        let per_request = c.cycles_per_request.map_or(String::new(), |n| format!(", {n:.0} cycles per request"));
        lines.push(format!(
            "CPU: {} {} busy (busiest {}){per_request}; {}",
            count(c.cores, "core", "cores"),
            pct(c.utilization),
            pct(c.max_utilization),
            top.join(", ")
        ));
    }
    if let Some(o) = &s.offload {
        lines.push(format!(
            "offload: {} SYN cookies, {} teardowns, {} connection pairs spliced on the NIC; {} left to the host (table full)",
            o.syn_cookies, o.teardowns, o.spliced, o.fallbacks
        ));
    }
    if let Some(c) = &s.collectives {
        for k in &c.collectives {
            let figures = match (k.mean_time_ns, k.algbw, k.busbw) {
                (Some(t), Some(a), Some(b)) => format!("mean {}, algbw {a:.2} GB/s, busbw {b:.2} GB/s", time(t)),
                _ => "none finished".to_string(),
            };
            lines.push(format!(
                "collective {}: {} by {} over {} ranks, {}: {} of {} iterations, {figures}",
                k.workload,
                k.op,
                k.algorithm,
                k.ranks,
                si(k.size_bytes as f64, "B"),
                k.completed,
                k.iterations
            ));
        }
        let hot: Vec<String> = c.hottest_links.iter().map(|l| format!("{} {}", l.link, pct(l.utilization))).collect();
        if !hot.is_empty() {
            lines.push(format!("hottest links: {}", hot.join(", ")));
        }
    }
    for c in s.chakra.iter().flatten() {
        lines.push(chakra_line(c));
    }
    if let Some(w) = &s.waiting {
        lines.push(format!("waiting: {} never started (summary.json: waiting)", count(w.len() as u64, "flow", "flows")));
    }
    let busy: Vec<(&String, &ClassSummary)> =
        s.classes.iter().filter(|(_, c)| c.flows.total > 0 || c.requests.is_some()).collect();
    let network = network(s);
    if busy.len() > 1 {
        for (name, c) in busy {
            let t = traffic(&c.flows, &c.fct_ns, &c.slowdown, c.requests.as_ref(), c.request_latency_ns.as_ref(), c.goodput_bps);
            lines.push(format!("class {name} ({}): {}", c.cc, t.join("; ")));
        }
        lines.push(network.join("; "));
    } else {
        let goodput = s.classes.values().map(|c| c.goodput_bps).sum();
        let mut t = traffic(&s.flows, &s.fct_ns, &s.slowdown, s.requests.as_ref(), s.request_latency_ns.as_ref(), goodput);
        t.extend(network);
        lines.push(t.join("; "));
    }
    lines
}

/// The traffic of the whole run or of one class: requests, sized flows, connections, goodput.
fn traffic(
    flows: &FlowCounts,
    fct: &Stats,
    slowdown: &Stats,
    requests: Option<&RequestCounts>,
    latency: Option<&Stats>,
    goodput_bps: f64,
) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(r) = requests {
        let lat = latency.and_then(Stats::defined).map_or("n/a".into(), |l| format!("mean {}, p99 {}", time(l.mean), time(l.p99)));
        parts.push(format!("requests {} ({}); latency {lat}", r.completed, si(r.per_s, "/s")));
    }
    let started = flows.completed + flows.unfinished;
    if started + flows.not_started > 0 {
        let later = if flows.not_started > 0 { format!(" ({} not started)", flows.not_started) } else { String::new() };
        let (f, sd) = (fct.defined(), slowdown.defined());
        parts.push(format!(
            "flows {}/{started} completed{later}; FCT mean {}, p99 {}; slowdown p50 {}, p99 {}",
            flows.completed,
            f.map_or("n/a".into(), |s| time(s.mean)),
            f.map_or("n/a".into(), |s| time(s.p99)),
            sd.map_or("n/a".into(), |s| format!("{:.2}", s.p50)),
            sd.map_or("n/a".into(), |s| format!("{:.2}", s.p99)),
        ));
    }
    let mut long = Vec::new();
    if flows.persistent > 0 {
        long.push(count(flows.persistent, "persistent connection", "persistent connections"));
    }
    if flows.endless > 0 {
        long.push(count(flows.endless, "endless flow", "endless flows"));
    }
    if !long.is_empty() {
        parts.push(format!("{}, goodput {}", long.join(" and "), si(goodput_bps, "b/s")));
    }
    parts
}

/// What the network did: drops, marks, timeouts, and with endless flows how busy it got.
fn network(s: &Summary) -> Vec<String> {
    let mut parts = vec![format!("drops {}, ECN marks {}, timeouts {}", s.drops, s.ecn_marks, s.timeouts)];
    if let Some(d) = &s.deadlines {
        parts.push(format!("deadlines met {} of {}", d.met, d.met + d.missed));
    }
    if s.flows.endless > 0 {
        // Long-lived flows are there to fill links: how full the busiest got is their figure.
        parts.push(format!("busiest switch port {} utilized", pct(s.utilization.max)));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_sizes_and_times_read_at_their_scale() {
        assert_eq!(si(1337.18, "/s"), "1.34 k/s");
        assert_eq!(si(347.0, "/s"), "347/s");
        assert_eq!(si(0.5, "/s"), "0.50/s");
        assert_eq!(si(13_138_200.0, "/s"), "13.1 M/s");
        assert_eq!(si(36_823_277_120.0, "b/s"), "36.8 Gb/s");
        assert_eq!(si(999.7, "B"), "1.00 KB");
        assert_eq!(si(32_799.0, "B"), "32.8 KB");
        assert_eq!(si(0.0, "b/s"), "0 b/s");
        assert_eq!(time(339.0), "339 ns");
        assert_eq!(time(523_812.0), "523.8 us");
        assert_eq!(time(22_691_600.0), "22.69 ms");
        assert_eq!(time(2.5e9), "2.50 s");
    }
}
