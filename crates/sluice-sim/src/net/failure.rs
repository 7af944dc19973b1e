//! Link failures: a link that goes down (it loses everything sent on it) or runs at a fraction of
//! its rate (a degraded optic, as the UEC reference's `-failed` links), from the start or at a
//! time, and optionally comes back. Routing does not change: a switch keeps a dead link in its
//! ECMP group, as it does until its control plane converges, so only a transport that moves its
//! packets to other paths (spraying with path penalties) gets around it.

use super::port::Port;
use crate::ids::PortId;
use crate::time::{Rate, Time};
use serde::{Deserialize, Serialize};

/// `[[failures]]`: one link's failure as the scenario writes it.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FailureConfig {
    /// The link, as "sw0->sw4" or "h3->sw0": both of its directions fail, unless `one_way`.
    pub link: String,
    /// Only the direction the link is named in fails (the UEC reference fails a fat tree's
    /// core-to-aggregation direction alone).
    #[serde(default)]
    pub one_way: bool,
    /// When it fails; from the start when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
    /// When it is whole again; never when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
    /// The link carries nothing.
    #[serde(default)]
    pub down: bool,
    /// The fraction of its rate it keeps, in (0, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

/// What a link becomes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LinkState {
    /// It runs at this rate (its own, or a fraction of it).
    Up(Rate),
    /// It loses everything sent on it.
    Down,
}

/// One direction of a link changing at a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkChange {
    /// The port that sends on it.
    pub port: PortId,
    /// When.
    pub at: Time,
    /// What it becomes.
    pub to: LinkState,
}

impl LinkChange {
    /// Puts the change into effect at the port: what it serializes from now on goes at the new
    /// rate, or is lost.
    pub fn apply(&self, port: &mut Port) {
        match self.to {
            LinkState::Up(rate) => {
                port.rate = rate;
                port.link.set_down(false);
            }
            LinkState::Down => port.link.set_down(true),
        }
    }
}

impl FailureConfig {
    /// The changes this failure makes to the ports `ports` (the named direction of its link and
    /// the other, with their rates), checked; `key` is its path in the scenario (e.g.
    /// "failures[0]").
    pub fn changes(&self, key: &str, ports: [(PortId, Rate); 2]) -> Result<Vec<LinkChange>, String> {
        let at = self.at.unwrap_or(Time::ZERO);
        if let Some(until) = self.until {
            if until <= at {
                return Err(format!("{key}.until: expected a time after {} (when it fails), got {until}", at));
            }
        }
        let state = |rate: Rate| -> Result<LinkState, String> {
            match (self.down, self.rate) {
                (true, None) => Ok(LinkState::Down),
                (false, Some(f)) if f > 0.0 && f < 1.0 => {
                    let kept = (rate.0 as f64 * f).round() as u64;
                    if kept == 0 {
                        return Err(format!("{key}.rate: {f} of {rate} is below 1 b/s; keep a larger fraction or set down = true"));
                    }
                    Ok(LinkState::Up(Rate(kept)))
                }
                (false, Some(f)) => Err(format!("{key}.rate: expected the fraction of its rate the link keeps, above 0 and below 1 (e.g. 0.25), got {f}")),
                (true, Some(_)) => Err(format!("{key}.rate: a link that is down keeps no rate; give down = true or rate, not both")),
                (false, None) => Err(format!("{key}: say how the link fails: down = true, or rate = <fraction of its rate it keeps>")),
            }
        };
        let mut out = Vec::new();
        let directions = if self.one_way { 1 } else { 2 };
        for &(port, rate) in &ports[..directions] {
            out.push(LinkChange { port, at, to: state(rate)? });
            if let Some(until) = self.until {
                out.push(LinkChange { port, at: until, to: LinkState::Up(rate) });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::link::Link;

    fn config(down: bool, rate: Option<f64>, at: Option<Time>, until: Option<Time>) -> FailureConfig {
        FailureConfig { link: "sw0->sw1".into(), one_way: false, at, until, down, rate }
    }

    const PORTS: [(PortId, Rate); 2] = [(PortId(3), Rate(100_000_000_000)), (PortId(8), Rate(100_000_000_000))];

    #[test]
    fn a_degraded_link_runs_at_its_fraction_both_ways_and_recovers_its_own_rate() {
        let us = |n| Time::from_secs_f64(n as f64 * 1e-6);
        let c = config(false, Some(0.25), Some(us(10)), Some(us(30))).changes("failures[0]", PORTS).unwrap();
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], LinkChange { port: PortId(3), at: us(10), to: LinkState::Up(Rate(25_000_000_000)) });
        assert_eq!(c[1], LinkChange { port: PortId(3), at: us(30), to: LinkState::Up(Rate(100_000_000_000)) });
        assert_eq!(c[2].port, PortId(8));
        let one_way = FailureConfig { one_way: true, ..config(false, Some(0.25), None, None) };
        assert_eq!(one_way.changes("failures[0]", PORTS).unwrap().iter().map(|c| c.port).collect::<Vec<_>>(), [PortId(3)]);
        let mut port = Port::new(0, 0, 1, Rate(100_000_000_000), Link::default(), 1);
        c[0].apply(&mut port);
        assert_eq!(port.rate, Rate(25_000_000_000));
        assert!(!port.link.down);
        c[1].apply(&mut port);
        assert_eq!(port.rate, Rate(100_000_000_000));
    }

    #[test]
    fn a_link_down_from_the_start_stays_down_and_keeps_its_rate_for_when_it_returns() {
        let c = config(true, None, None, None).changes("failures[0]", PORTS).unwrap();
        assert_eq!(c, vec![
            LinkChange { port: PortId(3), at: Time::ZERO, to: LinkState::Down },
            LinkChange { port: PortId(8), at: Time::ZERO, to: LinkState::Down },
        ]);
        let mut port = Port::new(0, 0, 1, Rate(100_000_000_000), Link::default(), 1);
        c[0].apply(&mut port);
        assert!(port.link.down);
        assert_eq!(port.rate, Rate(100_000_000_000));
    }

    #[test]
    fn a_failure_that_says_neither_or_both_or_a_fraction_outside_0_1_is_refused_at_its_key() {
        let err = |c: FailureConfig| c.changes("failures[2]", PORTS).unwrap_err();
        assert!(err(config(false, None, None, None)).starts_with("failures[2]: say how the link fails"));
        assert!(err(config(true, Some(0.5), None, None)).starts_with("failures[2].rate: a link that is down"));
        for f in [0.0, 1.0, 1.5, -0.2, f64::NAN] {
            assert!(err(config(false, Some(f), None, None)).starts_with("failures[2].rate: expected the fraction"), "{f}");
        }
        let t = Time::from_secs_f64(1e-3);
        assert!(err(config(true, None, Some(t), Some(t))).starts_with("failures[2].until: expected a time after"));
    }
}
