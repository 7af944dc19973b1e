//! Whose TCP the hosts run. `rfc` is TCP as the published simulators sluice is checked against
//! model it (RFC 5681, 6298, 6675, 8985), and the default; `linux` is the stack of a Linux host,
//! as the netns testbed runs it: a preset of `[transport]` values, each from the kernel's source,
//! and the behaviours that read `TcpConfig::stack` (each cites the function it follows).

use super::TcpConfig;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// One jiffy of a kernel built with Debian's CONFIG_HZ=250: Linux's timers count in them.
pub(super) const JIFFY: Time = Time::from_ms(4);

/// The host TCP stack a scenario's hosts run (`transport.stack`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    /// TCP as RFCs state it and the published simulators model it.
    #[default]
    Rfc,
    /// Linux's TCP: its constants, and its senders' behaviours where sluice models them.
    Linux,
}

/// One `[transport]` value of a stack's preset.
pub struct PresetValue {
    /// The key under `[transport]`.
    pub key: &'static str,
    /// Its value, as TOML.
    pub value: &'static str,
    /// Where the kernel sets it.
    pub source: &'static str,
}

/// The `[transport]` values `stack = "linux"` gives; keys the scenario sets itself win.
pub const LINUX_PRESET: &[PresetValue] = &[
    PresetValue { key: "init_cwnd", value: "10", source: "TCP_INIT_CWND, include/net/tcp.h" },
    PresetValue { key: "rto_min", value: "\"200ms\"", source: "TCP_RTO_MIN, include/net/tcp.h (a route's rto_min replaces it)" },
    PresetValue { key: "rto_init", value: "\"1s\"", source: "TCP_TIMEOUT_INIT, include/net/tcp.h" },
    PresetValue { key: "rto_max", value: "\"120s\"", source: "TCP_RTO_MAX, include/net/tcp.h" },
    PresetValue {
        key: "delayed_ack",
        value: "\"40ms\"",
        source:
            "TCP_ATO_MIN, include/net/tcp.h; at most rto_min less one jiffy (tcp_delack_max in tcp_send_delayed_ack, net/ipv4/tcp_output.c)",
    },
    PresetValue {
        key: "delayed_ack_segments",
        value: "2",
        source: "__tcp_ack_snd_check, net/ipv4/tcp_input.c: ACK at once when more than one full segment is unacknowledged",
    },
    PresetValue { key: "tlp", value: "true", source: "tcp_schedule_loss_probe, net/ipv4/tcp_output.c (net.ipv4.tcp_early_retrans = 3)" },
    PresetValue { key: "dupthresh", value: "3", source: "TCP_FASTRETRANS_THRESH, include/net/tcp.h (net.ipv4.tcp_reordering)" },
];

/// The behaviours `stack = "linux"` turns on beyond its preset: (what, the kernel function).
/// The last needs `transport.tso = true` as well.
pub const LINUX_BEHAVIOURS: &[(&str, &str)] = &[
    (
        "the tail loss probe waits 2 srtt plus rto_min for one segment in flight, plus two jiffies for more",
        "tcp_schedule_loss_probe, net/ipv4/tcp_output.c",
    ),
    (
        "the RTO is srtt plus a variance that never falls below rto_min within a round trip, in whole 4 ms jiffies (CONFIG_HZ=250)",
        "tcp_rtt_estimator, net/ipv4/tcp_input.c; __tcp_set_rto, include/net/tcp.h",
    ),
    (
    "BBR keeps 3 send quanta of tso_segs_goal segments (the pacing rate's 1/1024 s, at most 64 KB) in flight beyond its BDP, and rounds its window up to even packets",
    "bbr_quantization_budget and bbr_tso_segs_goal, net/ipv4/tcp_bbr.c",
    ),
    (
        "CUBIC leaves slow start by HyStart: once a round's ACK train outlasts half the minimum RTT plus four 64 KB GSO packets' time (at most 1 ms), or its smallest RTT exceeds the minimum by an eighth (4 to 16 ms); an RTO forgets W_max and the minimum RTT",
        "hystart_update, hystart_ack_delay, bictcp_acked and bictcp_state, net/ipv4/tcp_cubic.c",
    ),
    (
        "with transport.tso = true (a NIC with segmentation offload), new data leaves when an ACK or a write runs tcp_write_xmit: in packets of up to 64 KB (about 1 ms at the pacing rate, 64 KB under a 512 us minimum RTT), at most half the window at once, held back while under a third of the window is free and the oldest packet left over half an RTT ago; the NIC sends a packet's frames back to back and paces it as a whole",
        "tcp_write_xmit, tcp_tso_autosize, tcp_cwnd_test, tcp_tso_should_defer and tcp_update_skb_after_send, net/ipv4/tcp_output.c",
    ),
];

impl Stack {
    /// The `[transport]` values this stack's preset gives.
    pub fn preset(self) -> &'static [PresetValue] {
        match self {
            Stack::Rfc => &[],
            Stack::Linux => LINUX_PRESET,
        }
    }

    /// `[transport]` from the keys a scenario set itself (`own`, the whole table as written and
    /// overridden) over this stack's preset.
    pub fn resolve(self, own: &toml::Table) -> Result<TcpConfig, String> {
        let mut table: toml::Table = self
            .preset()
            .iter()
            .map(|p| format!("{} = {}", p.key, p.value))
            .collect::<Vec<_>>()
            .join("\n")
            .parse()
            .map_err(|e| format!("transport.stack: its preset is not valid TOML: {e}"))?;
        table.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut t: TcpConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| format!("transport: {}", e.message().trim()))?;
        if self == Stack::Linux && !own.contains_key("delayed_ack") {
            t.delayed_ack = t.delayed_ack.map(|d| d.min(delack_max(t.rto_min)));
        }
        Ok(t)
    }
}

/// Linux's `tcp_delack_max`: a delayed ACK waits at most the minimum RTO less one jiffy (at
/// least one jiffy), so that a route's low `rto_min` never fires before the ACK it waits for.
fn delack_max(rto_min: Time) -> Time {
    // msecs_to_jiffies rounds up.
    let jiffies = rto_min.ps().div_ceil(JIFFY.ps());
    Time(JIFFY.ps() * (jiffies.max(2) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linux_preset_fills_what_the_scenario_leaves_unset() {
        let own: toml::Table = "stack = \"linux\"\nrto_min = \"10ms\"".parse().unwrap();
        let t = Stack::Linux.resolve(&own).unwrap();
        assert_eq!(t.stack, Stack::Linux);
        assert_eq!(t.rto_min, Time::from_ms(10), "the scenario's own rto_min wins");
        assert_eq!(t.rto_init, Time::from_ms(1_000));
        assert_eq!(t.rto_max, Time::from_ms(120_000));
        // 10 ms is 3 jiffies of 4 ms (rounded up); the delayed ACK waits 2 of them.
        assert_eq!(t.delayed_ack, Some(Time::from_ms(8)), "tcp_delack_max under a 10 ms rto_min");
        let linux_rto: toml::Table = "stack = \"linux\"".parse().unwrap();
        assert_eq!(
            Stack::Linux.resolve(&linux_rto).unwrap().delayed_ack,
            Some(Time::from_ms(40)),
            "under 200 ms, TCP_ATO_MIN"
        );
        let own_delack: toml::Table = "rto_min = \"10ms\"\ndelayed_ack = \"20ms\"".parse().unwrap();
        assert_eq!(
            Stack::Linux.resolve(&own_delack).unwrap().delayed_ack,
            Some(Time::from_ms(20)),
            "the scenario's own wins"
        );
        assert_eq!(delack_max(Time::from_ms(1)), JIFFY, "at least one jiffy");
        assert!(t.tlp);
        assert_eq!((t.init_cwnd, t.dupthresh, t.delayed_ack_segments), (10, 3, 2));
        // Every preset key is a `[transport]` key that moves the config off its default.
        let d = TcpConfig::default();
        assert_ne!(
            (d.rto_min, d.rto_init, d.rto_max, d.delayed_ack, d.tlp),
            (t.rto_min, t.rto_init, t.rto_max, t.delayed_ack, t.tlp)
        );
        for p in LINUX_PRESET {
            let one: toml::Table = format!("{} = {}", p.key, p.value).parse().unwrap();
            assert!(Stack::Rfc.resolve(&one).is_ok(), "{} is not a [transport] key", p.key);
        }
    }

    #[test]
    fn the_rfc_stack_has_no_preset() {
        let t = Stack::Rfc.resolve(&toml::Table::new()).unwrap();
        let d = TcpConfig::default();
        assert_eq!((t.rto_min, t.delayed_ack, t.tlp, t.stack), (d.rto_min, d.delayed_ack, d.tlp, Stack::Rfc));
    }
}
