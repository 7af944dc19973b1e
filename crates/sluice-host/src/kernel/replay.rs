//! The converse of the differential test: a trace of steps recorded in the simulator
//! (`sluice_sim::cc::portable::record_steps`) replayed into the BPF build of the same C source.
//! Each algorithm is compiled a second time with `bpf/scc_replay.h` into a syscall program that
//! runs one step on its state for that flow; the kernel verifies it like any BPF program and runs
//! it through `BPF_PROG_TEST_RUN`, one step a run. Every window it returns must equal the one the
//! simulator recorded. (A `struct_ops` program itself cannot be test-run: the kernel offers that
//! only for its own dummy ops, so the replay program is the equivalent harness.)

use anyhow::{bail, Context, Result};
use libbpf_rs::{ObjectBuilder, ProgramInput};
use sluice_sim::cc::portable::{CWindow, Record, ReplayStats, REC_ACK, REC_EVENT, REC_INIT};
use std::fmt;

/// Which BPF build of the sources replays the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelBuild {
    /// The build the kernel registers.
    Standard,
    /// The same sources with `SCC_LOSS_SHIFT=2` (a loss quarters the window): the negative control.
    Mutant,
}

/// Steps a replay can hold flows for (`SCC_REPLAY_FLOWS` in bpf/scc_replay.h).
pub const FLOWS: u64 = 64;

const SCC_LOSS: u32 = 1;
const SCC_TIMEOUT: u32 = 2;

macro_rules! object {
    ($name:literal, $suffix:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, "_", $suffix, ".bpf.o")).as_slice()
    };
}

/// The compiled replay object of `name` in `build`.
fn object_bytes(name: &str, build: KernelBuild) -> Result<&'static [u8]> {
    let standard = build == KernelBuild::Standard;
    Ok(match (name, standard) {
        ("newreno", true) => object!("newreno", "replay"),
        ("newreno", false) => object!("newreno", "replay_mutant"),
        ("dctcp", true) => object!("dctcp", "replay"),
        ("dctcp", false) => object!("dctcp", "replay_mutant"),
        ("ecn_int", true) => object!("ecn_int", "replay"),
        ("ecn_int", false) => object!("ecn_int", "replay_mutant"),
        ("retcp", true) => object!("retcp", "replay"),
        ("retcp", false) => object!("retcp", "replay_mutant"),
        (other, _) => bail!("no portable algorithm named {other:?} (expected newreno, dctcp, ecn_int or retcp)"),
    })
}

/// The first step whose window the BPF build computed differently from the simulator.
#[derive(Clone, Debug)]
pub struct KernelMismatch {
    /// Index of the record in the trace.
    pub index: usize,
    /// The record, as the simulator wrote it.
    pub record: Record,
    /// The window the BPF build returned.
    pub kernel: CWindow,
}

impl fmt::Display for KernelMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.record;
        write!(
            f,
            "record {} (flow {}, kind {}): simulator cwnd {} ssthresh {}, BPF build cwnd {} ssthresh {}",
            self.index, r.flow, r.kind, r.win_out.cwnd, r.win_out.ssthresh, self.kernel.cwnd, self.kernel.ssthresh
        )
    }
}

/// Replays a simulator-recorded trace of algorithm `name` (default parameters, as the simulator
/// ran it) into its BPF build in the kernel. Needs CAP_BPF (root). Errors are for what stopped
/// the replay (loading, a refused record); the inner result says whether every window matched.
pub fn replay_in_kernel(name: &str, build: KernelBuild, trace: &[Record]) -> Result<Result<ReplayStats, KernelMismatch>> {
    let open = ObjectBuilder::default().open_memory(object_bytes(name, build)?).with_context(|| format!("opening {name}'s replay program"))?;
    let obj = open.load().with_context(|| format!("loading {name}'s replay program (verifier)"))?;
    let prog_name = format!("{name}_replay");
    let prog = obj.progs_mut().find(|p| p.name() == prog_name.as_str()).with_context(|| format!("no program {prog_name} in the object"))?;
    let mut st = ReplayStats::default();
    let mut buf = [0u8; std::mem::size_of::<Record>()];
    for (index, r) in trace.iter().enumerate() {
        if r.flow >= FLOWS {
            bail!("record {index}: flow {} beyond the {FLOWS} flows a replay holds", r.flow);
        }
        // SAFETY: `Record` is repr(C) plain data of exactly `buf`'s size (struct scc_record).
        unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast::<Record>(), *r) };
        let out = prog
            .test_run(ProgramInput { context_in: Some(&mut buf), ..ProgramInput::default() })
            .with_context(|| format!("record {index}: BPF_PROG_TEST_RUN"))?;
        if out.return_value != 0 {
            bail!("record {index}: the replay program refused it (code {})", out.return_value);
        }
        // SAFETY: as above; the kernel copied the context back with `out` filled in.
        let done = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast::<Record>()) };
        match r.kind {
            REC_INIT => {
                st.flows += 1;
                continue;
            }
            REC_ACK => {
                st.acks += 1;
                st.marked += (r.sig.ce > 0 || r.sig.ece != 0) as u64;
                st.in_recovery += r.sig.in_recovery as u64;
            }
            REC_EVENT => {
                st.losses += (r.event == SCC_LOSS) as u64;
                st.timeouts += (r.event == SCC_TIMEOUT) as u64;
            }
            _ => {}
        }
        if (done.win_out.cwnd, done.win_out.ssthresh) != (r.win_out.cwnd, r.win_out.ssthresh) {
            return Ok(Err(KernelMismatch { index, record: *r, kernel: done.win_out }));
        }
    }
    Ok(Ok(st))
}
