//! The portable algorithms: one C source per algorithm (`portable/*.c`, the form of
//! `docs/writing-a-cc.md`), compiled by build.rs into the simulator and by sluice-host into BPF
//! `struct_ops`. This module maps `AckSignals`/`Window` onto the C signal block and window, and
//! replays a kernel-recorded trace into the simulator build for the differential test.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, IntReading, Window};
use crate::time::{Bytes, Time};
use serde::Deserialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The C signal block, `struct scc_signals`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    /// Bytes newly acknowledged, cumulatively or by SACK.
    pub acked: u64,
    /// Of those, bytes echoed as CE-marked.
    pub ce: u64,
    /// First unacknowledged sequence number after this ACK, modulo 2^32.
    pub snd_una: u32,
    /// Next sequence number to send, modulo 2^32.
    pub snd_nxt: u32,
    /// RTT sample in microseconds; 0: none.
    pub rtt_us: u32,
    /// Queue bytes the TCP-INT echo reported, when `int_is_queue`.
    pub int_queue: u32,
    /// The ACK carried ECE.
    pub ece: u8,
    /// A circuit is up on the path (ECE where there is no circuit network).
    pub circuit: u8,
    /// The sender is in fast recovery.
    pub in_recovery: u8,
    /// The ACK brought a TCP-INT echo.
    pub int_echo: u8,
    /// That echo reports a queue depth.
    pub int_is_queue: u8,
    /// The window, not the application, limited sending.
    pub cwnd_limited: u8,
    /// Padding to the C layout.
    pub pad: [u8; 2],
}

/// The C window, `struct scc_window`, in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CWindow {
    /// Congestion window.
    pub cwnd: u64,
    /// Slow-start threshold; `u64::MAX` until set.
    pub ssthresh: u64,
    /// Maximum segment size.
    pub mss: u64,
}

/// One step the kernel recorded, `struct scc_record`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Record {
    /// The connection, numbered as they start.
    pub flow: u64,
    /// `REC_INIT`, `REC_ACK` or `REC_EVENT`.
    pub kind: u32,
    /// `enum scc_event` of an event.
    pub event: u32,
    /// The signal block the algorithm saw.
    pub sig: Signals,
    /// The window before the call.
    pub win_in: CWindow,
    /// The window the algorithm returned.
    pub win_out: CWindow,
}

/// A flow started: the algorithm's state was initialised.
pub const REC_INIT: u32 = 0;
/// An ACK went through `on_ack`.
pub const REC_ACK: u32 = 1;
/// A congestion event went through `on_event`.
pub const REC_EVENT: u32 = 2;

const SCC_LOSS: u32 = 1;
const SCC_TIMEOUT: u32 = 2;
const SCC_ECN: u32 = 3;
const SCC_ECN_CLASSIC: u32 = 1;
const SCC_ECN_PER_PACKET: u32 = 2;
const SCC_NEEDS_INT: u32 = 4;

/// Room for any algorithm's state; each C file's `<name>_state_size` is checked against it.
type State = [u64; 16];

/// The entry points of one compiled algorithm, with parameters of type `P`.
struct Entry<P: 'static> {
    name: &'static str,
    init: unsafe extern "C" fn(*mut State, *const P),
    on_ack: unsafe extern "C" fn(*mut State, *const P, *const Signals, *mut CWindow),
    on_event: unsafe extern "C" fn(*mut State, *const P, u32, *mut CWindow),
    vars: unsafe extern "C" fn(*const State, *mut CVar) -> u32,
    /// Reads a parameter table into the C parameters, with the registry's checks.
    parse: fn(&toml::Table) -> Result<P, String>,
    flags: &'static u32,
    state_size: &'static u32,
}

/// `struct dctcp_params`: gains in 1/65536.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DctcpParams {
    g: u32,
    alpha_init: u32,
}

/// `struct ecn_int_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EcnIntParams {
    dctcp: DctcpParams,
    g_int: u32,
    qdepth_target: u32,
}

/// `struct retcp_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RetcpParams {
    alpha: u32,
}

/// `struct newreno_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NewrenoParams {
    ecn: u32,
}

// The symbols each build exports (see build.rs); written out so the FFI reads plainly.
#[link(name = "sluice_cc", kind = "static")]
extern "C" {
    fn newreno_init(s: *mut State, p: *const NewrenoParams);
    fn newreno_on_ack(s: *mut State, p: *const NewrenoParams, sig: *const Signals, w: *mut CWindow);
    fn newreno_on_event(s: *mut State, p: *const NewrenoParams, ev: u32, w: *mut CWindow);
    fn newreno_vars(s: *const State, v: *mut CVar) -> u32;
    // The C defaults, which the test of c_params holds the Rust parsers' defaults to.
    #[cfg(test)]
    static newreno_defaults: NewrenoParams;
    static newreno_flags: u32;
    static newreno_state_size: u32;
    fn dctcp_init(s: *mut State, p: *const DctcpParams);
    fn dctcp_on_ack(s: *mut State, p: *const DctcpParams, sig: *const Signals, w: *mut CWindow);
    fn dctcp_on_event(s: *mut State, p: *const DctcpParams, ev: u32, w: *mut CWindow);
    fn dctcp_vars(s: *const State, v: *mut CVar) -> u32;
    // The C defaults, which the test of c_params holds the Rust parsers' defaults to.
    #[cfg(test)]
    static dctcp_defaults: DctcpParams;
    static dctcp_flags: u32;
    static dctcp_state_size: u32;
    fn ecn_int_init(s: *mut State, p: *const EcnIntParams);
    fn ecn_int_on_ack(s: *mut State, p: *const EcnIntParams, sig: *const Signals, w: *mut CWindow);
    fn ecn_int_on_event(s: *mut State, p: *const EcnIntParams, ev: u32, w: *mut CWindow);
    fn ecn_int_vars(s: *const State, v: *mut CVar) -> u32;
    // The C defaults, which the test of c_params holds the Rust parsers' defaults to.
    #[cfg(test)]
    static ecn_int_defaults: EcnIntParams;
    static ecn_int_flags: u32;
    static ecn_int_state_size: u32;
    fn retcp_init(s: *mut State, p: *const RetcpParams);
    fn retcp_on_ack(s: *mut State, p: *const RetcpParams, sig: *const Signals, w: *mut CWindow);
    fn retcp_on_event(s: *mut State, p: *const RetcpParams, ev: u32, w: *mut CWindow);
    fn retcp_vars(s: *const State, v: *mut CVar) -> u32;
    // The C defaults, which the test of c_params holds the Rust parsers' defaults to.
    #[cfg(test)]
    static retcp_defaults: RetcpParams;
    static retcp_flags: u32;
    static retcp_state_size: u32;
}

#[link(name = "sluice_cc_mutant", kind = "static")]
extern "C" {
    fn mutant_newreno_init(s: *mut State, p: *const NewrenoParams);
    fn mutant_newreno_on_ack(s: *mut State, p: *const NewrenoParams, sig: *const Signals, w: *mut CWindow);
    fn mutant_newreno_on_event(s: *mut State, p: *const NewrenoParams, ev: u32, w: *mut CWindow);
    fn mutant_dctcp_init(s: *mut State, p: *const DctcpParams);
    fn mutant_dctcp_on_ack(s: *mut State, p: *const DctcpParams, sig: *const Signals, w: *mut CWindow);
    fn mutant_dctcp_on_event(s: *mut State, p: *const DctcpParams, ev: u32, w: *mut CWindow);
    fn mutant_ecn_int_init(s: *mut State, p: *const EcnIntParams);
    fn mutant_ecn_int_on_ack(s: *mut State, p: *const EcnIntParams, sig: *const Signals, w: *mut CWindow);
    fn mutant_ecn_int_on_event(s: *mut State, p: *const EcnIntParams, ev: u32, w: *mut CWindow);
    fn mutant_retcp_init(s: *mut State, p: *const RetcpParams);
    fn mutant_retcp_on_ack(s: *mut State, p: *const RetcpParams, sig: *const Signals, w: *mut CWindow);
    fn mutant_retcp_on_event(s: *mut State, p: *const RetcpParams, ev: u32, w: *mut CWindow);
}

/// `struct scc_var`: a named state variable, `value / one`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CVar {
    name: *const std::ffi::c_char,
    value: u64,
    one: u64,
}

/// `SCC_VARS_MAX`.
const VARS_MAX: usize = 4;

/// Which compilation of the sources to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// The simulator's build, the one the registry uses.
    Standard,
    /// The same sources with `SCC_LOSS_SHIFT=2` (a loss quarters the window): the differential
    /// test's negative control.
    Mutant,
}

macro_rules! entry {
    ($name:literal, $init:ident, $ack:ident, $ev:ident, $vars:ident, $parse:ident, $flags:ident, $size:ident) => {
        // SAFETY: the statics are immutable C constants defined by build.rs's objects.
        Entry { name: $name, init: $init, on_ack: $ack, on_event: $ev, vars: $vars, parse: $parse, flags: unsafe { &$flags }, state_size: unsafe { &$size } }
    };
}

fn newreno(b: Build) -> Entry<NewrenoParams> {
    let e = entry!("newreno", newreno_init, newreno_on_ack, newreno_on_event, newreno_vars, newreno_params, newreno_flags, newreno_state_size);
    match b {
        Build::Standard => e,
        Build::Mutant => Entry { init: mutant_newreno_init, on_ack: mutant_newreno_on_ack, on_event: mutant_newreno_on_event, ..e },
    }
}

fn dctcp(b: Build) -> Entry<DctcpParams> {
    let e = entry!("dctcp", dctcp_init, dctcp_on_ack, dctcp_on_event, dctcp_vars, dctcp_params, dctcp_flags, dctcp_state_size);
    match b {
        Build::Standard => e,
        Build::Mutant => Entry { init: mutant_dctcp_init, on_ack: mutant_dctcp_on_ack, on_event: mutant_dctcp_on_event, ..e },
    }
}

fn ecn_int(b: Build) -> Entry<EcnIntParams> {
    let e = entry!("ecn_int", ecn_int_init, ecn_int_on_ack, ecn_int_on_event, ecn_int_vars, ecn_int_params, ecn_int_flags, ecn_int_state_size);
    match b {
        Build::Standard => e,
        Build::Mutant => Entry { init: mutant_ecn_int_init, on_ack: mutant_ecn_int_on_ack, on_event: mutant_ecn_int_on_event, ..e },
    }
}

fn retcp(b: Build) -> Entry<RetcpParams> {
    let e = entry!("retcp", retcp_init, retcp_on_ack, retcp_on_event, retcp_vars, retcp_params, retcp_flags, retcp_state_size);
    match b {
        Build::Standard => e,
        Build::Mutant => Entry { init: mutant_retcp_init, on_ack: mutant_retcp_on_ack, on_event: mutant_retcp_on_event, ..e },
    }
}

/// One flow's instance of a portable algorithm.
pub struct Portable<P: 'static> {
    entry: Entry<P>,
    params: P,
    state: Box<State>,
    ecn: EcnMode,
    /// Where its steps go while a [`record_steps`] call is running, and its flow number there.
    trace: Option<(Arc<Mutex<Vec<Record>>>, u64)>,
}

/// The steps of the instances created while [`record_steps`] runs on this thread.
struct Recorder {
    sink: Arc<Mutex<Vec<Record>>>,
    flows: u64,
}

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Runs `f` (a simulation, say) and returns, besides its result, every step the portable
/// algorithms created meanwhile on this thread took, as the kernel glue records them: an init
/// record per instance (flows numbered as they start), then each ACK's signals and each event,
/// with the window before and after. This is the simulator's side of the converse differential
/// test: the trace replays into the BPF build of the same sources.
pub fn record_steps<R>(f: impl FnOnce() -> R) -> (R, Vec<Record>) {
    let sink = Arc::new(Mutex::new(Vec::new()));
    let outer = RECORDER.with(|r| r.borrow_mut().replace(Recorder { sink: sink.clone(), flows: 0 }));
    let out = f();
    RECORDER.with(|r| *r.borrow_mut() = outer);
    let trace = std::mem::take(&mut *sink.lock().unwrap_or_else(|e| e.into_inner()));
    (out, trace)
}

impl<P: Copy + Send + Sync + 'static> Portable<P> {
    fn new(entry: Entry<P>, params: P, ecn: EcnMode) -> Self {
        assert!(*entry.state_size as usize <= std::mem::size_of::<State>(), "{}: state larger than the adapter's room", entry.name);
        let mut state = Box::new([0u64; 16]);
        // SAFETY: `state` has room for the C state (checked above); `params` has the C layout.
        unsafe { (entry.init)(&mut *state, &params) };
        let trace = RECORDER.with(|r| {
            r.borrow_mut().as_mut().map(|rec| {
                rec.flows += 1;
                (rec.sink.clone(), rec.flows - 1)
            })
        });
        let cc = Portable { entry, params, state, ecn, trace };
        cc.record(REC_INIT, 0, None, &CWindow::default(), &CWindow::default());
        cc
    }

    fn step_ack(&mut self, sig: &Signals, w: &mut CWindow) {
        let before = *w;
        // SAFETY: as in `new`; the pointers are valid for the call.
        unsafe { (self.entry.on_ack)(&mut *self.state, &self.params, sig, w) }
        self.record(REC_ACK, 0, Some(sig), &before, w);
    }

    fn step_event(&mut self, ev: u32, w: &mut CWindow) {
        let before = *w;
        // SAFETY: as in `new`.
        unsafe { (self.entry.on_event)(&mut *self.state, &self.params, ev, w) }
        self.record(REC_EVENT, ev, None, &before, w);
    }

    #[inline]
    fn record(&self, kind: u32, event: u32, sig: Option<&Signals>, win_in: &CWindow, win_out: &CWindow) {
        if let Some((sink, flow)) = &self.trace {
            let r = Record { flow: *flow, kind, event, sig: sig.copied().unwrap_or_default(), win_in: *win_in, win_out: *win_out };
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        }
    }
}

/// The signal block of one simulated ACK (the mapping documented in docs/writing-a-cc.md).
pub fn signals(ack: &AckSignals) -> Signals {
    let (int_echo, int_is_queue, int_queue) = match ack.int.map(|e| e.reading) {
        Some(IntReading::QueueBytes(b)) => (1, 1, b.min(u32::MAX as u64) as u32),
        Some(IntReading::Utilization(_)) => (1, 0, 0),
        None => (0, 0, 0),
    };
    Signals {
        acked: ack.acked_bytes,
        ce: ack.ce_bytes,
        snd_una: ack.snd_una as u32,
        snd_nxt: ack.snd_nxt as u32,
        rtt_us: ack.rtt.map_or(0, |t| (t.0 / 1_000_000).clamp(1, u32::MAX as u64) as u32),
        int_queue,
        ece: ack.ece as u8,
        // The simulator has no circuit network yet: circuit state rides on ECE, as Etalon's ToRs mark it.
        circuit: ack.ece as u8,
        in_recovery: ack.in_recovery as u8,
        int_echo,
        int_is_queue,
        // The transport does not tell application-limited windows apart yet: every one may grow.
        cwnd_limited: 1,
        pad: [0; 2],
    }
}

fn cwindow(w: &Window) -> CWindow {
    CWindow { cwnd: w.cwnd, ssthresh: w.ssthresh, mss: w.mss }
}

impl<P: Copy + Send + Sync + 'static> CongestionControl for Portable<P> {
    fn name(&self) -> &'static str {
        self.entry.name
    }

    fn set_params(&mut self, params: &toml::Table) -> Result<(), String> {
        self.params = (self.entry.parse)(params)?;
        Ok(())
    }

    fn ecn_mode(&self) -> EcnMode {
        self.ecn
    }

    fn needs_int(&self) -> bool {
        *self.entry.flags & SCC_NEEDS_INT != 0
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let mut w = cwindow(win);
        self.step_ack(&signals(ack), &mut w);
        (win.cwnd, win.ssthresh) = (w.cwnd, w.ssthresh);
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        let mut v = [CVar { name: std::ptr::null(), value: 0, one: 1 }; VARS_MAX];
        // SAFETY: as in `new`; `v` has room for SCC_VARS_MAX variables.
        let n = unsafe { (self.entry.vars)(&*self.state, v.as_mut_ptr()) } as usize;
        v[..n.min(VARS_MAX)]
            .iter()
            .map(|x| {
                // SAFETY: the names are string literals in the C objects, alive for the program's life.
                let name = unsafe { std::ffi::CStr::from_ptr(x.name) }.to_str().unwrap_or("?");
                (name, x.value as f64 / x.one.max(1) as f64)
            })
            .collect()
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        let ev = match ev {
            CongestionEvent::FastRetransmit => SCC_LOSS,
            CongestionEvent::Timeout => SCC_TIMEOUT,
            CongestionEvent::Ecn => SCC_ECN,
        };
        let mut w = cwindow(win);
        self.step_event(ev, &mut w);
        (win.cwnd, win.ssthresh) = (w.cwnd, w.ssthresh);
    }
}

/// The ECN mode an algorithm's flags ask for.
fn ecn_of(flags: u32) -> EcnMode {
    if flags & SCC_ECN_PER_PACKET != 0 {
        EcnMode::PerPacket
    } else if flags & SCC_ECN_CLASSIC != 0 {
        EcnMode::Classic
    } else {
        EcnMode::Off
    }
}

/// A factory of instances with `params`; the ECN mode is the one the C file declares unless given.
fn boxed<P: Copy + Send + Sync + 'static>(entry: fn(Build) -> Entry<P>, params: P, ecn: Option<EcnMode>) -> CcFactory {
    let ecn = ecn.unwrap_or_else(|| ecn_of(*entry(Build::Standard).flags));
    Arc::new(move |_: &FlowContext| Box::new(Portable::new(entry(Build::Standard), params, ecn)) as Box<dyn CongestionControl>)
}

/// A gain or fraction in [lo, 1] as fixed point (65536 = 1), or the registry's error message.
fn fixed(key: &str, v: f64, open_at_zero: bool) -> Result<u32, String> {
    let range = if open_at_zero { "(0, 1]" } else { "[0, 1]" };
    let ok = if open_at_zero { v > 0.0 && v <= 1.0 } else { (0.0..=1.0).contains(&v) };
    if !ok {
        return Err(format!("{key}: expected a number in {range}, got {v}"));
    }
    let q = (v * 65536.0).round() as u32;
    if open_at_zero && q == 0 {
        return Err(format!("{key}: expected a number in {range} of at least 2^-16 (the fixed-point step), got {v}"));
    }
    Ok(q)
}

pub(super) const NEWRENO_PARAMS: &[(&str, &str)] =
    &[("ecn", "false  # classic ECN (RFC 3168): an ECE halves the window like a loss, once per window")];

fn newreno_params(params: &toml::Table) -> Result<NewrenoParams, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct P {
        #[serde(default)]
        ecn: bool,
    }
    let p: P = parse_params(params)?;
    Ok(NewrenoParams { ecn: p.ecn as u32 })
}

pub(super) fn newreno_factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p = newreno_params(params)?;
    let ecn = if p.ecn != 0 { EcnMode::Classic } else { EcnMode::Off };
    Ok(boxed(newreno, p, Some(ecn)))
}

pub(super) const DCTCP_PARAMS: &[(&str, &str)] = &[
    ("g", "0.0625  # gain of the alpha moving average (1/16), in (0, 1]"),
    ("alpha_init", "1.0  # initial alpha, the estimated marked fraction, in [0, 1]"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct DctcpToml {
    g: f64,
    alpha_init: f64,
}

impl Default for DctcpToml {
    fn default() -> Self {
        DctcpToml { g: 1.0 / 16.0, alpha_init: 1.0 }
    }
}

impl DctcpToml {
    fn fixed(&self) -> Result<DctcpParams, String> {
        Ok(DctcpParams { g: fixed("g", self.g, true)?, alpha_init: fixed("alpha_init", self.alpha_init, false)? })
    }
}

fn dctcp_params(params: &toml::Table) -> Result<DctcpParams, String> {
    parse_params::<DctcpToml>(params)?.fixed()
}

pub(super) fn dctcp_factory(params: &toml::Table) -> Result<CcFactory, String> {
    Ok(boxed(dctcp, dctcp_params(params)?, None))
}

pub(super) const ECN_INT_PARAMS: &[(&str, &str)] = &[
    ("g", "0.0625  # DCTCP's alpha gain, in (0, 1]"),
    ("alpha_init", "1.0  # DCTCP's initial alpha, in [0, 1]"),
    ("g_int", "0.125  # gain of the queue-depth moving average, in (0, 1]"),
    ("qdepth_target", "\"32KB\"  # smoothed queue depth at which alpha_int reaches 1"),
];

fn ecn_int_params(params: &toml::Table) -> Result<EcnIntParams, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct P {
        g: f64,
        alpha_init: f64,
        g_int: f64,
        qdepth_target: Bytes,
    }
    impl Default for P {
        fn default() -> Self {
            P { g: 1.0 / 16.0, alpha_init: 1.0, g_int: 0.125, qdepth_target: Bytes(32_000) }
        }
    }
    let p: P = parse_params(params)?;
    let dctcp = DctcpToml { g: p.g, alpha_init: p.alpha_init }.fixed()?;
    let g_int = fixed("g_int", p.g_int, true)?;
    if p.qdepth_target.0 == 0 || p.qdepth_target.0 > u32::MAX as u64 {
        return Err(format!("qdepth_target: expected a positive size below 4GB like \"32KB\", got {} bytes", p.qdepth_target.0));
    }
    Ok(EcnIntParams { dctcp, g_int, qdepth_target: p.qdepth_target.0 as u32 })
}

pub(super) fn ecn_int_factory(params: &toml::Table) -> Result<CcFactory, String> {
    Ok(boxed(ecn_int, ecn_int_params(params)?, None))
}

pub(super) const RETCP_PARAMS: &[(&str, &str)] =
    &[("alpha", "2  # the window multiplier when the circuit signal (ECE) turns on, divisor when it turns off; an integer >= 1")];

fn retcp_params(params: &toml::Table) -> Result<RetcpParams, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct P {
        alpha: i64,
    }
    impl Default for P {
        fn default() -> Self {
            P { alpha: 2 }
        }
    }
    let p: P = parse_params(params)?;
    if !(1..=1024).contains(&p.alpha) {
        return Err(format!("alpha: expected an integer in [1, 1024], got {}", p.alpha));
    }
    Ok(RetcpParams { alpha: p.alpha as u32 })
}

pub(super) fn retcp_factory(params: &toml::Table) -> Result<CcFactory, String> {
    Ok(boxed(retcp, retcp_params(params)?, None))
}

/// The portable algorithms, in the order of their ids in the kernel's class table (1, 2, ...).
pub const PORTABLE: [&str; 4] = ["newreno", "dctcp", "ecn_int", "retcp"];

/// The algorithms of the registry that Linux builds in and a host runs under the same name
/// where its kernel has them.
pub const KERNEL_BUILT_IN: [&str; 3] = ["reno", "cubic", "bbr"];

/// A portable algorithm's parameters as its C `struct <name>_params`, the bytes the kernel build
/// reads from the agent's class table: parsed and checked as the simulator's registry does, so a
/// class's `params` mean the same on both sides.
pub fn c_params(name: &str, params: &toml::Table) -> Result<Vec<u8>, String> {
    fn bytes<P: Copy>(p: P) -> Vec<u8> {
        // SAFETY: the parameter structs are repr(C) plain integers without padding.
        unsafe { std::slice::from_raw_parts((&p as *const P).cast::<u8>(), std::mem::size_of::<P>()) }.to_vec()
    }
    match name {
        "newreno" => newreno_params(params).map(bytes),
        "dctcp" => dctcp_params(params).map(bytes),
        "ecn_int" => ecn_int_params(params).map(bytes),
        "retcp" => retcp_params(params).map(bytes),
        other => Err(format!("no portable algorithm named {other:?} (expected newreno, dctcp, ecn_int or retcp)")),
    }
}

/// What a replay went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Flows (init records).
    pub flows: u64,
    /// ACKs replayed.
    pub acks: u64,
    /// Of those, ACKs with CE-marked bytes or ECE.
    pub marked: u64,
    /// ACKs in fast recovery.
    pub in_recovery: u64,
    /// Loss events (fast retransmit) replayed.
    pub losses: u64,
    /// Timeouts replayed.
    pub timeouts: u64,
    /// Losses at a window above twice the floor of two segments, where halving and quartering
    /// give different windows: the losses that tell the standard build from the mutant.
    pub decisive_losses: u64,
}

/// The first record whose window the simulator build computed differently.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// Index of the record in the trace.
    pub index: usize,
    /// The record.
    pub record: Record,
    /// The window the simulator build returned.
    pub sim: CWindow,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.record;
        write!(
            f,
            "record {} (flow {}, kind {}): kernel cwnd {} ssthresh {}, simulator build cwnd {} ssthresh {}",
            self.index, r.flow, r.kind, r.win_out.cwnd, r.win_out.ssthresh, self.sim.cwnd, self.sim.ssthresh
        )
    }
}

/// Replays a kernel-recorded trace of algorithm `name` (with its default parameters, as the
/// kernel ran it) into the simulator build: each flow's state starts at its init record and
/// evolves only through the replay; every ACK and event must return the recorded cwnd and ssthresh.
pub fn replay(name: &str, build: Build, trace: &[Record]) -> Result<Result<ReplayStats, Mismatch>, String> {
    replay_with(name, &toml::Table::new(), build, trace)
}

/// [`replay`] of a trace the kernel ran with a class's `params` (as a policy or scenario writes
/// them).
pub fn replay_with(name: &str, params: &toml::Table, build: Build, trace: &[Record]) -> Result<Result<ReplayStats, Mismatch>, String> {
    replay_changing(name, params, params, usize::MAX, build, trace)
}

/// [`replay`] of a trace whose class's parameters changed while it ran: `before` up to record
/// `at`, `after` from it on (the draft's parameters changed after setup, 7.2).
pub fn replay_changing(
    name: &str,
    before: &toml::Table,
    after: &toml::Table,
    at: usize,
    build: Build,
    trace: &[Record],
) -> Result<Result<ReplayStats, Mismatch>, String> {
    fn run<P: Copy + Send + Sync + 'static>(
        entry: fn(Build) -> Entry<P>,
        (before, after, at): (P, P, usize),
        build: Build,
        trace: &[Record],
    ) -> Result<Result<ReplayStats, Mismatch>, String> {
        let mut flows: HashMap<u64, Portable<P>> = HashMap::new();
        let mut st = ReplayStats::default();
        for (index, r) in trace.iter().enumerate() {
            if index == at {
                flows.values_mut().for_each(|cc| cc.params = after);
            }
            let params = if index < at { before } else { after };
            if r.kind == REC_INIT {
                flows.insert(r.flow, Portable::new(entry(build), params, EcnMode::Off));
                st.flows += 1;
                continue;
            }
            let cc = flows.get_mut(&r.flow).ok_or_else(|| format!("record {index}: flow {} has no init record", r.flow))?;
            let mut w = r.win_in;
            match r.kind {
                REC_ACK => {
                    cc.step_ack(&r.sig, &mut w);
                    st.acks += 1;
                    st.marked += (r.sig.ce > 0 || r.sig.ece != 0) as u64;
                    st.in_recovery += r.sig.in_recovery as u64;
                }
                REC_EVENT => {
                    cc.step_event(r.event, &mut w);
                    st.losses += (r.event == SCC_LOSS) as u64;
                    st.decisive_losses += (r.event == SCC_LOSS && r.win_in.cwnd >> 1 > 2 * r.win_in.mss) as u64;
                    st.timeouts += (r.event == SCC_TIMEOUT) as u64;
                }
                k => return Err(format!("record {index}: unknown kind {k}")),
            }
            if (w.cwnd, w.ssthresh) != (r.win_out.cwnd, r.win_out.ssthresh) {
                return Ok(Err(Mismatch { index, record: *r, sim: w }));
            }
        }
        Ok(Ok(st))
    }
    match name {
        "newreno" => run(newreno, (newreno_params(before)?, newreno_params(after)?, at), build, trace),
        "dctcp" => run(dctcp, (dctcp_params(before)?, dctcp_params(after)?, at), build, trace),
        "ecn_int" => run(ecn_int, (ecn_int_params(before)?, ecn_int_params(after)?, at), build, trace),
        "retcp" => run(retcp, (retcp_params(before)?, retcp_params(after)?, at), build, trace),
        other => Err(format!("no portable algorithm named {other:?} (expected newreno, dctcp, ecn_int or retcp)")),
    }
}

/// Where a one-flow trace's parameters changed from `before` to `after` (draft 7.2): the last
/// record `k` such that `before` up to it and `after` from it explain every step. `None` when
/// `before` alone explains the trace, or no single change does.
pub fn change_point(name: &str, before: &toml::Table, after: &toml::Table, build: Build, trace: &[Record]) -> Result<Option<usize>, String> {
    let Err(first) = replay_with(name, before, build, trace)? else { return Ok(None) };
    // The change took effect at or before the first record `before` cannot explain.
    for k in (0..=first.index).rev() {
        if replay_changing(name, before, after, k, build, trace)?.is_ok() {
            return Ok(Some(k));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::IntEcho;

    const MSS: u64 = 1000;

    fn ctx() -> FlowContext {
        FlowContext { mss: MSS, init_cwnd: 10 * MSS, link_rate: crate::time::Rate::gbps(10), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc }
    }

    fn build(name: &str, params: &str) -> Box<dyn CongestionControl> {
        super::super::factory(name, &toml::from_str(params).unwrap()).unwrap()(&ctx())
    }

    fn win(cwnd: u64, ssthresh: u64) -> Window {
        Window { cwnd, ssthresh, pacing_rate: None, mss: MSS }
    }

    fn ack(una: u64, ece: bool) -> AckSignals {
        AckSignals { acked_bytes: MSS, ce_bytes: if ece { MSS } else { 0 }, ece, snd_una: una, snd_nxt: una + 20 * MSS, ..Default::default() }
    }

    #[test]
    fn kernel_parameters_are_the_registrys_own() {
        fn defaults<P: Copy>(p: &P) -> Vec<u8> {
            // SAFETY: as in c_params: repr(C) integers.
            unsafe { std::slice::from_raw_parts((p as *const P).cast::<u8>(), std::mem::size_of::<P>()) }.to_vec()
        }
        let none = toml::Table::new();
        // SAFETY: the C files' immutable defaults.
        let (n, d, e, r) = unsafe { (&newreno_defaults, &dctcp_defaults, &ecn_int_defaults, &retcp_defaults) };
        assert_eq!(c_params("newreno", &none).unwrap(), defaults(n));
        assert_eq!(c_params("dctcp", &none).unwrap(), defaults(d));
        assert_eq!(c_params("ecn_int", &none).unwrap(), defaults(e));
        assert_eq!(c_params("retcp", &none).unwrap(), defaults(r));
        let g: Vec<u8> = [16384u32, 32768].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(c_params("dctcp", &toml::from_str("g = 0.25\nalpha_init = 0.5").unwrap()).unwrap(), g);
        assert_eq!(c_params("retcp", &toml::from_str("alpha = 0").unwrap()).unwrap_err(), "alpha: expected an integer in [1, 1024], got 0");
        assert!(c_params("cubic", &none).is_err());
    }

    #[test]
    fn the_c_layouts_match_the_rust_mirrors() {
        assert_eq!(std::mem::size_of::<Signals>(), 40);
        assert_eq!(std::mem::size_of::<CWindow>(), 24);
        assert_eq!(std::mem::size_of::<Record>(), 104);
        for name in ["newreno", "dctcp", "ecn_int", "retcp"] {
            // Each C state fits the adapter's room (checked again at every instance).
            let _ = build(name, "");
        }
    }

    /// reTCP (Mukerjee et al., NSDI 2020): the window doubles (alpha 2) when the circuit signal
    /// turns on and halves when it turns off, exactly, at any window; otherwise it is Reno.
    #[test]
    fn retcp_multiplies_when_the_circuit_comes_and_divides_when_it_goes() {
        let mut cc = build("retcp", "");
        assert_eq!((cc.name(), cc.ecn_mode()), ("retcp", EcnMode::PerPacket));
        let mut w = win(17 * MSS + 3, u64::MAX);
        cc.on_ack(&ack(MSS, false), &mut w);
        assert_eq!(w.cwnd, 18 * MSS + 3, "slow start before any circuit");
        cc.on_ack(&ack(2 * MSS, true), &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (36 * MSS + 6, 36 * MSS + 6), "circuit up: x2");
        // While the circuit stays up the window grows like Reno in avoidance, never cut by ECE.
        for i in 0..37 {
            cc.on_ack(&ack((3 + i) * MSS, true), &mut w);
        }
        assert_eq!(w.cwnd, 37 * MSS + 6);
        cc.on_ack(&ack(41 * MSS, false), &mut w);
        assert_eq!((w.cwnd, w.ssthresh), ((37 * MSS + 6) / 2, (37 * MSS + 6) / 2), "circuit down: /2");
        let mut cc = build("retcp", "alpha = 4");
        let mut w = win(10 * MSS, u64::MAX);
        cc.on_ack(&ack(MSS, true), &mut w);
        assert_eq!(w.cwnd, 40 * MSS);
        cc.on_ack(&ack(2 * MSS, false), &mut w);
        assert_eq!(w.cwnd, 10 * MSS);
        // Loss is Reno's.
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (5 * MSS, 5 * MSS));
        let err = |s: &str| super::super::factory("retcp", &toml::from_str(s).unwrap()).err().unwrap();
        assert_eq!(err("alpha = 0"), "alpha: expected an integer in [1, 1024], got 0");
        assert!(err("alpha = 1.5").starts_with("alpha: "));
    }

    /// The portable DCTCP against the floating-point reference on the same ACK stream: the same
    /// cuts at the same ACKs, and windows never more than one MSS apart. Alpha is rounded down to
    /// 2^-16 at every window's end and each cut truncates to a byte, so after a cut the windows
    /// differ by a few bytes, and Reno's next one-MSS step may then land one ACK apart.
    #[test]
    fn portable_dctcp_follows_the_floating_point_reference() {
        let (mut p, mut r) = (build("dctcp", ""), build("dctcp_ref", ""));
        let (mut wp, mut wr) = (win(10 * MSS, u64::MAX), win(10 * MSS, u64::MAX));
        let mut cuts = (0, 0);
        let mut worst = 0;
        for i in 1..20_000u64 {
            // Marks in bursts: 3 marked ACKs in every 40.
            let a = ack(i * MSS, i % 40 < 3);
            let (bp, br) = (wp.cwnd, wr.cwnd);
            p.on_ack(&a, &mut wp);
            r.on_ack(&a, &mut wr);
            cuts.0 += (wp.cwnd < bp) as u64;
            cuts.1 += (wr.cwnd < br) as u64;
            assert_eq!(wp.cwnd < bp, wr.cwnd < br, "ack {i}: one cut and not the other");
            let diff = wp.cwnd.abs_diff(wr.cwnd);
            worst = worst.max(diff);
            assert!(diff <= MSS, "ack {i}: portable {} reference {}", wp.cwnd, wr.cwnd);
        }
        println!("portable vs reference DCTCP: {} cuts each, largest window difference {worst} bytes", cuts.0);
        assert!(cuts.0 > 100, "{cuts:?}");
    }

    #[test]
    fn ecn_int_cuts_on_an_echoed_queue_and_is_dctcp_without_one() {
        let mut cc = build("ecn_int", "g_int = 1.0\nalpha_init = 0.0");
        assert!(cc.needs_int());
        let mut w = win(100 * MSS, 50 * MSS);
        let mut a = ack(MSS, false);
        a.int = Some(IntEcho { reading: IntReading::QueueBytes(16_000), path_latency: Time::ZERO, hop_id: 1 });
        cc.on_ack(&a, &mut w);
        // alpha_int = 16 KB / 32 KB = 1/2: the window loses a quarter.
        assert_eq!(w.cwnd, 75 * MSS);
        let (mut x, mut y) = (build("ecn_int", ""), build("dctcp", ""));
        let (mut wx, mut wy) = (win(100 * MSS, 50 * MSS), win(100 * MSS, 50 * MSS));
        for i in 1..500 {
            let mut a = ack(i * MSS, i % 17 == 0);
            y.on_ack(&a, &mut wy);
            a.int = Some(IntEcho { reading: IntReading::Utilization(0.7), path_latency: Time::ZERO, hop_id: 1 });
            x.on_ack(&a, &mut wx);
            assert_eq!(wx.cwnd, wy.cwnd, "ack {i}");
        }
    }

    #[test]
    fn a_gain_below_the_fixed_point_step_is_an_error() {
        let err = super::super::factory("dctcp", &toml::from_str("g = 1e-6").unwrap()).err().unwrap();
        assert_eq!(err, "g: expected a number in (0, 1] of at least 2^-16 (the fixed-point step), got 0.000001");
        let err = super::super::factory("dctcp", &toml::from_str("g = 0").unwrap()).err().unwrap();
        assert_eq!(err, "g: expected a number in (0, 1], got 0");
    }

    /// A replay detects a window the simulator build computes differently, and says where.
    #[test]
    fn replay_reports_the_first_differing_window() {
        let sig = Signals { acked: MSS, snd_una: 1000, snd_nxt: 5000, cwnd_limited: 1, ..Default::default() };
        let w = CWindow { cwnd: 10 * MSS, ssthresh: 5 * MSS, mss: MSS };
        let mut trace = vec![
            Record { flow: 7, kind: REC_INIT, ..Default::default() },
            Record { flow: 7, kind: REC_ACK, sig, win_in: w, win_out: w, ..Default::default() },
            Record { flow: 7, kind: REC_EVENT, event: SCC_LOSS, win_in: w, win_out: CWindow { cwnd: 5 * MSS, ssthresh: 5 * MSS, mss: MSS }, ..Default::default() },
        ];
        // Avoidance: 1000 acked bytes of a 10,000-byte window do not grow it yet.
        let st = replay("newreno", Build::Standard, &trace).unwrap().unwrap();
        assert_eq!((st.flows, st.acks, st.losses), (1, 1, 1));
        let m = replay("newreno", Build::Mutant, &trace).unwrap().unwrap_err();
        assert_eq!((m.index, m.sim.cwnd), (2, 2500));
        trace[1].win_out.cwnd += 1;
        assert_eq!(replay("newreno", Build::Standard, &trace).unwrap().unwrap_err().index, 1);
        assert!(replay("cubic", Build::Standard, &trace).is_err());
        trace.remove(0);
        assert!(replay("newreno", Build::Standard, &trace).unwrap_err().contains("no init record"));
    }
}
