//! The service layer: `sluice agent` and `sluice host`. Enforcing a policy (the one way into its
//! checks, then the class table), the local mode on a policy file, the fleet mode on etcd, the
//! telemetry views and exporter, status and the one Prometheus exposition, and their commands.

pub mod enforce;
pub mod status;
pub mod local;
pub mod fleet;
pub mod telemetry;
pub mod cli;
