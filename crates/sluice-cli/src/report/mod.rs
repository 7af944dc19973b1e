//! `sluice report DIR`: PNG plots and a self-contained report.html from a run's output directory.

mod html;
mod inputs;
pub(crate) mod plots;
mod sweep;

use anyhow::{Context, Result};
use std::path::Path;

/// Reads the outputs in `dir` (a run directory, or a sweep store), writes one PNG per figure and report.html beside them, and prints
/// where the report is.
pub fn run(dir: &Path) -> Result<()> {
    if sweep::is_store(dir) {
        let (path, n) = sweep::run(dir)?;
        println!("{} ({})", path.display(), sluice_sim::words::count(n as u64, "plot", "plots"));
        return Ok(());
    }
    let inputs = inputs::Inputs::load(dir)?;
    let mut notes = Vec::new();
    let figures = plots::draw_all(&inputs, &mut notes)?;
    for f in &figures {
        let path = dir.join(f.file);
        std::fs::write(&path, &f.png).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    let page = html::render(&inputs, &figures, &notes);
    let path = dir.join("report.html");
    std::fs::write(&path, page).with_context(|| format!("{}: cannot write", path.display()))?;
    println!("{} ({})", path.display(), sluice_sim::words::count(figures.len() as u64, "plot", "plots"));
    Ok(())
}
