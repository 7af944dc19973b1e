//! Named parameter sets: the values one published source runs an algorithm with, so that a
//! class compares against that source by one key (`classes.<name>.preset`). A set gives the
//! algorithm's parameters, scaled to the host line rate where the source scales them, and what
//! the RDMA NIC does where sources differ (how CE marks reach the sender, where ACKs queue).
//! Parameters the class sets itself win over the set's; `[rdma]` keys win over its NIC choices.

use crate::time::Rate;
use crate::transport::rdma::{AckPriority, ClassNic, CnpMode};

/// One named parameter set of one algorithm.
pub struct Preset {
    /// The set's name, as `preset` takes it.
    pub name: &'static str,
    /// The algorithm it configures.
    pub algorithm: &'static str,
    /// Where the values come from.
    pub source: &'static str,
    /// The parameters as TOML, for hosts at this line rate.
    params: fn(Rate) -> String,
    /// The NIC's behaviour the source pairs with them.
    pub nic: ClassNic,
}

impl Preset {
    /// The set's parameters for hosts at `line_rate`, under which the class's own go.
    pub fn params(&self, line_rate: Rate) -> toml::Table {
        (self.params)(line_rate).parse().expect("a preset's parameters are valid TOML")
    }
}

/// A rate as a TOML string.
fn rate(bps: u64) -> String {
    format!("\"{bps}bps\"")
}

/// The HPCC paper's simulator runs each algorithm from its `run.py` (alibaba-edu/
/// High-Precision-Congestion-Control, `simulation/run.py`), where `bw` is the NIC rate in Gb/s:
/// DCQCN with RATE_AI = 5 bw / 25 Mb/s and RATE_HAI = 50 bw / 25 Mb/s, TIMELY with 10 bw / 10 and
/// 50 bw / 10 Mb/s, HPCC with 10 bw / 25 Mb/s; DCTCP's 615 Mb/s and MIN_RATE 1000 Mb/s are fixed.
const HPCC_SIM: &str = "the HPCC paper's simulator (alibaba-edu/High-Precision-Congestion-Control, run.py)";
/// Its ACKs queue with the data in switches for every algorithm: `ACK_HIGH_PRIO`, which `run.py`
/// sets for DCQCN and TIMELY, only frees a host's ACK queue from its data priority's PFC pauses
/// (`RdmaEgressQueue::ack_q_idx`); the switch's own `AckHighPrio` attribute keeps its default, 0.
const HPCC_SIM_NIC: ClassNic = ClassNic { cnp: CnpMode::EveryAck, ack_priority: AckPriority::Data };
const PAPER_NIC: ClassNic = ClassNic { cnp: CnpMode::Paced, ack_priority: AckPriority::Data };

/// The TLT paper's RDMA simulator (kaist-ina/ns3-tlt-rdma-public, built on the HPCC simulator)
/// runs DCQCN and HPCC from its `config/config.txt` and `docker/template.config`, with the same
/// receiver (a CNP flag on every marked ACK) and ACKs with the data.
const TLT_SIM: &str = "the TLT paper's RDMA simulator (kaist-ina/ns3-tlt-rdma-public, config/config.txt)";

/// Every named set.
pub static PRESETS: &[Preset] = &[
    Preset {
        name: "paper",
        algorithm: "dcqcn",
        source: "the DCQCN paper (Zhu et al., SIGCOMM 2015) and Mellanox NICs: a CNP per 50 us at most",
        params: |_| String::new(),
        nic: PAPER_NIC,
    },
    Preset {
        name: "hpcc_sim",
        algorithm: "dcqcn",
        source: HPCC_SIM,
        params: |r| {
            format!(
                "alpha_interval = \"1us\"\ndecrease_interval = \"4us\"\nrate_timer = \"300us\"\nbyte_counter = \"0B\"\n\
                 fast_recovery = 1\nrate_ai = {}\nrate_hai = {}\nmin_rate = \"1000Mbps\"\nclamp_target = false\n\
                 g = 0.00390625\nrate_on_first_cnp = 1.0",
                rate(r.0 / 5_000),
                rate(r.0 / 500)
            )
        },
        nic: HPCC_SIM_NIC,
    },
    Preset {
        name: "tlt_sim",
        algorithm: "dcqcn",
        source: TLT_SIM,
        params: |_| {
            "alpha_interval = \"1us\"\ndecrease_interval = \"4us\"\nrate_timer = \"900us\"\nbyte_counter = \"0B\"\n\
             fast_recovery = 1\nrate_ai = \"50Mbps\"\nrate_hai = \"100Mbps\"\nmin_rate = \"100Mbps\"\n\
             clamp_target = false\ng = 0.00390625\nrate_on_first_cnp = 1.0\nwindow = true"
                .into()
        },
        nic: HPCC_SIM_NIC,
    },
    Preset {
        name: "paper",
        algorithm: "timely",
        source: "the TIMELY paper (Mittal et al., SIGCOMM 2015)",
        params: |_| String::new(),
        nic: PAPER_NIC,
    },
    Preset {
        name: "hpcc_sim",
        algorithm: "timely",
        source: HPCC_SIM,
        params: |r| {
            format!(
                "alpha = 0.875\nbeta = 0.8\nt_low = \"50us\"\nt_high = \"500us\"\nmin_rtt = \"20us\"\ndelta = {}\n\
                 hai_after = 5\nmin_rate = \"1000Mbps\"",
                rate(r.0 / 1_000)
            )
        },
        nic: HPCC_SIM_NIC,
    },
    Preset {
        name: "hpcc_sim",
        algorithm: "dctcp_rate",
        source: HPCC_SIM,
        params: |_| "g = 0.0625\nrate_ai = \"615Mbps\"\nmin_rate = \"1000Mbps\"\nwindow = true".into(),
        nic: HPCC_SIM_NIC,
    },
    Preset {
        name: "paper",
        algorithm: "hpcc",
        source: "the HPCC paper (Li et al., SIGCOMM 2019) as printed: maxStage 5 (its authors note the simulations ran 0, as hpcc_sim does), W_AI = W_init (1 - eta) / N",
        params: |_| String::new(),
        nic: PAPER_NIC,
    },
    Preset {
        name: "hpcc_sim",
        algorithm: "hpcc",
        source: HPCC_SIM,
        params: |r| format!("eta = 0.95\nmax_stage = 0\nrate_ai = {}", rate(r.0 / 2_500)),
        nic: HPCC_SIM_NIC,
    },
    Preset {
        name: "tlt_sim",
        algorithm: "hpcc",
        source: TLT_SIM,
        params: |_| "eta = 0.95\nmax_stage = 5\nrate_ai = \"50Mbps\"".into(),
        nic: HPCC_SIM_NIC,
    },
];

/// The set `name` of `algorithm`, or an error listing the sets it has.
pub fn lookup(algorithm: &str, name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.algorithm == algorithm && p.name == name).ok_or_else(|| {
        let names: Vec<String> =
            PRESETS.iter().filter(|p| p.algorithm == algorithm).map(|p| format!("\"{}\"", p.name)).collect();
        if names.is_empty() {
            format!("unknown parameter set \"{name}\": {algorithm} has no named parameter sets")
        } else {
            format!("unknown parameter set \"{name}\" for {algorithm}; expected one of: {}", names.join(", "))
        }
    })
}

/// `base` with `over`'s keys replacing its own.
pub fn overlay(mut base: toml::Table, over: &toml::Table) -> toml::Table {
    for (k, v) in over {
        base.insert(k.clone(), v.clone());
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_set_builds_its_algorithm_at_several_line_rates() {
        for p in PRESETS {
            for r in [Rate::gbps(25), Rate::gbps(100), Rate::gbps(400)] {
                let params = p.params(r);
                assert!(super::super::factory(p.algorithm, &params).is_ok(), "{} {}: {params}", p.algorithm, p.name);
            }
        }
    }

    #[test]
    fn hpcc_sim_scales_dcqcn_steps_with_the_nic_rate_as_run_py_does() {
        // run.py at bw = 100: RATE_AI 20 Mb/s, RATE_HAI 200 Mb/s; at bw = 25, 5 and 50.
        let p = lookup("dcqcn", "hpcc_sim").unwrap();
        let at100 = p.params(Rate::gbps(100));
        assert_eq!(at100["rate_ai"].as_str(), Some("20000000bps"));
        assert_eq!(at100["rate_hai"].as_str(), Some("200000000bps"));
        assert_eq!(p.params(Rate::gbps(25))["rate_ai"].as_str(), Some("5000000bps"));
        assert_eq!(p.nic, ClassNic { cnp: CnpMode::EveryAck, ack_priority: AckPriority::Data });
    }

    #[test]
    fn an_unknown_set_names_the_sets_there_are() {
        let e = lookup("dcqcn", "hpcc").err().unwrap();
        assert_eq!(e, "unknown parameter set \"hpcc\" for dcqcn; expected one of: \"paper\", \"hpcc_sim\", \"tlt_sim\"");
        assert!(lookup("cubic", "paper").err().unwrap().contains("cubic has no named parameter sets"));
    }

    #[test]
    fn the_class_s_own_parameters_win() {
        let base = lookup("dcqcn", "hpcc_sim").unwrap().params(Rate::gbps(100));
        let own: toml::Table = "rate_timer = \"55us\"".parse().unwrap();
        let merged = overlay(base, &own);
        assert_eq!(merged["rate_timer"].as_str(), Some("55us"));
        assert_eq!(merged["alpha_interval"].as_str(), Some("1us"));
    }
}
