//! The kernel layer: the BPF programs' skeletons, their pins, and every byte layout the programs
//! share with user space (the agent's switches, the CC policy, the class table, telemetry
//! records, the INT switch's ports, the sockmap relay). It reads and writes maps as it is told
//! and decides nothing: what goes in them is the service's and the platform's plan.

pub mod skel;
pub mod pins;
pub mod struct_ops;
pub mod agent_config;
pub mod events;
pub mod int_switch;
pub mod sockmap;
pub mod replay;
pub mod codec;
pub mod sockops;
pub mod cc_policy;
pub mod class_table;
