//! sluice-sim: a packet-level datacenter network simulator with a pluggable congestion-control
//! platform. Build a [`world::World`] from a [`scenario`], run it, and read [`metrics`].

pub mod auto;
pub mod cc;
pub mod check;
pub mod context;
pub mod event;
pub mod flow;
pub mod fuzzing;
pub mod host;
pub mod ids;
pub mod metrics;
pub mod net;
pub mod packet;
mod prefetch;
pub mod run;
pub mod scenario;
pub mod time;
pub mod transport;
pub mod workload;
pub mod words;
pub mod world;
