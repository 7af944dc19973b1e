//! sluice on real Linux hosts: TCP-INT in kernel TCP connections (a sockops agent), a software
//! INT switch on tc, BPF congestion control (struct_ops), the platform's agent and its fleet mode
//! on etcd, and a network-namespace testbed. Three layers over the host's plumbing (`sys`): the
//! kernel's bytes and maps (`kernel`), the agent's service on them (`service`), and the testbed
//! tools (`testbed`), which use the kernel layer only. What needs no kernel (a policy's plan, the
//! agent's record, the etcd client, the fleet's logic, `sluice admin`) is `sluice-platform`.

pub mod sys;
pub mod kernel;
pub mod service;
pub mod testbed;
