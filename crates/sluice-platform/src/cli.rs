//! `sluice admin`, and the flags that reach etcd (shared with `sluice agent --etcd`).

use crate::admin;
use crate::etcd::{Connect, Etcd};
use anyhow::{bail, Result};
use clap::Subcommand;
use std::path::PathBuf;

/// How to reach etcd: shared by `sluice agent --etcd` and `sluice admin`.
#[derive(clap::Args, Debug, Clone)]
pub struct EtcdArgs {
    /// etcd's client URLs, comma-separated (https://10.0.0.1:2379,https://10.0.0.2:2379).
    #[arg(long, value_delimiter = ',', global = true)]
    pub etcd: Vec<String>,
    /// The CA certificate (PEM) that signed the etcd members' certificates.
    #[arg(long, global = true)]
    pub cacert: Option<PathBuf>,
    /// This client's certificate (PEM), where etcd asks for one.
    #[arg(long, global = true, requires = "key")]
    pub cert: Option<PathBuf>,
    /// The key (PEM) of --cert.
    #[arg(long, global = true, requires = "cert")]
    pub key: Option<PathBuf>,
    /// The etcd user to act as (its role decides what it may do; docs/security.md).
    #[arg(long, global = true, requires = "password_file")]
    pub user: Option<String>,
    /// The file holding --user's password.
    #[arg(long, global = true, requires = "user")]
    pub password_file: Option<PathBuf>,
    /// Allow http:// URLs: policy and credentials then cross the network unprotected.
    #[arg(long, global = true)]
    pub insecure_plaintext: bool,
    /// The keys' prefix in etcd: one per fleet.
    #[arg(long, global = true, default_value = "/sluice")]
    pub prefix: String,
}

impl EtcdArgs {
    /// The client these flags describe.
    pub fn client(&self) -> Result<Etcd> {
        if !self.prefix.starts_with('/') || self.prefix.ends_with('/') {
            bail!("--prefix {}: expected a key prefix like /sluice (a leading slash, none at the end)", self.prefix);
        }
        Etcd::new(&Connect {
            endpoints: self.etcd.clone(),
            cacert: self.cacert.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            user: self.user.clone().zip(self.password_file.clone()),
            insecure_plaintext: self.insecure_plaintext,
        })
    }
}

/// `sluice admin ...`: the fleet's policy in etcd.
#[derive(clap::Args, Debug)]
pub struct AdminArgs {
    #[command(subcommand)]
    cmd: AdminCmd,
    #[command(flatten)]
    etcd: EtcdArgs,
}

/// `sluice admin apply|diff|history|rollback|status|forget`.
#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// Check a policy as every agent will, and write it as the fleet's next version.
    Apply {
        /// The policy file (docs/admin.md).
        policy: PathBuf,
    },
    /// What applying a policy would change: per class, then line by line.
    Diff {
        /// The policy file.
        policy: PathBuf,
    },
    /// Every version etcd holds: who applied it, when, from which file.
    History,
    /// Apply version N's text again, as the next version.
    Rollback {
        /// The version to restore.
        version: u64,
    },
    /// Every host: the version it runs, its lag, its negotiations; flags what needs a look.
    Status {
        /// One JSON document, for scripts.
        #[arg(long)]
        json: bool,
        /// Flag hosts whose negotiations fall back more often than this share (0 to 1).
        #[arg(long, default_value_t = 0.05)]
        fallback_threshold: f64,
    },
    /// Drop a host that is gone for good from `status`.
    Forget {
        /// The host's name.
        host: String,
    },
}

/// Runs `sluice admin ...`.
pub fn run_admin(args: AdminArgs) -> Result<()> {
    if args.etcd.etcd.is_empty() {
        bail!("sluice admin: expected --etcd URL, the client URL of the fleet's etcd (docs/admin.md)");
    }
    let etcd = args.etcd.client()?;
    let prefix = &args.etcd.prefix;
    let user = args.etcd.user.as_deref();
    match args.cmd {
        AdminCmd::Apply { policy } => println!("{}", admin::apply(&etcd, prefix, &policy, user)?),
        AdminCmd::Diff { policy } => print!("{}", admin::diff(&etcd, prefix, &policy)?),
        AdminCmd::History => print!("{}", admin::history_text(&etcd, prefix)?),
        AdminCmd::Rollback { version } => println!("{}", admin::rollback(&etcd, prefix, version, user)?),
        AdminCmd::Status { json, fallback_threshold } => {
            if !(0.0..=1.0).contains(&fallback_threshold) {
                bail!("--fallback-threshold {fallback_threshold}: expected a share from 0 to 1, as 0.05");
            }
            let s = admin::status(&etcd, prefix, fallback_threshold)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print!("{}", admin::status_text(&s, fallback_threshold));
            }
        }
        AdminCmd::Forget { host } => println!("{}", admin::forget(&etcd, prefix, &host)?),
    }
    Ok(())
}
