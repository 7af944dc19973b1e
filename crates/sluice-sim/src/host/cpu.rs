//! A host's CPU: cores that run the stack's and the application's work one job at a time, in
//! arrival order. A packet the host receives is a job on the core its flow hashes to (receive-side
//! scaling); what the packet makes the host do (replies, bytes for the application, a closed
//! connection) happens when the job ends, so a busy core delays it and a saturated one limits the
//! requests a host serves. Each job's cycles are the sum of the operations it took, from a cost
//! table; the outputs break each core's cycles down by operation.

use crate::ids::{FlowId, HostId};
use crate::context::{Cx, Event};
use crate::time::Time;
use crate::transport::{Io, Work};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `[cpu]`: which hosts have a modelled CPU, their cores and clock, and what each operation costs.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CpuConfig {
    /// Hosts whose CPU is modelled (the others process packets in no time).
    pub hosts: Vec<usize>,
    /// Cores per modelled host.
    pub cores: u32,
    /// Clock rate in GHz: cycles per nanosecond.
    pub ghz: f64,
    /// Cycles per operation.
    pub costs: CpuCosts,
}

impl Default for CpuConfig {
    fn default() -> Self {
        CpuConfig { hosts: Vec::new(), cores: 1, ghz: 2.4, costs: CpuCosts::default() }
    }
}

/// Cycles each operation costs a core. The defaults are a kernel-bypass stack's (mTCP on a
/// 2.4 GHz Xeon) split as AccelTCP reports it for one 64-byte request per connection: connection
/// setup and teardown together are about 60% of the cycles (Moon et al., NSDI 2020, section 2.1);
/// `docs/acceltcp.md` gives the derivation.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CpuCosts {
    /// A SYN: the half-open connection and the SYN-ACK.
    pub setup: u64,
    /// The handshake's ACK: the full TCB and `accept()`.
    pub accept: u64,
    /// The handshake's ACK at a host with lazy TCBs: a quasi-TCB only (the full one costs
    /// `accept` if a second request comes).
    pub quasi_tcb: u64,
    /// Receive processing of any packet (driver, IP, TCP input).
    pub rx_packet: u64,
    /// Transmit processing of any packet the host sends.
    pub tx_packet: u64,
    /// Copying one payload byte between the stack and the application.
    pub per_byte: f64,
    /// The application's own work on a request, with its event and socket calls.
    pub request: u64,
    /// Closing: the FIN exchange and destroying the TCB.
    pub teardown: u64,
    /// A connection timer firing (delayed ACK, FIN retransmission).
    pub timer: u64,
    /// Handing a closing connection to the NIC (teardown offload) instead of closing it.
    pub handover: u64,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            setup: 1_700,
            accept: 1_300,
            quasi_tcb: 430,
            rx_packet: 450,
            tx_packet: 400,
            per_byte: 0.25,
            request: 2_200,
            teardown: 2_600,
            timer: 300,
            handover: 250,
        }
    }
}

/// The operations a core's cycles are broken down by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Connection setup (SYN, half-open state, SYN-ACK).
    Setup,
    /// TCB creation and `accept()`.
    Accept,
    /// Per-packet receive processing.
    Rx,
    /// Per-packet transmit processing.
    Tx,
    /// Payload copies.
    Copy,
    /// The application's work.
    App,
    /// Connection teardown.
    Teardown,
    /// Timers.
    Timer,
    /// Handing connections to the NIC.
    Handover,
}

impl Op {
    /// Every operation, in output order.
    pub const ALL: [Op; 9] =
        [Op::Setup, Op::Accept, Op::Rx, Op::Tx, Op::Copy, Op::App, Op::Teardown, Op::Timer, Op::Handover];

    /// The name the outputs use.
    pub fn name(self) -> &'static str {
        match self {
            Op::Setup => "setup",
            Op::Accept => "accept",
            Op::Rx => "rx",
            Op::Tx => "tx",
            Op::Copy => "copy",
            Op::App => "app",
            Op::Teardown => "teardown",
            Op::Timer => "timer",
            Op::Handover => "handover",
        }
    }
}

/// What one job took, by operation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cycles(pub [u64; Op::ALL.len()]);

impl Cycles {
    /// Adds `n` cycles of `op`.
    pub fn add(&mut self, op: Op, n: u64) {
        self.0[op as usize] += n;
    }
    /// The total.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

impl CpuCosts {
    /// The cycles of handling one received packet (`rx`), or a timer, that caused `io`; a close
    /// handed to the NIC (`hand_over`) costs a handover (and no teardown later, if the NIC takes it).
    pub fn of(&self, rx: bool, io: &Io, hand_over: bool) -> Cycles {
        let mut c = Cycles::default();
        let Work { setup, accepted, quasi_tcb, answered, teardown } = io.work;
        if rx {
            c.add(Op::Rx, self.rx_packet);
        } else {
            c.add(Op::Timer, self.timer);
        }
        c.add(Op::Tx, self.tx_packet * io.replies.len() as u64);
        if let Some((_, n)) = io.delivered {
            c.add(Op::Copy, (n as f64 * self.per_byte).round() as u64);
        }
        if setup {
            c.add(Op::Setup, self.setup);
        }
        if accepted {
            c.add(Op::Accept, self.accept);
        }
        if quasi_tcb {
            c.add(Op::Accept, self.quasi_tcb);
        }
        if answered {
            c.add(Op::App, self.request);
            c.add(Op::Handover, if hand_over { self.handover } else { 0 });
        }
        if teardown {
            c.add(Op::Teardown, self.teardown);
        }
        c
    }
}

impl CpuCosts {
    /// The extra cycles of a proxy relaying `bytes` it just read on to the backend in `segments`
    /// segments; `connects` when those bytes completed the header, so the proxy also parses it
    /// (the application's request work) and connects to the backend.
    pub fn relay(&self, bytes: u64, segments: u64, connects: bool) -> Cycles {
        let mut c = Cycles::default();
        c.add(Op::Copy, (bytes as f64 * self.per_byte).round() as u64);
        c.add(Op::Tx, self.tx_packet * segments);
        if connects {
            c.add(Op::App, self.request);
            c.add(Op::Setup, self.setup);
        }
        c
    }
}

impl Cycles {
    /// Adds every operation's cycles of `other`.
    pub fn merge(&mut self, other: &Cycles) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

/// A job waiting for or running on a core: the flow and what its packet made the host do.
pub struct Job {
    /// The flow the packet or timer belongs to.
    pub flow: FlowId,
    /// The outcome, carried out when the job ends.
    pub io: Io,
    cycles: u64,
}

/// One core: a FIFO of jobs, the one at the head running.
#[derive(Default)]
struct Core {
    jobs: VecDeque<Job>,
    busy: Cycles,
}

/// A host's CPU.
pub struct Cpu {
    host: HostId,
    ghz: f64,
    /// Cycles per operation, as configured.
    pub costs: CpuCosts,
    cores: Vec<Core>,
    /// Jobs completed.
    pub jobs_done: u64,
}

impl Cpu {
    /// The CPU of host `host`.
    pub fn new(host: HostId, cfg: &CpuConfig) -> Cpu {
        let cores = (0..cfg.cores).map(|_| Core::default()).collect();
        Cpu { host, ghz: cfg.ghz, costs: cfg.costs, cores, jobs_done: 0 }
    }

    /// The core a flow's packets are processed on (receive-side scaling by flow).
    pub fn core_of(&self, flow: FlowId) -> usize {
        let h = (flow.0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        (h % self.cores.len() as u64) as usize
    }

    /// Queues a job of `cycles` for `flow` on its core; starts it if the core is idle.
    pub fn submit(&mut self, flow: FlowId, io: Io, cycles: Cycles, cx: &mut Cx) {
        let core = self.core_of(flow);
        let c = &mut self.cores[core];
        for (i, n) in cycles.0.iter().enumerate() {
            c.busy.0[i] += n;
        }
        c.jobs.push_back(Job { flow, io, cycles: cycles.total() });
        if c.jobs.len() == 1 {
            self.start_head(core, cx);
        }
    }

    fn start_head(&self, core: usize, cx: &mut Cx) {
        if let Some(job) = self.cores[core].jobs.front() {
            let ns = (job.cycles as f64 / self.ghz).ceil() as u64;
            cx.schedule(cx.now + Time::from_ns(ns), Event::CpuDone(self.host, core as u16));
        }
    }

    /// The job at the head of `core` ended: returns it and starts the next.
    pub fn finish(&mut self, core: usize, cx: &mut Cx) -> Option<Job> {
        let job = self.cores[core].jobs.pop_front()?;
        self.jobs_done += 1;
        self.start_head(core, cx);
        Some(job)
    }

    /// Cycles each core spent (or has queued), by operation.
    pub fn breakdown(&self) -> impl Iterator<Item = &Cycles> + '_ {
        self.cores.iter().map(|c| &c.busy)
    }

    /// Jobs waiting or running, on every core.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> + '_ {
        self.cores.iter().flat_map(|c| c.jobs.iter())
    }

    /// The clock rate in cycles per nanosecond.
    pub fn ghz(&self) -> f64 {
        self.ghz
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Bench;

    #[test]
    fn jobs_on_one_core_run_back_to_back_and_in_order() {
        let cfg = CpuConfig { hosts: vec![0], cores: 1, ghz: 2.0, costs: CpuCosts::default() };
        let mut cpu = Cpu::new(HostId(0), &cfg);
        let mut b = Bench::new();
        let mut c = Cycles::default();
        c.add(Op::App, 2_000); // 1 us at 2 GHz
        for flow in [7, 8, 9] {
            cpu.submit(FlowId(flow), Io::default(), c, &mut b.cx());
        }
        let mut done = Vec::new();
        while let Some((t, ev)) = b.q.pop() {
            let Event::CpuDone(HostId(0), core) = ev else { panic!("{ev:?}") };
            b.now = t;
            let job = cpu.finish(core as usize, &mut b.cx()).unwrap();
            done.push((t, job.flow.0));
        }
        let us = |n| Time::from_us(n);
        assert_eq!(done, vec![(us(1), 7), (us(2), 8), (us(3), 9)]);
        assert_eq!(cpu.breakdown().next().unwrap().0[Op::App as usize], 6_000);
    }

    #[test]
    fn costs_follow_the_work_a_packet_caused() {
        let costs = CpuCosts::default();
        let mut io = Io::default();
        io.work.answered = true;
        io.delivered = Some((0, 100));
        io.replies.push(Default::default());
        let c = costs.of(true, &io, true);
        assert_eq!(c.0[Op::Rx as usize], costs.rx_packet);
        assert_eq!(c.0[Op::Tx as usize], costs.tx_packet);
        assert_eq!(c.0[Op::Copy as usize], (100.0 * costs.per_byte).round() as u64);
        assert_eq!(c.0[Op::App as usize] + c.0[Op::Handover as usize], costs.request + costs.handover);
        assert_eq!(c.0[Op::Teardown as usize], 0);
    }
}
