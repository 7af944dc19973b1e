//! The network: links, ports, queues, switches, topologies and routing.

pub mod link;
pub mod port;
pub mod queue;
pub mod routing;
pub mod switch;
pub mod topology;
