//! Link failures (`[[failures]]`): a degraded link carries exactly its fraction of the rate while
//! it is degraded, a link that is down loses what is sent on it (and TCP's timers recover the
//! flows once it is back), and bad failures are refused at their key.

mod common;
use common::run_text;
use sluice_sim::time::Time;

/// One 10 MB DCTCP flow across a dumbbell whose 10 Gb/s core link (sw0->sw1) is the bottleneck.
const ONE_FLOW: &str = r#"
[sim]
duration = "50ms"
[topology]
kind = "dumbbell"
left = 1
right = 1
host_rate = "40Gbps"
host_delay = "1us"
core_rate = "10Gbps"
core_delay = "2us"
[switch.ecn]
mode = "step"
k = "60KB"
[classes.default]
cc = "dctcp"
[[workloads]]
kind = "flows"
flows = [ { src = 0, dst = 1, size = "10MB" } ]
"#;

fn fct(text: &str) -> Time {
    let world = run_text(text, &[]);
    let f = &world.flows()[0];
    f.finish.expect("the flow finishes") - f.start
}

#[test]
fn a_link_at_a_quarter_of_its_rate_for_two_milliseconds_costs_three_quarters_of_that_time() {
    let base = fct(ONE_FLOW);
    let slowed = fct(&format!("{ONE_FLOW}\n[[failures]]\nlink = \"sw0->sw1\"\nat = \"2ms\"\nuntil = \"4ms\"\nrate = 0.25\n"));
    // At a quarter of the rate for 2 ms the link sends 1.5 ms worth of bytes less, which the flow
    // makes up at full rate afterwards. DCTCP keeps the queue busy through both changes, so the
    // tolerance is about a round trip (10 us; measured: 2.3 us).
    let extra = (slowed - base).secs_f64();
    assert!((extra - 1.5e-3).abs() < 10e-6, "base {base}, slowed {slowed}: {extra} s more, expected 1.5 ms");
}

#[test]
fn a_link_down_for_a_while_loses_what_is_sent_and_the_flow_recovers_once_it_is_back() {
    let text = format!("{ONE_FLOW}\n[[failures]]\nlink = \"sw1->sw0\"\nat = \"2ms\"\nuntil = \"3ms\"\ndown = true\n");
    let world = run_text(&text, &[]);
    let c = world.counters();
    // A millisecond at 10 Gb/s is about 800 full frames; the sender stops after a window's worth
    // once no ACK comes back, so it loses that window and whatever its timers resend meanwhile.
    assert!(c.drops_link_down >= 20 && c.drops_link_down < 900, "{c:?}");
    assert_eq!(c.drops(), c.drops_link_down, "only the dead link drops: {c:?}");
    let f = &world.flows()[0];
    assert!(f.finish.is_some(), "the flow finishes once the link is back");
    assert!(!f.timeouts().is_empty(), "nothing came back for a millisecond, so its timer fired");
    assert!(f.finish.unwrap() - f.start > Time::from_secs_f64(8.0e-3 + 1e-3), "it lost the millisecond");
}

#[test]
fn a_link_down_from_the_start_loses_every_packet_and_the_summary_counts_them() {
    let text = format!("{ONE_FLOW}\n[[failures]]\nlink = \"sw0->sw1\"\ndown = true\n");
    let world = run_text(&text, &[]);
    let c = world.counters();
    assert!(world.flows()[0].finish.is_none());
    assert_eq!(c.packets_delivered, 0);
    assert!(c.drops_link_down > 0 && c.drops_link_down == c.drops(), "{c:?}");
    let summary = serde_json::to_value(sluice_sim::metrics::summarize(&world, 0.0)).unwrap();
    assert_eq!(summary["drops_by_reason"]["link_down"].as_u64(), Some(c.drops_link_down));
    // Without failures the key is absent, so existing outputs keep their bytes.
    let plain = serde_json::to_value(sluice_sim::metrics::summarize(&run_text(ONE_FLOW, &[]), 0.0)).unwrap();
    assert!(plain["drops_by_reason"].get("link_down").is_none());
}

fn refusal(failure: &str) -> String {
    common::refusal(&format!("{ONE_FLOW}\n[[failures]]\n{failure}\n"), "f.toml")
}

#[test]
fn a_failure_of_a_link_that_does_not_exist_or_said_badly_is_refused_at_its_key() {
    let cases = [
        ("link = \"sw1->h0\"\ndown = true", "failures[0].link: sw1 has no link to h0"),
        ("link = \"sw0->sw9\"\ndown = true", "failures[0].link: no node named \"sw9\""),
        ("link = \"sw0\"\ndown = true", "failures[0].link: expected a link by its two ends"),
        ("link = \"sw0->sw1\"", "failures[0]: say how the link fails"),
        ("link = \"sw0->sw1\"\nrate = 2.0", "failures[0].rate: expected the fraction of its rate the link keeps"),
        ("link = \"sw0->sw1\"\ndown = true\nat = \"2ms\"\nuntil = \"1ms\"", "failures[0].until: expected a time after 2ms"),
        ("link = \"sw0->sw1\"\ndown = true\nwhen = \"2ms\"", "f.toml:24: failures[0].when: unknown field `when`, expected one of `link`, `one_way`, `at`, `until`, `down`, `rate`"),
    ];
    for (failure, expected) in cases {
        let e = refusal(failure);
        assert!(e.contains(expected), "{failure}: {e}");
    }
    let twice = refusal("link = \"sw0->sw1\"\ndown = true\nat = \"1ms\"\n[[failures]]\nlink = \"sw1->sw0\"\nrate = 0.5\nat = \"2ms\"");
    assert!(twice.contains("failures[1].link: sw1->sw0 already fails in failures[0]"), "{twice}");
}
