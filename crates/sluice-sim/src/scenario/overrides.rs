//! Reading a scenario: the TOML text, its `--set` overrides applied, and errors placed at the
//! file, line and key (or the `--set`) they concern.

use super::*;
use crate::transport::tcp::Stack;
use crate::words::in_words;
use std::fmt;
use std::path::{Path, PathBuf};

/// A scenario problem, located as precisely as the input allows.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    /// The scenario file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, starting with the key path when there is one.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A scenario read from disk, with where it came from.
#[derive(Clone, Debug)]
pub struct LoadedScenario {
    /// The parsed scenario (overrides applied).
    pub scenario: Scenario,
    /// The file it was read from.
    pub file: String,
    /// Directory relative paths in it resolve against.
    pub base_dir: PathBuf,
    /// The user's text, before overrides: lines in errors point into it.
    text: String,
    /// Each override as written, with the key path it sets ("workloads[0].size").
    overrides: Vec<(String, String)>,
}

impl LoadedScenario {
    /// An error about the key that starts `message`, located at the `--set` that set it or at its
    /// line in the file.
    pub fn error_at(&self, message: String) -> ScenarioError {
        let key = message.split(':').next().unwrap_or_default();
        locate(&self.file, &self.text, &self.overrides, key, message.clone(), None)
    }
}

/// Places an error about `key`: an override that set the key (or a table above it) is cited by
/// its `--set`; otherwise the key's line in the user's text, or `line` when given.
pub(super) fn locate(file: &str, text: &str, overrides: &[(String, String)], key: &str, message: String, line: Option<usize>) -> ScenarioError {
    let key = key.trim();
    let set_by = overrides.iter().rev().find(|(path, _)| {
        key == path || key.starts_with(&format!("{path}.")) || key.starts_with(&format!("{path}["))
    });
    match set_by {
        Some((_, o)) => ScenarioError { file: file.to_string(), line: None, message: format!("--set {o}: {message}") },
        None => ScenarioError { file: file.to_string(), line: line.or_else(|| line_of_key(text, key)), message },
    }
}

/// Reads `path`, applies `key.path=value` overrides and parses it.
pub fn load(path: &Path, overrides: &[String]) -> Result<LoadedScenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError { file: file.clone(), line: None, message: format!("cannot read the scenario: {e}") })?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&text, &file, &base_dir, overrides)
}

/// Parses scenario text; `file` names it in errors.
pub fn parse(text: &str, file: &str, base_dir: &Path, overrides: &[String]) -> Result<LoadedScenario, ScenarioError> {
    parse_edited(text, file, base_dir, overrides, &[])
}

/// [`parse`], with `edits` made once the overrides are applied (keys removed, near misses
/// corrected): how [`crate::check`] reads on past a problem.
pub(crate) fn parse_edited(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
    edits: &[Edit],
) -> Result<LoadedScenario, ScenarioError> {
    let err = |line, message| ScenarioError { file: file.to_string(), line, message };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map(|s| line_at(text, s.start));
        let why = e.message().trim();
        let why = if why.is_empty() {
            "this line cannot be read; expected `key = value`, a [table] header, a comment or a blank line"
        } else {
            why
        };
        err(line, format!("not valid TOML: {why}"))
    })?;
    tables_not_lists(doc.as_item(), &mut Vec::new()).map_err(|(key, m)| locate(file, text, &[], &key, m, None))?;
    let defined: Vec<String> =
        doc.get("classes").and_then(|c| c.as_table_like()).map(|t| t.iter().map(|(k, _)| k.to_string()).collect()).unwrap_or_default();
    let mut set = Vec::new();
    for o in overrides {
        let path = apply_override(&mut doc, o).map_err(|m| err(None, m))?;
        set.push((path, o.clone()));
    }
    tables_not_lists(doc.as_item(), &mut Vec::new()).map_err(|(key, m)| locate(file, text, &set, &key, m, None))?;
    known_classes(&defined, &set).map_err(|m| err(None, m))?;
    for edit in edits {
        edit.apply(&mut doc);
    }
    let edited = doc.to_string();
    let de = toml::Deserializer::new(&edited);
    let mut scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner();
        // Spans point into the edited text, which matches the user's only when nothing was changed.
        let line = if set.is_empty() && edits.is_empty() { inner.span().map(|s| line_at(&edited, s.start)) } else { None };
        let msg = in_words(inner.message().trim());
        if path == "." || path.is_empty() {
            err(line, msg)
        } else {
            locate(file, text, &set, &path, format!("{path}: {msg}"), line)
        }
    })?;
    if scenario.transport.stack != Stack::Rfc {
        // The stack's preset goes under the keys the scenario (with its overrides) sets itself.
        let all: toml::Table = edited.parse().map_err(|e: toml::de::Error| err(None, e.message().trim().to_string()))?;
        let own = all.get("transport").and_then(toml::Value::as_table).cloned().unwrap_or_default();
        scenario.transport = scenario.transport.stack.resolve(&own).map_err(|m| err(None, m))?;
    }
    Ok(LoadedScenario { scenario, file: file.to_string(), base_dir: base_dir.to_path_buf(), text: text.to_string(), overrides: set })
}

/// Key paths (with `*` for any name or index) whose value must be a table, never a list.
pub(super) const TABLE_KEYS: &[&str] = &[
    "sim", "topology", "switch", "switch.ecn", "transport", "classes", "classes.*", "classes.*.params",
    "classes.*.match", "events.*", "events.*.params", "workloads.*", "workloads.*.flows.*", "output", "output.queues", "output.cwnd",
    "output.fct_buckets", "output.telemetry", "output.pcap", "int", "int.switches", "int.switches.*", "policy", "limits", "tlt", "pfc", "rdma",
    "groups", "groups.*", "groups.*.hosts", "groups.*.classes", "groups.*.classes.*", "groups.*.classes.*.params", "groups.*.classes.*.match",
];

/// Refuses a list where the schema has a table (`sim = ["5ms", 7, false]`), which serde would
/// otherwise read by position.
pub(super) fn tables_not_lists(item: &toml_edit::Item, at: &mut Vec<String>) -> Result<(), (String, String)> {
    let is_table_key = |at: &[String]| {
        TABLE_KEYS.iter().any(|k| {
            let parts: Vec<&str> = k.split('.').collect();
            parts.len() == at.len() && parts.iter().zip(at).all(|(p, a)| *p == "*" || p == a)
        })
    };
    let shown = |at: &[String]| {
        let mut out = String::new();
        for seg in at {
            match seg.parse::<usize>() {
                Ok(i) => out.push_str(&format!("[{i}]")),
                Err(_) if out.is_empty() => out.push_str(seg),
                Err(_) => out.push_str(&format!(".{seg}")),
            }
        }
        out
    };
    if let Some(arr) = item.as_array() {
        if is_table_key(at) {
            let key = shown(at);
            return Err((key.clone(), format!("{key}: expected a table of named keys ([{key}] or {key} = {{ .. }}); got a list, whose entries cannot be matched to keys")));
        }
        for (i, v) in arr.iter().enumerate() {
            at.push(i.to_string());
            let r = tables_not_lists(&toml_edit::Item::Value(v.clone()), at);
            at.pop();
            r?;
        }
    } else if let Some(arr) = item.as_array_of_tables() {
        for (i, t) in arr.iter().enumerate() {
            at.push(i.to_string());
            let r = tables_not_lists(&toml_edit::Item::Table(t.clone()), at);
            at.pop();
            r?;
        }
    } else if let Some(t) = item.as_table_like() {
        if at.len() > 6 {
            return Ok(()); // deeper than any key of the schema: serde names what is wrong there
        }
        for (k, v) in t.iter() {
            at.push(k.to_string());
            let r = tables_not_lists(v, at);
            at.pop();
            r?;
        }
    }
    Ok(())
}

/// A `--set classes.<name>...` must name a class of the scenario (or `default`), unless another
/// override also assigns that class to flows; otherwise it configures a class no flow uses.
pub(super) fn known_classes(defined: &[String], set: &[(String, String)]) -> Result<(), String> {
    for (path, o) in set {
        let Some(name) = path.strip_prefix("classes.").map(|r| r.split(['.', '[']).next().unwrap_or_default()) else {
            continue;
        };
        let assigned = set.iter().any(|(p, v)| {
            (p.ends_with(".class") || p.starts_with("policy.")) && v.split_once('=').is_some_and(|(_, v)| v.trim().trim_matches('"') == name)
        });
        if name != "default" && !defined.iter().any(|d| d == name) && !assigned {
            let others: Vec<&str> = defined.iter().map(String::as_str).filter(|d| *d != "default").collect();
            let list = if others.is_empty() {
                "it defines none besides default".to_string()
            } else {
                format!("its classes are default, {}", others.join(", "))
            };
            return Err(format!("--set {o}: the scenario has no class \"{name}\" and no flow would use it; {list}"));
        }
    }
    Ok(())
}

/// The most levels a `--set` key path may have; the schema's deepest key has six.
pub(super) const MAX_KEY_DEPTH: usize = 16;

/// Sets one `a.b.c=value` override; the value is TOML if it parses as TOML, a string otherwise.
/// Returns the key path it set, as errors spell it ("workloads[0].size").
/// Splits a `--set` key path at its dots, as TOML does: a double-quoted key is one key, dots
/// and all, without its quotes; an index in brackets, as errors spell a path
/// (`workloads[0].size`), is a key of its own (`workloads.0.size`). `None` when a quote is left
/// open.
pub(super) fn split_key_path(path: &str) -> Option<Vec<String>> {
    let (mut keys, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    // After `]` the key is already taken: a following `.` or `[` starts the next one.
    let mut after_index = false;
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' | '[' | ']' if !quoted => {
                if !after_index {
                    keys.push(std::mem::take(&mut cur).trim().to_string());
                }
                after_index = c == ']';
                continue;
            }
            c => cur.push(c),
        }
        after_index = false;
    }
    if !after_index {
        keys.push(cur.trim().to_string());
    }
    (!quoted).then_some(keys)
}

pub(super) fn apply_override(doc: &mut toml_edit::DocumentMut, o: &str) -> Result<String, String> {
    let (path, raw) = o
        .split_once('=')
        .ok_or_else(|| format!("--set {o}: expected key.path=value, like classes.query.cc=dctcp"))?;
    let keys = split_key_path(path.trim()).ok_or_else(|| {
        format!("--set {o}: unbalanced quotes in \"{}\"; quote a key with dots whole, like switch.rates.\"2.5Gbps\".ecn.k", path.trim())
    })?;
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!("--set {o}: empty key in \"{}\"; expected key.path=value", path.trim()));
    }
    if keys.len() > MAX_KEY_DEPTH {
        return Err(format!("--set {o}: the key has {} levels; no scenario key has more than {MAX_KEY_DEPTH}", keys.len()));
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let shown = {
        let mut out = String::new();
        for (i, k) in keys.iter().enumerate() {
            match k.parse::<usize>() {
                Ok(n) if i > 0 => out.push_str(&format!("[{n}]")),
                _ if i == 0 => out.push_str(k),
                _ => out.push_str(&format!(".{k}")),
            }
        }
        out
    };
    let value: toml_edit::Value = raw
        .trim()
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(raw.trim()));
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut i = 0;
    while i < keys.len() {
        let k = keys[i];
        if i + 1 == keys.len() {
            table.insert(k, toml_edit::Item::Value(value));
            return Ok(shown);
        }
        let here = keys[..=i].join(".");
        if let Ok(idx) = keys[i + 1].parse::<usize>() {
            let arr = table
                .get_mut(k)
                .and_then(|it| it.as_array_of_tables_mut())
                .ok_or_else(|| format!("--set {o}: \"{here}\" is not a list of tables"))?;
            let len = arr.len();
            table = arr
                .get_mut(idx)
                .ok_or_else(|| {
                    format!("--set {o}: \"{here}\" has {}; index {idx} is out of range", crate::words::count(len as u64, "entry", "entries"))
                })?;
            i += 2;
            if i == keys.len() {
                return Err(format!("--set {o}: name a key inside the entry, like {here}.{idx}.size"));
            }
            continue;
        }
        if table.get(k).is_none() {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            table.insert(k, toml_edit::Item::Table(t));
        }
        table = table
            .get_mut(k)
            .and_then(|it| it.as_table_like_mut())
            .ok_or_else(|| format!("--set {o}: \"{here}\" is a value, not a table"))?;
        i += 1;
    }
    Ok(shown)
}

/// 1-based line of a byte offset.
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Best-effort line of a dotted key path such as "switch.ecn.k" or "workloads[1].src", or else of
/// the nearest table or key above it that the text writes out (`params = { gg = 1 }` for
/// "classes.q.params.gg").
pub(super) fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let mut key = key.trim();
    // An entry of a list of tables ("workloads[1].size"): its own `[[workloads]]` block, not the
    // first entry's.
    let entry = key.split_once('[').and_then(|(name, r)| {
        let (i, rest) = r.split_once(']')?;
        let header = format!("[[{name}]]");
        let start = text.lines().enumerate().filter(|(_, l)| l.trim() == header).nth(i.parse().ok()?)?.0;
        Some((name, start, rest.trim_start_matches('.')))
    });
    if let Some((name, start, rest)) = entry {
        // The entry runs to the next table that is not its own sub-table.
        let own = |l: &str| l.starts_with(&format!("[{name}.")) || l.starts_with(&format!("[[{name}."));
        let entry: Vec<&str> =
            text.lines().skip(start + 1).take_while(|l| !l.trim_start().starts_with('[') || own(l.trim_start())).collect();
        let within = (!rest.is_empty()).then(|| line_of_key(&entry.join("\n"), rest)).flatten();
        return Some(start + 1 + within.unwrap_or(0));
    }
    loop {
        if let Some(line) = line_of_element(text, key).or_else(|| line_of_written_key(text, key)) {
            return Some(line);
        }
        key = key.rsplit_once('.')?.0;
    }
}

/// The line an element of an inline array starts on, for a key path ending in an index
/// ("flows[3]" in `flows = [ {..}, {..}, .. ]` written over several lines), if the text writes
/// the array and the element.
fn line_of_element(text: &str, key: &str) -> Option<usize> {
    let (array, index) = key.strip_suffix(']')?.rsplit_once('[')?;
    let index: usize = index.parse().ok()?;
    let line = line_of_written_key(text, array)?;
    let start: usize = text.split_inclusive('\n').take(line - 1).map(str::len).sum();
    let from = start + text[start..].find('=')? + 1;
    // Walk the value: an element starts at depth one, after the opening bracket or a comma.
    let (mut depth, mut seen, mut quoted, mut expect) = (0usize, 0usize, None::<char>, false);
    for (i, c) in text[from..].char_indices() {
        if let Some(q) = quoted {
            if c == q {
                quoted = None;
            }
            continue;
        }
        if expect && !c.is_whitespace() && c != '#' && c != ']' {
            if seen == index {
                return Some(line_at(text, from + i));
            }
            (seen, expect) = (seen + 1, false);
        }
        match c {
            '"' | '\'' => quoted = Some(c),
            '[' | '{' => {
                depth += 1;
                expect |= depth == 1;
            }
            ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return None;
                }
            }
            ',' if depth == 1 => expect = true,
            _ => {}
        }
    }
    None
}

/// The line that writes the key path `key` itself, if one does.
pub(super) fn line_of_written_key(text: &str, key: &str) -> Option<usize> {
    let parts: Vec<&str> = key.split('.').collect();
    let leaf = parts.last()?.split('[').next()?;
    if leaf.is_empty() {
        return None;
    }
    let table = parts[..parts.len() - 1].join(".");
    let table = table.split('[').next().unwrap_or_default();
    let mut in_table = table.is_empty();
    let mut current = "";
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let name = t.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = table.is_empty() || name == table || name.starts_with(&format!("{table}."));
            current = name;
            if !table.is_empty() && name == format!("{table}.{leaf}") {
                return Some(i + 1);
            }
            continue;
        }
        if in_table && (t.starts_with(&format!("{leaf} ")) || t.starts_with(&format!("{leaf}="))) {
            return Some(i + 1);
        }
        // A dotted key (`classes.q = { ... }` in `[groups.g]`) writes its whole path.
        if let Some((lhs, _)) = t.split_once('=') {
            let lhs: String = lhs.split('.').map(str::trim).collect::<Vec<_>>().join(".");
            let full = if current.is_empty() { lhs } else { format!("{current}.{lhs}") };
            if full == key {
                return Some(i + 1);
            }
        }
    }
    None
}

