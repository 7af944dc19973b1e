//! Closed-loop traffic: applications that open flows in reaction to earlier flows arriving.

use super::FlowSpec;
use crate::time::Time;

/// What an application asks the world to do: open flows and set timers, each with a tag the
/// application gets back.
#[derive(Default)]
pub struct AppIo {
    /// Flows to open now (or at the spec's start time if later), with the tag reported on arrival.
    pub open: Vec<(FlowSpec, u32)>,
    /// Messages to send now on the persistent connection from `src` to `dst` in the spec's class
    /// (the first message opens it), each with the tag reported once the receiver has all of it.
    pub send: Vec<(FlowSpec, u32)>,
    /// Timers to fire at a time, with a tag.
    pub timers: Vec<(Time, u32)>,
    /// Requests (or rounds) that completed.
    pub completed: Vec<Request>,
}

/// One completed request/response exchange (or incast round): when it began and ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Class index of the request's flows.
    pub class: usize,
    /// When the client issued it.
    pub start: Time,
    /// When the last byte of the answer reached the client.
    pub end: Time,
}

/// A closed-loop traffic source.
pub trait App: Send {
    /// The time the application starts.
    fn start_time(&self) -> Time;
    /// Called once at `start_time`.
    fn start(&mut self, now: Time, io: &mut AppIo);
    /// The receiver of a flow (or message) this application opened got its last byte.
    fn on_delivered(&mut self, tag: u32, now: Time, io: &mut AppIo);
    /// A timer this application set fired.
    fn on_timer(&mut self, _tag: u32, _now: Time, _io: &mut AppIo) {}
    /// True once the application will open no more flows and waits for none.
    fn done(&self) -> bool;
}
