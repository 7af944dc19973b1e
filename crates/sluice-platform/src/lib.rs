//! The sluice platform's host half that needs no kernel: the plan of a policy (its classes as
//! the kernel's table will hold them), what the agent records of the policy in force, Prometheus
//! text, the etcd client, the fleet's documents, reports and views, and `sluice admin`. It builds
//! without clang, libelf or BTF, so an administrator's workstation has `sluice admin` in the
//! default build; `sluice-host` builds the agent on it.

pub mod log;
pub mod prometheus;
pub mod applied;
pub mod etcd;
pub mod plan;
pub mod fleet;
pub mod admin;
pub mod cli;
