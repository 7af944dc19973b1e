//! Flows that wait for flows (`after`, `compute`, receives in `kind = "flows"`): a flow starts its
//! compute delay after the last flow it waits for is done as its host sees it (the arrival of a
//! flow it receives, the last acknowledgement of one it sent); a graph that would wait forever
//! (a circle, a name that names nothing, a receive nothing sends) is refused at its entry's
//! file, line and key; and a run whose graph stops says which flows wait on what.

mod common;

use sluice_sim::check::check_text;
use sluice_sim::ids::FlowId;
use sluice_sim::metrics;
use sluice_sim::scenario;
use sluice_sim::time::Time;
use std::path::Path;

/// Four hosts on a star at 10 Gb/s, 5 us links, and a `kind = "flows"` list (its entries, one a
/// line); the list starts on line 12.
fn star(entries: &str) -> String {
    format!(
        "[sim]\nseed = 1\n[topology]\nkind = \"star\"\nhosts = 4\nhost_rate = \"10Gbps\"\nhost_delay = \"5us\"\n\n\
         [[workloads]]\nkind = \"flows\"\nflows = [\n{entries}]\n"
    )
}

#[test]
fn a_flow_starts_its_compute_delay_after_what_its_host_sees_done() {
    let text = star(concat!(
        "  { name = \"a\", src = 0, dst = 1, size = \"100KB\" },\n",
        // h1 receives a: b starts 10 us after a's last byte reaches h1.
        "  { name = \"b\", src = 1, dst = 2, size = \"100KB\", after = [\"a\"], compute = \"10us\" },\n",
        // h0 sent a: c starts 5 us after h0 has a's last byte acknowledged.
        "  { name = \"c\", src = 0, dst = 3, size = \"50KB\", after = [\"a\"], compute = \"5us\" },\n",
        "  { name = \"d\", src = 3, dst = 2, size = \"20KB\", tag = 7 },\n",
        // A receive at h2 of h3's flow with tag 7: e waits for it and for b, both arriving at h2.
        "  { name = \"r\", receive = true, src = 3, dst = 2, tag = 7 },\n",
        "  { name = \"e\", src = 2, dst = 0, size = \"10KB\", after = [\"r\", \"b\"] },\n",
        // Not before its own start, however early a arrives.
        "  { name = \"f\", src = 1, dst = 0, size = \"10KB\", after = [\"a\"], start = \"2ms\" },\n",
    ));
    let world = common::run_text(&text, &[]);
    let f = |i: u32| &world.flows()[i as usize];
    let (a, b, c, d, e, late) = (f(0), f(1), f(2), f(3), f(4), f(5));
    assert_eq!((b.src.0, c.src.0, d.src.0, e.src.0, late.src.0), (1, 0, 3, 2, 1), "receives make no flow");
    let arrived = a.rx_done.unwrap();
    assert!(arrived < a.finish.unwrap(), "a arrives before its last ACK returns");
    assert_eq!(b.start, arrived + Time::from_us(10));
    assert_eq!(c.start, a.finish.unwrap() + Time::from_us(5));
    assert_eq!(e.start, b.rx_done.unwrap().max(d.rx_done.unwrap()));
    assert!(b.rx_done.unwrap() > d.rx_done.unwrap(), "e waited for b, the later of the two");
    assert_eq!(late.start, Time::from_ms(2));
    assert!([b, c, e, late].iter().all(|f| f.finish.is_some()));
    assert!(world.waiting_flows().is_empty());
}

/// The first problem `sluice check` finds in `text`, as it prints it.
fn refused(text: &str) -> String {
    match check_text(text, "deps.toml", Path::new("."), &[]) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(problems) => problems[0].to_string(),
    }
}

#[test]
fn a_circle_is_refused_at_the_entry_that_starts_it() {
    let err = refused(&star(concat!(
        "  { name = \"a\", src = 0, dst = 1, size = \"1KB\" },\n",
        "  { name = \"b\", src = 1, dst = 2, size = \"1KB\", after = [\"a\", \"d\"] },\n",
        "  { name = \"c\", src = 2, dst = 3, size = \"1KB\", after = [\"b\"] },\n",
        "  { name = \"d\", src = 3, dst = 1, size = \"1KB\", after = [\"c\"] },\n",
    )));
    assert_eq!(
        err,
        "deps.toml:13: workloads[0].flows[1].after: flows wait for one another in a circle, so none of them can start: \
         flows[1] (\"b\") waits for flows[3] (\"d\") waits for flows[2] (\"c\") waits for flows[1] (\"b\")"
    );
    let err = refused(&star("  { name = \"x\", src = 0, dst = 1, size = \"1KB\", after = [\"x\"] },\n"));
    assert!(err.starts_with("deps.toml:12: workloads[0].flows[0].after: flows wait for one another in a circle"), "{err}");
}

#[test]
fn a_flow_that_waits_for_a_name_nothing_has_is_refused_at_its_key() {
    let err = refused(&star(concat!(
        "  { name = \"a\", src = 0, dst = 1, size = \"1KB\" },\n",
        "  { name = \"b\", src = 1, dst = 2, size = \"1KB\", after = [\"a\", \"nope\"] },\n",
    )));
    assert_eq!(err, "deps.toml:13: workloads[0].flows[1].after[1]: no flow or receive of this workload is named \"nope\" (names: a, b)");
}

#[test]
fn a_receive_nothing_sends_is_refused_at_its_entry() {
    let err = refused(&star(concat!(
        "  { name = \"a\", src = 0, dst = 1, size = \"1KB\", tag = 1 },\n",
        "  { name = \"r\", receive = true, src = 0, dst = 1, tag = 2 },\n",
        "  { name = \"b\", src = 1, dst = 2, size = \"1KB\", after = [\"r\"] },\n",
    )));
    assert_eq!(
        err,
        "deps.toml:13: workloads[0].flows[1]: a receive at host 1 of tag 2 from host 0, but no flow of this workload sends it; \
         it would wait forever (add a flow { src = 0, dst = 1, size = \"..\", tag = 2 })"
    );
    // Two receives of the one flow: the second has nothing left to match.
    let err = refused(&star(concat!(
        "  { src = 0, dst = 1, size = \"1KB\", tag = 1 },\n",
        "  { receive = true, src = 0, dst = 1, tag = 1 },\n",
        "  { receive = true, src = 0, dst = 1, tag = 1 },\n",
    )));
    assert!(err.starts_with("deps.toml:14: workloads[0].flows[2]: a receive at host 1 of tag 1 from host 0, but the 1 flow with these hosts and tag already matches earlier receives"), "{err}");
    let err = refused(&star("  { receive = true, src = 0, dst = 1, tag = 1, size = \"1KB\" },\n"));
    assert!(err.starts_with("deps.toml:12: workloads[0].flows[0].size: a receive is done when the flow from host 0 with its tag arrives, so it takes no size"), "{err}");
    let err = refused(&star("  { src = 0, dst = 1, size = \"1KB\", compute = \"1us\" },\n"));
    assert!(err.starts_with("deps.toml:12: workloads[0].flows[0].compute: a compute delay follows what the flow waits for"), "{err}");
}

#[test]
fn a_graph_that_cannot_go_on_says_which_flows_wait_on_what() {
    // h1's link is down for good: a never arrives, so b (at h1) never starts, nor c after b.
    let text = star(concat!(
        "  { name = \"a\", src = 0, dst = 1, size = \"10KB\" },\n",
        "  { name = \"b\", src = 1, dst = 2, size = \"10KB\", after = [\"a\"] },\n",
        "  { name = \"c\", src = 2, dst = 3, size = \"10KB\", after = [\"b\"] },\n",
        "  { name = \"d\", src = 3, dst = 2, size = \"10KB\" },\n",
    )) + "[[failures]]\nlink = \"sw0->h1\"\ndown = true\n";
    let text = text.replace("seed = 1\n", "seed = 1\nduration = \"20ms\"\n");
    let loaded = scenario::parse(&text, "deps.toml", Path::new("."), &[]).unwrap();
    let mut world = scenario::build(&loaded).unwrap();
    world.run(&mut |_| {});
    assert_eq!(world.now(), Time::from_ms(20), "the run stops at its duration");
    assert_eq!(world.waiting_flows(), [(FlowId(1), vec![FlowId(0)]), (FlowId(2), vec![FlowId(1)])]);
    assert!(world.flows()[3].finish.is_some(), "d ran");
    let warnings = metrics::warnings(&loaded, &world);
    assert!(
        warnings.iter().any(|w| w.starts_with("2 flows never started: what they wait for never arrived (flow 1 waits for flow 0; flow 2 waits for flow 1)")),
        "{warnings:?}"
    );
    let summary = metrics::summarize(&world, 0.0);
    let waiting = summary.waiting.expect("a waiting section");
    assert_eq!(waiting.iter().map(|w| (w.flow, w.waits_for.clone())).collect::<Vec<_>>(), [(1, vec![0]), (2, vec![1])]);
}

#[test]
fn waiting_for_a_flow_of_two_other_hosts_keeps_the_fabric_one_partition() {
    // On a leaf-spine, b (h4 -> h5) waits for a (h0 -> h1): h4 hears of a's arrival at h1 at
    // once, which no lookahead allows, so the fabric is not split.
    let spine = "[sim]\nseed = 1\n[topology]\nkind = \"leaf_spine\"\nhosts_per_leaf = 2\nleaves = 4\nspines = 2\n\
                 host_rate = \"10Gbps\"\nhost_delay = \"1us\"\nfabric_rate = \"10Gbps\"\nfabric_delay = \"1us\"\n\
                 [[workloads]]\nkind = \"flows\"\nflows = [\n";
    let local = format!("{spine}  {{ name = \"a\", src = 0, dst = 4, size = \"10KB\" }},\n  {{ src = 4, dst = 6, size = \"10KB\", after = [\"a\"] }},\n]\n");
    let world = common::run_text(&local, &[]);
    assert_eq!(world.partitions().count, 4, "h4 receives a: the wait is h4's own");
    assert_eq!(world.flows()[1].start, world.flows()[0].rx_done.unwrap());
    let far = format!("{spine}  {{ name = \"a\", src = 0, dst = 1, size = \"10KB\" }},\n  {{ src = 4, dst = 5, size = \"10KB\", after = [\"a\"] }},\n]\n");
    let world = common::run_text(&far, &[]);
    assert_eq!(world.partitions().count, 1);
    assert!(world.partitions().note.unwrap().starts_with("a flow waits for a flow with no end at its host"));
    assert_eq!(world.flows()[1].start, world.flows()[0].rx_done.unwrap());
}
