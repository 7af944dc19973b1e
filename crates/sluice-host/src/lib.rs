//! sluice on real Linux hosts: TCP-INT in kernel TCP connections (a sockops agent), a software
//! INT switch on tc, BPF congestion control (struct_ops), the platform's agent and its fleet mode
//! on etcd, and a network-namespace testbed. What needs no kernel (the agent's record, the etcd
//! client, the fleet's logic, `sluice admin`) is `sluice-platform`.

pub mod agent;
pub mod cc;
pub mod classes;
pub mod circuit;
pub mod codec;
pub mod delay;
pub mod fleet;
pub mod pins;
pub mod proxy;
pub mod service;
pub mod replay;
pub mod skel;
pub mod switch;
pub mod sys;
pub mod telemetry;
pub mod testbed;
pub mod cli;
