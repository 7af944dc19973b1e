//! How `sluice check` reads on past a problem: edits made to the scenario document before it is
//! read again.

/// How the check reads on past a problem.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Edit {
    /// The key is removed, so its default applies.
    Remove(String),
    /// The key's text value becomes `to`, the near miss it most likely meant; a key whose value
    /// is not a near miss of `to` (an unknown key, whose name was the miss) is removed.
    Correct { key: String, to: String },
}

impl Edit {
    /// The key path the edit is at.
    pub(crate) fn key(&self) -> &str {
        match self {
            Edit::Remove(key) | Edit::Correct { key, .. } => key,
        }
    }

    /// The next edit to try when this one caused a problem of its own: a correction becomes a
    /// removal; a removal, the removal of the table around the key. `None` at the top level or
    /// in a list entry.
    pub(crate) fn widened(&self) -> Option<Edit> {
        match self {
            Edit::Correct { key, .. } => Some(Edit::Remove(key.clone())),
            Edit::Remove(key) => {
                let (table, _) = key.rsplit_once('.')?;
                (!table.ends_with(']')).then(|| Edit::Remove(table.to_string()))
            }
        }
    }

    /// Makes the edit in a scenario document; false when the key is not there.
    pub(crate) fn apply(&self, doc: &mut toml_edit::DocumentMut) -> bool {
        let Some((table, last)) = parent(doc, self.key()) else { return false };
        if let Edit::Correct { to, .. } = self {
            let value = table.get(&last).and_then(|item| item.as_str());
            if value.is_some_and(|v| crate::words::near_miss(v, [to.as_str()]).is_some()) {
                table.insert(&last, toml_edit::value(to.as_str()));
                return true;
            }
        }
        table.remove(&last).is_some()
    }
}

/// The table holding the item at a key path like `workloads[1].size`, and the item's name; none
/// when a step is missing or the path ends in a list entry.
fn parent<'d>(doc: &'d mut toml_edit::DocumentMut, key: &str) -> Option<(&'d mut dyn toml_edit::TableLike, String)> {
    let mut steps = Vec::new();
    for part in key.split('.') {
        let mut pieces = part.split('[');
        steps.push(Step::Key(pieces.next().unwrap_or_default()));
        for index in pieces {
            steps.push(Step::Index(index.strip_suffix(']').and_then(|i| i.parse().ok())?));
        }
    }
    let (Step::Key(last), path) = steps.split_last()? else { return None };
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut at = path.iter().peekable();
    while let Some(step) = at.next() {
        let Step::Key(k) = step else { return None };
        let item = table.get_mut(k)?;
        table = match at.peek() {
            Some(Step::Index(i)) => {
                at.next();
                match item {
                    toml_edit::Item::ArrayOfTables(a) => a.get_mut(*i)?,
                    toml_edit::Item::Value(toml_edit::Value::Array(a)) => a.get_mut(*i)?.as_inline_table_mut()?,
                    _ => return None,
                }
            }
            _ => item.as_table_like_mut()?,
        };
    }
    Some((table, last.to_string()))
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
    fn edits_reach_into_lists_of_tables_and_inline_tables() {
        let mut doc: toml_edit::DocumentMut =
            "[switch]\nalpha = 1\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1 }]\n".parse().unwrap();
        assert!(Edit::Remove("switch.alpha".into()).apply(&mut doc));
        assert!(Edit::Remove("workloads[0].flows[0].dst".into()).apply(&mut doc));
        assert!(
            !Edit::Remove("workloads[0].flows[0]".into()).apply(&mut doc),
            "a list entry stays: removing it renumbers the rest"
        );
        assert!(!Edit::Remove("workloads[3].kind".into()).apply(&mut doc));
        assert!(!Edit::Remove("switch.alpha".into()).apply(&mut doc), "already gone");
        assert_eq!(doc.to_string(), "[switch]\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0}]\n");
    }

    #[test]
    fn a_correction_changes_a_near_miss_and_removes_anything_else() {
        let mut doc: toml_edit::DocumentMut =
            "[classes.q]\ncc = \"dctpc\"\n[switch]\nbufer = \"1MB\"\n".parse().unwrap();
        assert!(Edit::Correct { key: "classes.q.cc".into(), to: "dctcp".into() }.apply(&mut doc));
        // The miss was the key's name, not its value: the key goes.
        assert!(Edit::Correct { key: "switch.bufer".into(), to: "buffer".into() }.apply(&mut doc));
        let t: toml::Table = doc.to_string().parse().unwrap();
        assert_eq!(t["classes"]["q"]["cc"].as_str(), Some("dctcp"));
        assert!(t["switch"].as_table().unwrap().is_empty(), "{t}");
    }
}
