//! `cc_state.csv`: the state variables algorithms name (DCTCP's alpha, HPCC's U and W_c, BBR's
//! mode and bandwidth estimate...), sampled with the windows, one row per variable.

use super::ns;
use crate::world::World;
use std::io::{self, Write};

/// The header of `cc_state.csv`.
pub const CC_STATE_HEADER: &str = "t_ns,flow,cc,variable,value";

/// True when some sampled flow's algorithm named state variables.
pub fn has_cc_state(world: &World) -> bool {
    world.cwnd_samples().iter().any(|s| !s.state.is_empty())
}

/// Writes `cc_state.csv` in sampling order.
pub fn write_cc_state_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{CC_STATE_HEADER}")?;
    for s in world.cwnd_samples() {
        let cc = world.flows()[s.flow as usize].cc_name();
        for (name, value) in &s.state {
            writeln!(out, "{},{},{cc},{name},{value}", ns(s.t), s.flow)?;
        }
    }
    Ok(())
}
