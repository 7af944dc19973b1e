//! Records the git revision the binary is built from, for run.json.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    if let Some(rev) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=SLUICE_GIT_REVISION={rev}");
    }
    // Rebuild when a commit moves HEAD or its branch (paths hold for worktrees too).
    for what in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
