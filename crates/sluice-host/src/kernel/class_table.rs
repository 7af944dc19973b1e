//! The agent's class table in the kernel: a plan's slots and intents (`sluice_platform::plan`)
//! as `struct sluice_class` and `struct sluice_intent_rule` (bpf/tcp_int.h), written to the half
//! of the pinned table not in use and put in force with one write of the generation; and the
//! per-class and per-intent counters. It writes what the plan says and decides nothing.

use crate::kernel::pins::{open_pinned, percpu_range_sums};
use crate::kernel::struct_ops;
use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};
use sluice_platform::applied::ClassCounts;
use sluice_platform::plan::{IntentRule, Plan, Slot, SLOTS};
use sluice_sim::cc::negotiation::Negotiation;
use sluice_sim::scenario::classes::INTENTS;

/// Counters per class id (`CLASS_NCOUNTERS`): opened, closed, algorithm refused, clients per
/// negotiation outcome (`Negotiation::ALL`'s order), malformed answers.
const NCOUNTERS: u32 = 3 + Negotiation::ALL.len() as u32 + 1;
/// Size of `struct sluice_class`.
const SLOT_BYTES: usize = 128;
/// Size of `struct scc_class_params`: the algorithm's id, padding, 56 bytes of parameters.
const PARAMS_BYTES: usize = 64;
/// Size of `struct sluice_intent_rule`.
const INTENT_RULE_BYTES: usize = 40;
/// Outcomes of a declaration (`enum intent_counter`), as status names them.
pub const INTENT_OUTCOMES: [&str; 4] = ["accepted", "not_permitted", "not_mapped", "late"];

/// `struct sluice_intent_rule` of an intent, or of one the policy does not map.
fn intent_bytes(r: Option<&IntentRule>) -> Vec<u8> {
    let mut b = vec![0u8; INTENT_RULE_BYTES];
    let Some(r) = r else { return b };
    b[0..4].copy_from_slice(&r.class_key.to_ne_bytes());
    b[4..8].copy_from_slice(&(r.cgroup_ids.len() as u32).to_ne_bytes());
    for (j, id) in r.cgroup_ids.iter().enumerate() {
        b[8 + 8 * j..16 + 8 * j].copy_from_slice(&id.to_ne_bytes());
    }
    b
}

/// `struct sluice_class` of a slot, or of an empty one.
fn slot_bytes(s: Option<&Slot>) -> Vec<u8> {
    let mut b = vec![0u8; SLOT_BYTES];
    let Some(s) = s else { return b };
    let name = s.class.cc.as_bytes();
    b[..name.len().min(15)].copy_from_slice(&name[..name.len().min(15)]);
    let mut put32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    put32(16, if s.intent_only { 2 } else { 1 });
    put32(20, s.class.id);
    put32(24, s.class.priority as u32);
    put32(28, s.ports.len() as u32);
    put32(32, s.cgroup_ids.len() as u32);
    for (j, (first, last)) in s.ports.iter().enumerate() {
        b[36 + 2 * j..38 + 2 * j].copy_from_slice(&first.to_ne_bytes());
        b[52 + 2 * j..54 + 2 * j].copy_from_slice(&last.to_ne_bytes());
    }
    for (j, id) in s.cgroup_ids.iter().enumerate() {
        b[72 + 8 * j..80 + 8 * j].copy_from_slice(&id.to_ne_bytes());
    }
    let fallback = s.class.fallback.as_bytes();
    b[104..104 + fallback.len().min(15)].copy_from_slice(&fallback[..fallback.len().min(15)]);
    b[120..124].copy_from_slice(&(s.offer as u32).to_ne_bytes());
    b
}

/// `struct scc_class_params` of a slot: a portable algorithm's id and C parameters, else zeros.
fn params_bytes(s: &Slot) -> Vec<u8> {
    let mut b = vec![0u8; PARAMS_BYTES];
    if let Some(p) = &s.params {
        let alg = struct_ops::ALGORITHMS.iter().position(|a| *a == s.class.cc).map_or(0, |i| i as u32 + 1);
        b[..4].copy_from_slice(&alg.to_ne_bytes());
        b[8..8 + p.len()].copy_from_slice(p);
    }
    b
}

/// Writes a plan: the slots go to the half of the table not in use, then the generation names
/// that half. Connections already open keep their algorithm. `new_ids` are the class ids whose
/// counters start from zero (new classes, also where an id served a class removed earlier).
/// Returns the generation now in force.
pub fn write(plan: &Plan, new_ids: &[u32]) -> Result<u32> {
    let table = open_pinned("sluice_classes")?;
    let gen_map = open_pinned("class_generation")?;
    let counters = open_pinned("class_counters")?;
    // Parameters first: a connection the new table puts in a class finds them in place. Open
    // connections of a class whose parameters changed read the new ones at their next ACK.
    let class_params = open_pinned("class_params")?;
    for s in &plan.slots {
        class_params.update(&s.class.id.to_ne_bytes(), &params_bytes(s), MapFlags::ANY)?;
    }
    let zero = 0u32.to_ne_bytes();
    let gen = gen_map.lookup(&zero, MapFlags::ANY)?.map_or(0, |v| u32::from_ne_bytes(v[..4].try_into().unwrap()));
    let next = gen.wrapping_add(1);
    let base = (next & 1) * SLOTS as u32;
    for i in 0..SLOTS {
        table.update(&(base + i as u32).to_ne_bytes(), &slot_bytes(plan.slots.get(i)), MapFlags::ANY)?;
    }
    let intent_table = open_pinned("sluice_intents")?;
    let intent_base = (next & 1) * INTENTS.len() as u32;
    for (i, r) in plan.intents.iter().enumerate() {
        intent_table.update(&(intent_base + i as u32).to_ne_bytes(), &intent_bytes(r.as_ref()), MapFlags::ANY)?;
    }
    let cpus = libbpf_rs::num_possible_cpus()?;
    for id in new_ids {
        for k in 0..NCOUNTERS {
            counters.update_percpu(&(id * NCOUNTERS + k).to_ne_bytes(), &vec![vec![0u8; 8]; cpus], MapFlags::ANY)?;
        }
    }
    gen_map.update(&zero, &next.to_ne_bytes(), MapFlags::ANY)?;
    Ok(next)
}

/// The counts of class `id`.
pub fn counts(id: u32) -> Result<ClassCounts> {
    let sums = percpu_range_sums(&open_pinned("class_counters")?, id * NCOUNTERS..(id + 1) * NCOUNTERS)?;
    let n = Negotiation::ALL.len();
    Ok(ClassCounts { opened: sums[0], closed: sums[1], cc_failed: sums[2], negotiated: sums[3..3 + n].try_into().unwrap(), malformed: sums[3 + n] })
}

/// Declarations of intent number `intent` (0: requests naming none) per outcome
/// (`INTENT_OUTCOMES`' order).
pub fn intent_counts(intent: u32) -> Result<[u64; 4]> {
    let n = INTENT_OUTCOMES.len() as u32;
    let sums = percpu_range_sums(&open_pinned("intent_counters")?, intent * n..(intent + 1) * n)?;
    Ok(sums.try_into().expect("one sum per outcome"))
}
