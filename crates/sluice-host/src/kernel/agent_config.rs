//! The agent's runtime switches as the BPF programs read them (`struct agent_config`): TCP-INT
//! on or off, the echo, the telemetry sampling interval, and the bounds an arriving echo is
//! clamped to.

use crate::kernel::pins::open_pinned;
use crate::sys;
use anyhow::{anyhow, bail, Result};
use libbpf_rs::{MapCore, MapFlags};
use sluice_sim::packet::tcp_int::IntEncoding;

/// `struct agent_config` as the BPF programs read it.
pub(crate) fn config_bytes(c: &Config) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&(c.int_enabled as u32).to_ne_bytes());
    v.extend_from_slice(&(c.echo_enabled as u32).to_ne_bytes());
    v.extend_from_slice(&c.sample_ns.to_ne_bytes());
    v.extend_from_slice(&c.echo_bounds.lat_ns.to_ne_bytes());
    v.extend_from_slice(&[c.echo_bounds.queue_code, c.echo_bounds.util_code, 0, 0]);
    v
}

/// The agent's runtime switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The option is added to outgoing segments.
    pub int_enabled: bool,
    /// Echo fields are filled.
    pub echo_enabled: bool,
    /// Telemetry sampling interval per flow.
    pub sample_ns: u64,
    /// Bounds an arriving echo is clamped to.
    pub echo_bounds: EchoBounds,
}

/// The largest readings an arriving TCP-INT echo may carry. The agent clamps an echo above them
/// before the socket stores it, so a forged or corrupted echo moves congestion control (ECN+INT
/// reads the queue) and telemetry no further than a plausible one, and counts each clamped field
/// (`echo_int_clamped`, `echo_lat_clamped`).
///
/// INTval bounds are codes (bits 0-6 of the byte): a queue reading decodes to `code <<
/// qdepth_shift` bytes, a utilization to `code << util_shift` percent. The default admits the
/// whole wire range, because at the default encoding every code is one a sluice switch can
/// produce: 127 queue units are 1 MiB at 8 KiB each, within a datacenter port's buffer, and
/// utilization above 100 % is what a switch's window legitimately measures while a burst arrives
/// faster than the port drains (up to its own saturation at 127). An operator who knows the
/// fabric (its buffers, its longest plausible path latency) sets tighter ones with `set_echo_bounds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoBounds {
    /// Largest queue code (0 to 127).
    pub queue_code: u8,
    /// Largest utilization code (0 to 127).
    pub util_code: u8,
    /// Largest summed hop latency, ns (at most 2^24 - 1, the field's width).
    pub lat_ns: u32,
}

/// Largest INTval code and latency the wire can carry.
const CODE_MAX: u8 = 0x7f;
const LAT_MAX: u32 = 0xff_ffff;

impl Default for EchoBounds {
    fn default() -> Self {
        EchoBounds { queue_code: CODE_MAX, util_code: CODE_MAX, lat_ns: LAT_MAX }
    }
}

impl EchoBounds {
    /// Bounds in the units readings decode to under `enc`: each code is the largest whose
    /// decoded value does not exceed its bound.
    pub fn from_units(queue_bytes: u64, util_percent: u64, lat_ns: u64, enc: &IntEncoding) -> EchoBounds {
        let code = |v: u64, shift: u32| v.checked_shr(shift).unwrap_or(0).min(CODE_MAX as u64) as u8;
        EchoBounds {
            queue_code: code(queue_bytes, enc.qdepth_shift),
            util_code: code(util_percent, enc.util_shift),
            lat_ns: lat_ns.min(LAT_MAX as u64) as u32,
        }
    }

    /// The bounds as text, decoded under `enc`.
    pub fn text(&self, enc: &IntEncoding) -> String {
        let q = (self.queue_code as u64).checked_shl(enc.qdepth_shift).unwrap_or(u64::MAX);
        let u = (self.util_code as u64).checked_shl(enc.util_shift).unwrap_or(u64::MAX);
        format!("queue <= {q} B, util <= {u}%, latency <= {} ns", self.lat_ns)
    }
}

/// Reads the runtime switches.
pub fn config() -> Result<Config> {
    let m = open_pinned("agent_config")?;
    let v = m.lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?.ok_or_else(|| anyhow!("agent_config has no entry"))?;
    if v.len() < 24 {
        bail!("agent_config holds {} bytes, expected 24 (an agent loaded by an older sluice: reload it)", v.len());
    }
    let u32_at = |o: usize| u32::from_ne_bytes(v[o..o + 4].try_into().unwrap());
    Ok(Config {
        int_enabled: u32_at(0) != 0,
        echo_enabled: u32_at(4) != 0,
        sample_ns: u64::from_ne_bytes(v[8..16].try_into().unwrap()),
        echo_bounds: EchoBounds { lat_ns: u32_at(16), queue_code: v[20], util_code: v[21] },
    })
}

/// Changes runtime switches; `None` leaves one as it is.
pub fn set(int: Option<bool>, echo: Option<bool>, sample_ns: Option<u64>) -> Result<Config> {
    sys::require_root("changing the agent's switches")?;
    let mut c = config()?;
    c.int_enabled = int.unwrap_or(c.int_enabled);
    c.echo_enabled = echo.unwrap_or(c.echo_enabled);
    c.sample_ns = sample_ns.unwrap_or(c.sample_ns);
    open_pinned("agent_config")?.update(&0u32.to_ne_bytes(), &config_bytes(&c), MapFlags::ANY)?;
    Ok(c)
}

/// Changes the bounds arriving echoes are clamped to; they apply from the next segment on.
pub fn set_echo_bounds(b: EchoBounds) -> Result<Config> {
    sys::require_root("changing the agent's echo bounds")?;
    if b.queue_code > CODE_MAX || b.util_code > CODE_MAX || b.lat_ns > LAT_MAX {
        bail!("echo bounds {b:?}: INTval codes go up to {CODE_MAX} and latencies to {LAT_MAX} ns");
    }
    let mut c = config()?;
    c.echo_bounds = b;
    open_pinned("agent_config")?.update(&0u32.to_ne_bytes(), &config_bytes(&c), MapFlags::ANY)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_bounds_round_down_to_codes_and_saturate_at_the_wire_range() {
        let enc = IntEncoding::default();
        // 8 KiB queue units, 1 % utilization units.
        assert_eq!(EchoBounds::from_units((256 << 10) + 8191, 110, 2_000_000, &enc), EchoBounds { queue_code: 32, util_code: 110, lat_ns: 2_000_000 });
        assert_eq!(EchoBounds::from_units(u64::MAX, u64::MAX, u64::MAX, &enc), EchoBounds::default());
        let wide = IntEncoding { qdepth_shift: 64, util_shift: 1, ..enc };
        assert_eq!(EchoBounds::from_units(u64::MAX, 101, 0, &wide), EchoBounds { queue_code: 0, util_code: 50, lat_ns: 0 });
        assert_eq!(EchoBounds::default().text(&enc), "queue <= 1040384 B, util <= 127%, latency <= 16777215 ns");
        let c = Config { int_enabled: true, echo_enabled: false, sample_ns: 7, echo_bounds: EchoBounds { queue_code: 1, util_code: 2, lat_ns: 3 } };
        assert_eq!(config_bytes(&c)[16..], [3, 0, 0, 0, 1, 2, 0, 0]);
    }
}
