//! `kind = "flows"`: an explicit list of flows and receives. A flow may wait for others of the
//! list (`after`, by name) and start a compute delay after the last is done; a receive
//! (`receive = true`) is done when the flow it matches (same hosts and `tag`, in list order)
//! arrives, so a flow may wait for a receive. Everything that would leave a flow waiting forever
//! is refused here, at its entry: a name that names nothing, a receive nothing sends, and flows
//! that wait for one another in a circle.

use super::{Classify, FlowEntry, FlowSpec, Qos};
use crate::flow::waits::{find_circle, Wait};
use std::collections::HashMap;

/// Checks a host ordinal, naming the key it came from.
pub type HostCheck<'a> = &'a dyn Fn(usize, String) -> Result<usize, String>;
/// Resolves a class name at a key.
pub type ClassOf<'a> = &'a dyn Fn(Option<&str>, &str) -> Result<usize, String>;

/// The flows of list `list` at key `key` (`workloads[i]`), and what each waits for (by index
/// into the flows).
pub fn listed_flows(
    list: &[FlowEntry],
    key: &str,
    host: HostCheck,
    class_of: ClassOf,
    class: &Classify,
    qos: Qos,
) -> Result<(Vec<FlowSpec>, Vec<Option<Wait>>), String> {
    let at = |i: usize| format!("{key}.flows[{i}]");
    let mut flows = Vec::new();
    // Each entry's flow (a receive's: its matched flow, filled in below).
    let mut flow_of = vec![usize::MAX; list.len()];
    let mut entry_of = Vec::new();
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, f) in list.iter().enumerate() {
        let at = at(i);
        let (src, dst) = (host(f.src, format!("{at}.src"))?, host(f.dst, format!("{at}.dst"))?);
        if src == dst {
            return Err(format!("{at}: src and dst are both host {src}; a flow needs two hosts"));
        }
        if let Some(name) = f.name.as_deref() {
            if let Some(&j) = names.get(name) {
                return Err(format!("{at}.name: \"{name}\" also names {key}.flows[{j}]; give each entry its own name"));
            }
            names.insert(name, i);
        }
        if f.receive {
            let done = format!("a receive is done when the flow from host {src} with its tag arrives");
            if f.size.is_some() {
                return Err(format!("{at}.size: {done}, so it takes no size"));
            }
            if f.after.is_some() || f.compute.is_some() {
                let k = if f.after.is_some() { "after" } else { "compute" };
                return Err(format!("{at}.{k}: {done}; make the flow it matches wait instead"));
            }
            if f.class.is_some() {
                return Err(format!("{at}.class: {done}; the flow it matches has the class"));
            }
            if f.tag.is_none() {
                return Err(format!("{at}.tag: required for a receive: the tag of the flow from host {src} it matches"));
            }
            continue;
        }
        let size = match f.size {
            Some(s) if s.0 > 0 => s.0,
            Some(_) => return Err(format!("{at}.size: expected a positive size like \"1MB\"")),
            None => return Err(format!("{at}.size: required for a flow (a positive size like \"1MB\"); only a receive has none")),
        };
        if f.compute.is_some() && f.after.as_ref().is_none_or(Vec::is_empty) {
            return Err(format!("{at}.compute: a compute delay follows what the flow waits for; give after = [\"<name>\", ..] too"));
        }
        let class = match &f.class {
            Some(c) => class_of(Some(c), &at)?,
            None => class(src, dst),
        };
        flow_of[i] = flows.len();
        entry_of.push(i);
        flows.push(FlowSpec { src, dst, size: Some(size), start: f.start, class, qos, response: None, relay: None });
    }
    // Receives match the flows with their hosts and tag in list order, one each.
    let mut matched = vec![false; list.len()];
    for (i, r) in list.iter().enumerate().filter(|(_, e)| e.receive) {
        let sends = |e: &FlowEntry| !e.receive && (e.src, e.dst, e.tag) == (r.src, r.dst, r.tag);
        let Some(j) = (0..list.len()).find(|&j| !matched[j] && sends(&list[j])) else {
            let tag = r.tag.unwrap_or_default();
            let all = list.iter().filter(|e| sends(e)).count();
            let why = match all {
                0 => "no flow of this workload sends it".to_string(),
                n => format!("the {} with these hosts and tag already match{} earlier receives", crate::words::count(n as u64, "flow", "flows"), if n == 1 { "es" } else { "" }),
            };
            return Err(format!(
                "{}: a receive at host {} of tag {tag} from host {}, but {why}; it would wait forever (add a flow {{ src = {}, dst = {}, size = \"..\", tag = {tag} }})",
                at(i), r.dst, r.src, r.src, r.dst
            ));
        };
        matched[j] = true;
        flow_of[i] = flow_of[j];
    }
    let mut waits: Vec<Option<Wait>> = vec![None; flows.len()];
    let mut after_of: Vec<Vec<usize>> = vec![Vec::new(); flows.len()];
    for (i, f) in list.iter().enumerate() {
        let Some(after) = f.after.as_ref().filter(|a| !a.is_empty()) else { continue };
        let mut deps = Vec::with_capacity(after.len());
        for (k, name) in after.iter().enumerate() {
            let Some(&j) = names.get(name.as_str()) else {
                let mut known: Vec<&str> = names.keys().copied().collect();
                known.sort_unstable();
                let known = match known.len() {
                    0 => "no entry has a name".to_string(),
                    n if n <= 8 => format!("names: {}", known.join(", ")),
                    n => format!("names: {}, and {} more", known[..8].join(", "), n - 8),
                };
                return Err(format!("{}.after[{k}]: no flow or receive of this workload is named \"{name}\" ({known})", at(i)));
            };
            deps.push(flow_of[j]);
        }
        after_of[flow_of[i]] = deps.clone();
        waits[flow_of[i]] = Some(Wait { after: deps, compute: f.compute.unwrap_or_default(), delays: Vec::new() });
    }
    if let Some(circle) = find_circle(&after_of) {
        let entry = |f: usize| {
            let i = entry_of[f];
            match list[i].name.as_deref() {
                Some(n) => format!("flows[{i}] (\"{n}\")"),
                None => format!("flows[{i}]"),
            }
        };
        let chain: Vec<String> = circle.iter().chain(circle.first()).map(|&f| entry(f)).collect();
        return Err(format!(
            "{}.after: flows wait for one another in a circle, so none of them can start: {}",
            at(entry_of[circle[0]]),
            chain.join(" waits for ")
        ));
    }
    if waits.iter().all(Option::is_none) {
        // Nothing waits: the run has no graph to keep.
        waits.clear();
    }
    Ok((flows, waits))
}
