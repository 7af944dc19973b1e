//! Hosts: the NIC that carries the CC engine. Its pieces: the scheduler across flows
//! (`scheduler`), the per-flow rate limiter (`transport::pacer`, which each flow's transport
//! holds; the CC's own pacing rate gates flows beside it), the packet-processing hook where options and ECN codepoints are added to each segment
//! (the transport's segment packets), and signal collection (the transport's signal block building
//! `AckSignals`, and the telemetry log).

pub mod cpu;
pub mod nic;
pub mod offload;
pub mod pull;
pub mod scheduler;
pub mod splice;
pub mod stack;
pub mod telemetry;
