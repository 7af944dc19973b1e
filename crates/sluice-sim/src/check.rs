//! Every problem of a scenario in one pass, as `sluice check` reports them, and the memory a run
//! will take.
//!
//! Parsing and validation stop at the first problem, which names its key path. To find the next,
//! the check edits the scenario past it and reads it again, until it reads clean or a problem
//! cannot be read past. A value that is a near miss is corrected ("dctpc" to "dctcp", so that the
//! class's parameters are still checked against the algorithm meant); any other key is set aside
//! (removed, so its default applies). A problem that only an edit caused (a required key now
//! missing, a mode left without its threshold) is not the user's: that edit widens instead, from
//! a correction to a removal, then to the table around the key. The check stops at a problem
//! without a key path, one whose key is a list entry (removing it would renumber the entries
//! after it), or one no edit clears.

use crate::scenario::{self, Edit, Footprint, LoadedScenario, ScenarioError};
use crate::world::World;
use std::path::Path;

/// At most this many problems are listed; a file with more is better fixed a screenful at a time.
const MAX_PROBLEMS: usize = 20;

/// A scenario that checked clean: what it builds, and about how much memory a run takes.
pub struct Checked {
    /// The scenario as read, overrides applied.
    pub loaded: LoadedScenario,
    /// The world it builds.
    pub world: World,
    /// What a run holds in memory, on one thread and for each other.
    pub footprint: Footprint,
}

/// Reads `path` with `overrides` and builds its world, or lists every problem found on the way.
pub fn check(path: &Path, overrides: &[String]) -> Result<Checked, Vec<ScenarioError>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ScenarioError { file: file.clone(), line: None, message: format!("cannot read the scenario: {e}") }]
    })?;
    check_text(&text, &file, path.parent().unwrap_or(Path::new("")), overrides)
}

/// [`check`] of scenario text; `file` names it in errors and relative paths resolve in `base_dir`.
pub fn check_text(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
) -> Result<Checked, Vec<ScenarioError>> {
    let mut problems: Vec<ScenarioError> = Vec::new();
    let mut edits: Vec<Edit> = Vec::new();
    // Each round lists a problem or widens an edit, so this bound is never the reason to stop.
    for _ in 0..4 * MAX_PROBLEMS {
        let found = scenario::parse_edited(text, file, base_dir, overrides, &edits).and_then(|loaded| {
            let (world, footprint) = scenario::build_measured(&loaded).map_err(|m| loaded.error_at(m))?;
            Ok(Checked { loaded, world, footprint })
        });
        let problem = match found {
            Ok(checked) if problems.is_empty() => return Ok(checked),
            Ok(_) => return Err(problems),
            Err(problem) => problem,
        };
        if problems.contains(&problem) {
            return Err(problems); // no edit cleared it
        }
        if let Some(i) = caused_by(&problem.message, &edits) {
            match edits[i].widened() {
                Some(wider) => edits[i] = wider,
                None => return Err(problems),
            }
            continue;
        }
        let edit =
            key_of(&problem.message).filter(|k| !k.ends_with(']') && !edits.iter().any(|e| e.key() == k)).map(|key| {
                match suggestion(&problem.message) {
                    Some(to) => Edit::Correct { key, to },
                    None => Edit::Remove(key),
                }
            });
        problems.push(problem);
        match edit {
            Some(edit) if problems.len() < MAX_PROBLEMS => edits.push(edit),
            _ => return Err(problems),
        }
    }
    Err(problems)
}

/// The key path a problem's message starts with (`switch.ecn.k: ...`), or the key of the
/// override it cites (`--set classes.q.cc=x: ...`).
fn key_of(message: &str) -> Option<String> {
    let key = match message.strip_prefix("--set ") {
        Some(o) => o.split_once('=')?.0.trim(),
        None => message.split_once(": ")?.0,
    };
    let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.[]".contains(c));
    is_key.then(|| key.to_string())
}

/// The near miss a problem's message suggests ("...; did you mean `dctcp`?").
fn suggestion(message: &str) -> Option<String> {
    let rest = message.rsplit_once("did you mean `")?.1;
    Some(rest.split_once('`')?.0.to_string())
}

/// The edit a problem follows from, if it is no problem of the user's: a required key that an
/// edit removed is now missing (`classes.default: missing field `cc``, after
/// `classes.default.cc` was removed), or the problem is at a key an edit changed or inside it
/// (`switch.ecn.k: required for mode = "step"`, after `switch.ecn.k` was removed).
fn caused_by(message: &str, edits: &[Edit]) -> Option<usize> {
    let at = |key: &str| {
        edits.iter().position(|e| {
            let k = e.key();
            key == k || key.strip_prefix(k).is_some_and(|rest| rest.starts_with(['.', '[']))
        })
    };
    // Past the override an error cites, its own key path: `--set switch.ecn.mode=step: switch.ecn.k: ...`.
    let message = match message.strip_prefix("--set ") {
        Some(rest) => rest.split_once(": ").map_or(message, |(_, m)| m),
        None => message,
    };
    if let Some((table, rest)) = message.split_once("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        return match key_of(&format!("{}: ", table.trim_end_matches(": "))) {
            Some(table) => at(&format!("{table}.{field}")),
            None => at(field),
        };
    }
    at(&key_of(message)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_messages_and_overrides() {
        assert_eq!(key_of("switch.ecn.k: expected a size").as_deref(), Some("switch.ecn.k"));
        assert_eq!(key_of("workloads[2].size: expected a size").as_deref(), Some("workloads[2].size"));
        assert_eq!(key_of("--set sim.seed=x: sim.seed: expected").as_deref(), Some("sim.seed"));
        assert_eq!(key_of("not valid TOML: expected `=`"), None);
        assert_eq!(key_of("cannot read the scenario: No such file"), None);
        assert_eq!(
            suggestion("classes.q.cc: unknown congestion control \"dctpc\"; expected one of: x; did you mean `dctcp`?")
                .as_deref(),
            Some("dctcp")
        );
        assert_eq!(suggestion("classes.q.cc: unknown congestion control \"zz\"; expected one of: x"), None);
    }

    #[test]
    fn a_problem_an_edit_caused_is_not_a_second_problem() {
        let edits = [Edit::Remove("classes.default.cc".into()), Edit::Remove("switch.ecn.k".into())];
        assert_eq!(caused_by("classes.default: missing field `cc`", &edits), Some(0));
        assert_eq!(caused_by("classes.bulk: missing field `cc`", &edits), None);
        assert_eq!(caused_by("classes.default.cc: unknown congestion control", &edits), Some(0));
        assert_eq!(caused_by("switch.ecn.k: required for mode = \"step\"", &edits), Some(1));
        assert_eq!(caused_by("--set switch.ecn.mode=step: switch.ecn.k: required", &edits), Some(1));
        assert_eq!(caused_by("switch.ecn.kmin: not used by mode = \"step\"", &edits), None);
        assert_eq!(caused_by("missing field `topology`", &[Edit::Remove("topology".into())]), Some(0));
        // A removal widens to its table, a correction to a removal, the top level to nothing.
        assert_eq!(edits[1].widened(), Some(Edit::Remove("switch.ecn".into())));
        let fix = Edit::Correct { key: "classes.q.cc".into(), to: "dctcp".into() };
        assert_eq!(fix.widened(), Some(Edit::Remove("classes.q.cc".into())));
        assert_eq!(Edit::Remove("sim".into()).widened(), None);
        assert_eq!(Edit::Remove("workloads[0].flows[0].dst".into()).widened(), None, "a list entry stays");
    }
}
