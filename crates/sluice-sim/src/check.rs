//! Every problem of a scenario in one pass, as `sluice check` reports them.
//!
//! Parsing and validation stop at the first problem, which names its key path. To find the next,
//! the check sets that key aside (removes it, so its default applies) and reads the scenario
//! again, until it reads clean or a problem cannot be read past: one without a key path, one whose
//! key is a list entry (removing it would renumber the entries after it), or one that setting its
//! key aside does not clear.

use crate::scenario::{self, LoadedScenario, ScenarioError};
use crate::world::World;
use std::path::Path;

/// At most this many problems are listed; a file with more is better fixed a screenful at a time.
const MAX_PROBLEMS: usize = 20;

/// Reads `path` with `overrides` and builds its world, or lists every problem found on the way.
pub fn check(path: &Path, overrides: &[String]) -> Result<(LoadedScenario, World), Vec<ScenarioError>> {
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
) -> Result<(LoadedScenario, World), Vec<ScenarioError>> {
    let mut problems: Vec<ScenarioError> = Vec::new();
    let mut set_aside: Vec<String> = Vec::new();
    // Each round lists a problem or sets a key aside for good, so this bound is never the reason to stop.
    for _ in 0..4 * MAX_PROBLEMS {
        let found = scenario::parse_without(text, file, base_dir, overrides, &set_aside).and_then(|loaded| {
            let world = scenario::build(&loaded).map_err(|m| loaded.error_at(m))?;
            Ok((loaded, world))
        });
        let problem = match found {
            Ok(built) if problems.is_empty() => return Ok(built),
            Ok(_) => return Err(problems),
            Err(problem) => problem,
        };
        if problems.contains(&problem) {
            return Err(problems); // setting its key aside did not clear it
        }
        let next = key_of(&problem.message).filter(|k| !k.ends_with(']') && !set_aside.contains(k));
        if follows_from(&problem.message, &set_aside) {
            // Not a problem of the user's: the table lacks the key set aside; set the table aside too.
            match next {
                Some(table) => set_aside.push(table),
                None => return Err(problems),
            }
            continue;
        }
        problems.push(problem);
        match next {
            Some(key) if problems.len() < MAX_PROBLEMS => set_aside.push(key),
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

/// Whether a problem is only that a required key set aside is now missing
/// (`classes.default: missing field `cc``, after `classes.default.cc` was).
fn follows_from(message: &str, set_aside: &[String]) -> bool {
    let Some((table, rest)) = message.split_once(": missing field `") else {
        return false;
    };
    let field = rest.split('`').next().unwrap_or_default();
    let table = key_of(&format!("{table}: ")).unwrap_or_default();
    set_aside.iter().any(|k| *k == format!("{table}.{field}"))
}

/// Removes the item at a key path like `workloads[1].size` from a document; false when there is
/// none, or the path ends in a list entry.
pub(crate) fn remove(doc: &mut toml_edit::DocumentMut, key: &str) -> bool {
    let mut steps = Vec::new();
    for part in key.split('.') {
        let mut pieces = part.split('[');
        steps.push(Step::Key(pieces.next().unwrap_or_default()));
        for index in pieces {
            match index.strip_suffix(']').and_then(|i| i.parse().ok()) {
                Some(i) => steps.push(Step::Index(i)),
                None => return false,
            }
        }
    }
    let Some((Step::Key(last), path)) = steps.split_last() else {
        return false;
    };
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut at = path.iter().peekable();
    while let Some(step) = at.next() {
        let Step::Key(k) = step else { return false };
        let Some(item) = table.get_mut(k) else { return false };
        table = match at.peek() {
            Some(Step::Index(i)) => {
                at.next();
                match item {
                    toml_edit::Item::ArrayOfTables(a) => match a.get_mut(*i) {
                        Some(t) => t,
                        None => return false,
                    },
                    toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
                        match a.get_mut(*i).and_then(|v| v.as_inline_table_mut()) {
                            Some(t) => t,
                            None => return false,
                        }
                    }
                    _ => return false,
                }
            }
            _ => match item.as_table_like_mut() {
                Some(t) => t,
                None => return false,
            },
        };
    }
    table.remove(last).is_some()
}

/// One step of a key path.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
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
    }

    #[test]
    fn a_required_key_set_aside_is_not_a_second_problem() {
        let aside = ["classes.default.cc".to_string()];
        assert!(follows_from("classes.default: missing field `cc`", &aside));
        assert!(!follows_from("classes.bulk: missing field `cc`", &aside));
        assert!(!follows_from("classes.default.cc: unknown congestion control", &aside));
    }

    #[test]
    fn removal_reaches_into_lists_of_tables_and_inline_tables() {
        let mut doc: toml_edit::DocumentMut =
            "[switch]\nalpha = 1\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1 }]\n".parse().unwrap();
        assert!(remove(&mut doc, "switch.alpha"));
        assert!(remove(&mut doc, "workloads[0].flows[0].dst"));
        assert!(!remove(&mut doc, "workloads[0].flows[0]"), "a list entry stays: removing it renumbers the rest");
        assert!(!remove(&mut doc, "workloads[3].kind"));
        assert!(!remove(&mut doc, "switch.alpha"), "already gone");
        assert_eq!(doc.to_string(), "[switch]\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0}]\n");
    }
}
