//! A tail drop is recovered by the retransmission timer, never earlier than rto_min after the
//! sender's last transmission.

mod common;
use common::run_text;
use sluice_sim::time::Time;

const INCAST: &str = r#"
[topology]
kind = "star"
hosts = 5
host_rate = "10Gbps"
host_delay = "2us"
[switch]
buffer = "30KB"      # about 19 frames shared by four senders' initial windows of 16
alpha = 8.0
[transport]
init_cwnd = 16
rto_min = "3ms"
rto_init = "3ms"
[classes.default]
cc = "newreno"
[[workloads]]
kind = "flows"
flows = [
  { src = 0, dst = 4, size = "20KB" },
  { src = 1, dst = 4, size = "20KB" },
  { src = 2, dst = 4, size = "20KB" },
  { src = 3, dst = 4, size = "20KB" },
]
"#;

#[test]
fn tail_drops_are_recovered_by_rto_no_earlier_than_rto_min() {
    let world = run_text(INCAST, &[]);
    assert!(world.counters().drops_buffer > 0, "the incast must overflow the buffer");
    let rto_min = Time::from_ms(3);
    let mut timeouts = 0;
    for f in world.flows() {
        assert!(f.finish.is_some(), "flow {} did not finish", f.id);
        for t in f.timeouts() {
            timeouts += 1;
            assert!(t.fired - t.last_tx >= rto_min, "flow {}: RTO {} after the last transmission", f.id, t.fired - t.last_tx);
        }
    }
    assert!(timeouts >= 1, "whole-tail losses leave no duplicate ACKs: only the RTO can recover them");
    // Flows that timed out finish after at least rto_min.
    for f in world.flows().iter().filter(|f| !f.timeouts().is_empty()) {
        assert!(f.finish.unwrap() - f.start >= rto_min);
    }
}

#[test]
fn lossless_run_has_no_timeouts_and_ideal_single_packet_fct() {
    let text = INCAST.replace("buffer = \"30KB\"", "buffer = \"1MB\"").replace("size = \"20KB\"", "size = \"1000B\"");
    let world = run_text(&text, &[]);
    assert_eq!(world.counters().drops(), 0);
    for f in world.flows() {
        assert!(f.timeouts().is_empty());
        // One packet each into an idle fabric: the first flow's FCT equals the ideal exactly;
        // the others wait behind it at most three frames at the receiver's port.
        let fct = f.finish.unwrap() - f.start;
        assert!(fct >= f.ideal_fct, "flow {}: FCT {} below ideal {}", f.id, fct, f.ideal_fct);
    }
    let f0 = &world.flows()[0];
    assert_eq!(f0.finish.unwrap() - f0.start, f0.ideal_fct);
}
