//! The testbed on one machine: network namespaces for hosts and a switch, the circuit mode and a
//! delay line for reconfigurable-network experiments, and the L7 proxy with its benchmark. It
//! uses the kernel layer (the INT switch, the sockmap relay) and `sys`, never the service.

pub mod netns;
pub mod evidence;
pub mod circuit;
pub mod delay;
pub mod proxy;
pub mod traffic;
pub mod cli;
