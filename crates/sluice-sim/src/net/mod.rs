//! The network: links, ports, queues, switches, circuits, topologies and routing.

pub mod capture;
pub mod circuit;
pub mod fabric;
pub mod failure;
pub mod link;
pub mod partition;
pub mod naming;
pub mod pfc;
pub mod port;
pub mod qdisc;
pub mod queue;
pub mod routing;
pub mod switch;
pub mod topology;
