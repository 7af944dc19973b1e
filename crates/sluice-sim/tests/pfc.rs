//! Priority flow control (IEEE 802.1Qbb) on `scenarios/pfc_incast.toml`: a 16-to-1 incast on a
//! lossless priority drops nothing, its pauses spread upstream to the senders' NICs, the headroom
//! holds what is in flight after each PAUSE, and a victim flow that shares only the paused core
//! link is slowed (head-of-line blocking). Without PFC the same incast drops and TCP recovers.

mod common;
use common::run_file;
use sluice_sim::world::World;

fn run(pfc: bool) -> World {
    run_file("scenarios/pfc_incast.toml", &[&format!("pfc.enabled={pfc}")])
}

/// The global id of `node`'s port towards `peer`, by name ("sw0", "sw1").
fn port(world: &World, node: &str, peer: &str) -> usize {
    world
        .ports()
        .iter()
        .position(|p| world.node_name(p.node) == node && world.node_name(p.peer_node) == peer)
        .unwrap_or_else(|| panic!("no port {node}->{peer}"))
}

#[test]
fn a_lossless_incast_drops_nothing_and_its_pauses_spread_to_the_senders() {
    let world = run(true);
    let c = world.counters();
    assert_eq!(c.drops(), 0, "a lossless priority never drops");
    assert!(c.pfc_pauses > 100, "{} pauses", c.pfc_pauses);
    // sw1 pauses the core link; sw0, filling in turn, pauses every sender's NIC.
    let core = &world.ports()[port(&world, "sw0", "sw1")];
    assert!(core.pause.received(0) > 0 && core.pause.paused_time(0, world.now()).0 > 0);
    for h in 0..16 {
        let nic = &world.ports()[port(&world, &format!("h{h}"), "sw0")];
        assert!(nic.pause.received(0) > 0, "h{h} was never paused");
    }
    // Priorities no class uses are never paused.
    assert!(world.ports().iter().all(|p| (1..8).all(|prio| p.pause.received(prio) == 0)));
    for f in world.flows().iter().filter(|f| f.size.is_some()) {
        assert_eq!(f.retransmits(), 0, "flow {} lost nothing", f.id);
        assert!(f.finish.is_some(), "flow {} finished", f.id);
    }
}

#[test]
fn the_headroom_holds_what_arrives_after_each_pause() {
    let world = run(true);
    let mut used = 0;
    for sw in world.switches() {
        let pfc = sw.pfc.as_ref().expect("PFC on");
        for (local, (&peak, &room)) in pfc.headroom_peak.iter().zip(&pfc.cfg.headroom).enumerate() {
            let name = world.ports()[sw.first_port as usize + local].peer_node;
            assert!(peak <= room, "{}'s port from {}: {peak} bytes after its pause, headroom {room}", world.node_name(sw.node), world.node_name(name));
            used = used.max(peak);
        }
    }
    assert!(used > 0, "the incast must make some port pause");
}

#[test]
fn a_victim_sharing_only_the_paused_core_link_is_slowed() {
    // Head-of-line blocking: h16->h18 never crosses sw1->h17, yet its packets wait behind the
    // incast's at sw0's paused core port.
    let victim = |w: &World| w.flows()[16].bytes_delivered() as f64;
    let (with, without) = (victim(&run(true)), victim(&run(false)));
    assert!(with < 0.5 * without, "the victim delivered {with} bytes with PFC, {without} without");
}

#[test]
fn without_pfc_the_incast_drops_and_recovers() {
    let world = run(false);
    assert!(world.counters().drops_buffer > 0);
    assert_eq!(world.counters().pfc_pauses, 0);
    assert!(world.ports().iter().all(|p| (0..8).all(|prio| p.pause.received(prio) == 0)));
    for f in world.flows().iter().filter(|f| f.size.is_some()) {
        assert_eq!(f.bytes_delivered(), f.size.unwrap(), "flow {}", f.id);
    }
    assert!(world.flows().iter().map(|f| f.retransmits()).sum::<u64>() > 0);
}
