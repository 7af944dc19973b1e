//! Each crate's modules import one another without a circle (the simulator, the platform, the
//! Linux half and the CLI; the Python module is one file), each layer of the simulator, the
//! platform and the Linux half uses only those below it, the Linux half's testbed and service
//! stay apart, and no function of the platform or the Linux half runs over 80 lines. A module is
//! a file under `src/`
//! (a folder's `mod.rs` for the folder). It depends on another where it names that module's
//! path, in a `use` or anywhere in its code: `crate::...`, `super::...`, `self::...`, a path
//! through a name a `use` brought in from the crate (`use crate::cc::{self}`, then
//! `cc::presets::...`), or a bare path to one of its own child modules. `crate::a::b::C` names
//! the deepest of `a::b::C`, `a::b`, `a` that is a module file, else `lib.rs`. Comments, strings
//! and `#[cfg(test)]` items do not count, nor `mod x;`, nor a module's use of its own submodules:
//! that is containment (`world` uses `world::threads`, which uses `super::World`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate root (`["net", "topology"]`; `lib.rs` is `[]`).
type Module = Vec<String>;
/// A token's text and its line.
type Token = (String, usize);
/// Each dependency between two modules, with the `file:line` of every path that makes it.
type Edges = BTreeMap<(Module, Module), Vec<String>>;

/// Every `.rs` file under `src`, by its path relative to `src`, with its text.
fn sources(src: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().and_then(|e| e.to_str()) == Some("rs") {
            let rel = path.strip_prefix(src).unwrap().to_str().unwrap().replace('\\', "/");
            files.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
    files
}

/// The module a file under `src/` is.
fn module_of(rel: &str) -> Module {
    let mut parts: Module = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
    if parts.last().map(String::as_str) == Some("mod") || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")) {
        parts.pop();
    }
    parts
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_')
}

fn keyword(s: &str) -> bool {
    matches!(s, "crate" | "super" | "self")
}

/// Where a raw string literal (`r"..."`, `r#"..."#`, `br"..."`) that starts at `i` ends, if one does.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    let k = if c.get(i) == Some(&'b') { i + 1 } else { i };
    if c.get(k) != Some(&'r') || (i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')) {
        return None;
    }
    let mut h = k + 1;
    while c.get(h) == Some(&'#') {
        h += 1;
    }
    if c.get(h) != Some(&'"') {
        return None;
    }
    let hashes = h - k - 1;
    let close = (h + 1..c.len()).find(|&j| c[j] == '"' && (1..=hashes).all(|q| c.get(j + q) == Some(&'#')));
    Some(close.map_or(c.len(), |j| j + 1 + hashes))
}

/// The tokens of Rust source without comments, strings and char literals; `::` is one token.
fn lex(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let n = c.len();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let newlines = |from: usize, to: usize| c[from..to.min(n)].iter().filter(|&&x| x == '\n').count();
    let (mut toks, mut i, mut line) = (Vec::new(), 0, 1);
    while i < n {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < n && depth > 0 {
                if c[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            line += newlines(i, j);
            i = j;
        } else if let Some(j) = raw_string_end(&c, i) {
            line += newlines(i, j);
            i = j;
        } else if ch == '"' || (ch == 'b' && at(i + 1) == '"') {
            let mut j = if ch == 'b' { i + 2 } else { i + 1 };
            while j < n && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            line += newlines(i, j);
            i = j + 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let k = if ch == 'b' { i + 2 } else { i + 1 };
            if at(k) == '\\' {
                // An escaped char: skip the escaped character, then to the closing quote.
                let mut j = k + 2;
                while j < n && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(k + 1) == '\'' {
                i = k + 2;
            } else if ch == 'b' {
                toks.push(("b".to_string(), line));
                i += 1;
            } else {
                // A lifetime or a label: its name is lexed next.
                i = k;
            }
        } else if ch == 'r' && at(i + 1) == '#' && (at(i + 2).is_alphabetic() || at(i + 2) == '_') {
            // A raw identifier: the identifier after `r#` is lexed next.
            i += 2;
        } else if ch.is_alphabetic() || ch == '_' {
            let j = (i..n).find(|&j| !(c[j].is_alphanumeric() || c[j] == '_')).unwrap_or(n);
            toks.push((c[i..j].iter().collect(), line));
            i = j;
        } else if ch.is_ascii_digit() {
            // A number; `0..n` is a number, a range and a name.
            let mut j = i + 1;
            while j < n && (c[j].is_alphanumeric() || c[j] == '_' || (c[j] == '.' && at(j + 1).is_ascii_digit())) {
                j += 1;
            }
            toks.push(("0".to_string(), line));
            i = j;
        } else if ch == ':' && at(i + 1) == ':' {
            toks.push(("::".to_string(), line));
            i += 2;
        } else {
            toks.push((ch.to_string(), line));
            i += 1;
        }
    }
    toks
}

/// The tokens without each item behind `#[cfg(test)]` (through its `;` or its closing brace).
fn drop_cfg_test(toks: Vec<Token>) -> Vec<Token> {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let cfg_test = i + 7 <= toks.len() && toks[i..i + 7].iter().zip(CFG_TEST).all(|(t, s)| t.0 == s);
        if !cfg_test {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        let (mut j, mut depth) = (i + 7, 0i32);
        while j < toks.len() {
            let t = toks[j].0.as_str();
            j += 1;
            if matches!(t, "(" | "[" | "{") {
                depth += 1;
            } else if matches!(t, ")" | "]" | "}") {
                depth -= 1;
                if depth == 0 && t == "}" {
                    if toks.get(j).is_some_and(|t| t.0 == ";") {
                        j += 1;
                    }
                    break;
                }
            } else if t == ";" && depth == 0 {
                break;
            }
        }
        i = j;
    }
    out
}

/// One path a `use` item brings in, with the name it brings it in as.
struct Leaf {
    segs: Vec<String>,
    alias: Option<String>,
    line: usize,
}

/// Reads the use tree at `toks[i]` under `prefix` into `leaves`; returns the index after it.
fn use_tree(toks: &[Token], mut i: usize, prefix: &[String], leaves: &mut Vec<Leaf>) -> usize {
    let mut segs = prefix.to_vec();
    loop {
        let (t, line) = (toks[i].0.as_str(), toks[i].1);
        if t == "{" {
            i += 1;
            while toks[i].0 != "}" {
                i = use_tree(toks, i, &segs, leaves);
                if toks[i].0 == "," {
                    i += 1;
                }
            }
            return i + 1;
        }
        if t == "*" {
            leaves.push(Leaf { segs, alias: None, line });
            return i + 1;
        }
        i += 1;
        if t == "::" {
            continue;
        }
        segs.push(t.to_string());
        if toks[i].0 == "::" {
            continue;
        }
        let mut alias = None;
        if toks[i].0 == "as" {
            alias = Some(toks[i + 1].0.clone());
            i += 2;
        }
        if segs.last().map(String::as_str) == Some("self") {
            segs.pop();
        }
        let alias = alias.or_else(|| segs.last().cloned());
        leaves.push(Leaf { segs, alias, line });
        return i;
    }
}

/// A path's segments from the crate root, seen from module `here`.
fn absolute(segs: &[String], here: &[String], aliases: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    match segs[0].as_str() {
        "crate" => segs[1..].to_vec(),
        "super" => {
            let ups = segs.iter().take_while(|s| s.as_str() == "super").count();
            [&here[..here.len().saturating_sub(ups)], &segs[ups..]].concat()
        }
        "self" => [here, &segs[1..]].concat(),
        first => match aliases.get(first) {
            Some(path) => [path.as_slice(), &segs[1..]].concat(),
            None => [here, segs].concat(),
        },
    }
}

/// The module a path in module `now` names, if it names one of this crate's.
fn target(
    mods: &BTreeMap<Module, String>,
    now: &[String],
    aliases: &BTreeMap<String, Vec<String>>,
    segs: &[String],
) -> Option<Module> {
    let first = segs.first()?.as_str();
    if !keyword(first) && !aliases.contains_key(first) && !mods.contains_key(&[now, &segs[..1]].concat()) {
        // An extern crate, a local item, an enum's variant.
        return None;
    }
    let full = absolute(segs, now, aliases);
    (0..=full.len()).rev().map(|k| full[..k].to_vec()).find(|m| mods.contains_key(m))
}

/// The modules that the file of module `here` names, with the line of each path.
fn paths_in(mods: &BTreeMap<Module, String>, here: &Module, toks: &[Token]) -> Vec<(Module, usize)> {
    // The `use` items first, for the names they bring in from the crate.
    let mut uses: BTreeMap<usize, (usize, Vec<Leaf>)> = BTreeMap::new();
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].0 != "use" {
            i += 1;
            continue;
        }
        let mut leaves = Vec::new();
        let end = use_tree(toks, i + 1, &[], &mut leaves);
        let end = (end..toks.len()).find(|&j| toks[j].0 == ";").map_or(toks.len(), |j| j + 1);
        for leaf in &leaves {
            if let (Some(first), Some(alias)) = (leaf.segs.first(), &leaf.alias) {
                if keyword(first) && !keyword(alias) {
                    aliases.insert(alias.clone(), absolute(&leaf.segs, here, &BTreeMap::new()));
                }
            }
        }
        uses.insert(i, (end, leaves));
        i = end;
    }
    let mut found = Vec::new();
    // Inline `mod name { ... }` blocks, with the depth each opens at: `super` and `self` in one
    // are relative to it.
    let (mut stack, mut depth): (Vec<(String, i32)>, i32) = (Vec::new(), 0);
    let mut i = 0;
    while i < toks.len() {
        let now: Module = here.iter().chain(stack.iter().map(|(name, _)| name)).cloned().collect();
        let t = toks[i].0.as_str();
        if let Some((end, leaves)) = uses.get(&i) {
            for leaf in leaves.iter().filter(|l| !l.segs.is_empty()) {
                found.extend(target(mods, &now, &aliases, &leaf.segs).map(|m| (m, leaf.line)));
            }
            i = *end;
        } else if t == "mod" && toks.get(i + 2).is_some_and(|b| b.0 == "{") {
            stack.push((toks[i + 1].0.clone(), depth));
            depth += 1;
            i += 3;
        } else if is_ident(t) && toks.get(i + 1).is_some_and(|s| s.0 == "::") && (i == 0 || toks[i - 1].0 != "::") {
            let mut segs = vec![t.to_string()];
            let mut j = i + 1;
            while toks.get(j).is_some_and(|s| s.0 == "::") && toks.get(j + 1).is_some_and(|s| is_ident(&s.0)) {
                segs.push(toks[j + 1].0.clone());
                j += 2;
            }
            found.extend(target(mods, &now, &aliases, &segs).map(|m| (m, toks[i].1)));
            i = j;
        } else {
            if t == "{" {
                depth += 1;
            } else if t == "}" {
                depth -= 1;
                if stack.last().is_some_and(|&(_, d)| d == depth) {
                    stack.pop();
                }
            }
            i += 1;
        }
    }
    found
}

/// The modules of `files` (path under `src/` and text) and the dependencies between them.
fn graph(files: &BTreeMap<String, String>) -> (BTreeMap<Module, String>, Edges) {
    let mods: BTreeMap<Module, String> = files.keys().map(|rel| (module_of(rel), rel.clone())).collect();
    let mut edges = Edges::new();
    for (here, rel) in &mods {
        let toks = drop_cfg_test(lex(&files[rel]));
        for (to, line) in paths_in(&mods, here, &toks) {
            if to.starts_with(here) {
                // Itself, or one of its own submodules.
                continue;
            }
            let at = format!("{rel}:{line}");
            let places = edges.entry((here.clone(), to)).or_default();
            if !places.contains(&at) {
                places.push(at);
            }
        }
    }
    (mods, edges)
}

/// The strongly connected components of more than one module.
fn circles(mods: &BTreeMap<Module, String>, edges: &Edges) -> Vec<BTreeSet<Module>> {
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for (a, b) in edges.keys() {
                if *a == m && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> = mods.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<Module>> = Vec::new();
    for m in mods.keys() {
        let circle: BTreeSet<Module> = reached[m].iter().filter(|o| reached[*o].contains(m)).cloned().collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

/// Each circle's modules, and each dependency inside it with the paths that make it.
fn report(mods: &BTreeMap<Module, String>, edges: &Edges, circles: &[BTreeSet<Module>]) -> String {
    let mut text = String::new();
    for circle in circles {
        let names: Vec<&str> = circle.iter().map(|m| mods[m].as_str()).collect();
        text += &format!("a circle of {} modules: {}\n", circle.len(), names.join(" "));
        for ((a, b), places) in edges {
            if circle.contains(a) && circle.contains(b) {
                text += &format!("  {} -> {}: {}\n", mods[a], mods[b], places.join(", "));
            }
        }
    }
    text
}

/// The crates checked, each with the fewest modules and dependencies its sources have, so a
/// path that reads nothing fails.
const CRATES: [(&str, usize, usize); 4] = [("sluice-sim", 90, 300), ("sluice-platform", 8, 10), ("sluice-host", 28, 50), ("sluice-cli", 8, 5)];

/// A crate's modules and their dependencies, read from its `src/`.
fn crate_graph(name: &str, min_mods: usize, min_edges: usize) -> (BTreeMap<Module, String>, Edges) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name).join("src");
    let (mods, edges) = graph(&sources(&src));
    assert!(mods.len() >= min_mods && edges.len() >= min_edges, "{name}: {} modules, {} dependencies: the sources were not read", mods.len(), edges.len());
    (mods, edges)
}

#[test]
fn no_module_reaches_itself_through_its_imports() {
    for (name, min_mods, min_edges) in CRATES {
        let (mods, edges) = crate_graph(name, min_mods, min_edges);
        let found = circles(&mods, &edges);
        assert!(
            found.is_empty(),
            "{name}: modules that import one another in a circle; move an item to the module it belongs with:\n{}",
            report(&mods, &edges, &found)
        );
    }
}

#[test]
fn the_circle_check_sees_every_way_a_module_is_named() {
    let files: BTreeMap<String, String> = [
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n"),
        (
            "a.rs",
            "use crate::{b::B, c};\nfn f() { c::helper(); }\n// crate::d::X in a comment\nconst S: &str = \"crate::d::Y\";\n#[cfg(test)]\nmod tests { use crate::d::Z; }\n",
        ),
        ("b/mod.rs", "mod inner;\npub use inner::Inner;\n"),
        ("b/inner.rs", "use super::super::c::C;\npub struct Inner;\n"),
        ("c.rs", "pub fn helper() { let _ = crate::a::f; }\n"),
        (
            "d.rs",
            r##"pub fn g() -> u8 { b'x' }
fn h<'a>(x: &'a str) -> char { '\'' }
const R: &str = r#"crate::a::f"#; /* crate::a::f /* nested */ crate::a::f */
pub fn k() { crate::b::inner::Inner; }
"##,
        ),
    ]
    .into_iter()
    .map(|(f, t)| (f.to_string(), t.to_string()))
    .collect();
    let (mods, edges) = graph(&files);
    let got: Vec<String> =
        edges.iter().map(|((a, b), at)| format!("{} -> {} ({})", mods[a], mods[b], at.join(", "))).collect();
    assert_eq!(
        got,
        [
            "a.rs -> b/mod.rs (a.rs:1)",
            "a.rs -> c.rs (a.rs:1, a.rs:2)",
            "b/inner.rs -> c.rs (b/inner.rs:1)",
            "c.rs -> a.rs (c.rs:1)",
            "d.rs -> b/inner.rs (d.rs:4)",
        ]
    );
    let found = circles(&mods, &edges);
    assert_eq!(found.len(), 1);
    assert_eq!(report(&mods, &edges, &found), "a circle of 2 modules: a.rs c.rs\n  a.rs -> c.rs: a.rs:1, a.rs:2\n  c.rs -> a.rs: c.rs:1\n");
}

/// Layers, lowest first, by module path (`net`, or `kernel::pins` inside a folder): a module is
/// in the layer of the longest path that starts it, and may use its own layer's modules and
/// those below, never one above.
type Layers = &'static [(&'static str, &'static [&'static str])];

/// The simulator's layers. Core types; the network and the context every element acts through
/// (it lends the wire store and the capture); algorithms and transports; flows, hosts and
/// workloads on them; the engine that runs them; what reads scenarios and writes outputs.
const LAYERS: Layers = &[
    ("core", &["time", "auto", "words", "ids", "prefetch", "packet", "event"]),
    ("net and context", &["net", "context"]),
    ("cc and transport", &["cc", "transport"]),
    ("host and workload", &["host", "flow", "workload"]),
    ("engine", &["world"]),
    ("scenario and outputs", &["scenario", "check", "metrics", "run", "fuzzing"]),
];

/// The platform's layers: the log, Prometheus text, the agent's record and the etcd client; a
/// policy's plan and the fleet's documents, reports and views; `sluice admin`'s commands; their
/// command line.
const PLATFORM_LAYERS: Layers = &[
    ("records and clients", &["log", "prometheus", "applied", "etcd"]),
    ("plan and fleet", &["plan", "fleet"]),
    ("admin", &["admin"]),
    ("cli", &["cli"]),
];

/// The Linux half's layers: the host's plumbing; the kernel layer (skeletons and pins, then the
/// programs' maps, then the agent's tables, which decide nothing); the testbed tools on it; the
/// service (enforcing a policy and status, then the local and fleet modes and telemetry, then
/// the commands).
const HOST_LAYERS: Layers = &[
    ("system", &["sys"]),
    ("kernel: skeletons and pins", &["kernel::skel", "kernel::pins"]),
    (
        "kernel: programs and maps",
        &["kernel::struct_ops", "kernel::agent_config", "kernel::events", "kernel::int_switch", "kernel::sockmap", "kernel::replay", "kernel::codec"],
    ),
    ("kernel: the agent's tables", &["kernel::sockops", "kernel::cc_policy", "kernel::class_table"]),
    ("testbed: namespaces and proxy", &["testbed::netns", "testbed::proxy"]),
    ("testbed: circuit, delay, evidence and traffic", &["testbed::circuit", "testbed::delay", "testbed::evidence", "testbed::traffic"]),
    ("testbed: cli", &["testbed::cli"]),
    ("service: enforcing and status", &["service::enforce", "service::status"]),
    ("service: modes and telemetry", &["service::local", "service::fleet", "service::telemetry"]),
    ("service: cli", &["service::cli"]),
];

/// Parts of the Linux half that never use one another: the service does not reach into the
/// testbed (the testbed, lower, cannot reach the service by the layers).
const HOST_APART: &[(&str, &str)] = &[("service", "testbed")];

/// Whether module `m` is at or under the module path `path` (`kernel::pins`).
fn under(m: &Module, path: &str) -> bool {
    let p: Vec<&str> = path.split("::").collect();
    m.len() >= p.len() && m.iter().zip(&p).all(|(a, b)| a == b)
}

/// The layer a module is in (`lib.rs` and a folder's `mod.rs`, which only declare, above them all).
fn layer_of(layers: Layers, m: &Module) -> Result<usize, String> {
    let mut best: Option<(usize, usize)> = None;
    for (i, (_, paths)) in layers.iter().enumerate() {
        for p in paths.iter().filter(|p| under(m, p)) {
            let depth = p.split("::").count();
            if best.map_or(true, |(_, d)| depth > d) {
                best = Some((i, depth));
            }
        }
    }
    match best {
        Some((i, _)) => Ok(i),
        None if m.is_empty() || layers.iter().flat_map(|(_, p)| p.iter()).any(|p| p.starts_with(&format!("{}::", m.join("::")))) => Ok(layers.len()),
        None => Err(format!("module {} is in no layer", m.join("::"))),
    }
}

/// Every use of a module in a higher layer, as `from -> to (file:line, ..)`.
fn upward(layers: Layers, mods: &BTreeMap<Module, String>, edges: &Edges) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for ((a, b), at) in edges {
        let (la, lb) = (layer_of(layers, a)?, layer_of(layers, b)?);
        if lb > la {
            found.push(format!("{} ({}) -> {} ({}): {}", mods[a], layers[la].0, mods[b], layers[lb].0, at.join(", ")));
        }
    }
    Ok(found)
}

#[test]
fn no_layer_uses_one_above_it() {
    for (name, layers) in [("sluice-sim", LAYERS), ("sluice-platform", PLATFORM_LAYERS), ("sluice-host", HOST_LAYERS)] {
        let (_, min_mods, min_edges) = CRATES.iter().find(|c| c.0 == name).copied().unwrap();
        let (mods, edges) = crate_graph(name, min_mods, min_edges);
        let found = upward(layers, &mods, &edges).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(found.is_empty(), "{name}: uses of a higher layer; move the item down to the layer that uses it:\n{}", found.join("\n"));
    }
}

#[test]
fn the_testbed_and_the_service_stay_apart() {
    let (_, min_mods, min_edges) = CRATES.iter().find(|c| c.0 == "sluice-host").copied().unwrap();
    let (mods, edges) = crate_graph("sluice-host", min_mods, min_edges);
    for (from, to) in HOST_APART {
        let found: Vec<String> =
            edges.iter().filter(|((a, b), _)| under(a, from) && under(b, to)).map(|((a, b), at)| format!("{} -> {}: {}", mods[a], mods[b], at.join(", "))).collect();
        assert!(found.is_empty(), "sluice-host: {from} uses {to}; move what both need into the kernel layer or sys:\n{}", found.join("\n"));
    }
}

/// Each function of `files` (module file and text) with its first line and its length in lines,
/// from `fn` to its closing brace; functions without a body and `#[cfg(test)]` items aside.
fn functions(files: &BTreeMap<String, String>) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let toks = drop_cfg_test(lex(text));
        for i in 0..toks.len() {
            if toks[i].0 != "fn" || !toks.get(i + 1).is_some_and(|t| is_ident(&t.0)) {
                continue;
            }
            // The body opens at the first `{` outside parentheses and brackets, unless a `;` ends
            // a declaration first.
            let (mut j, mut depth) = (i + 2, 0i32);
            while j < toks.len() && !(depth == 0 && (toks[j].0 == "{" || toks[j].0 == ";")) {
                match toks[j].0.as_str() {
                    "(" | "[" => depth += 1,
                    ")" | "]" => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            if j == toks.len() || toks[j].0 == ";" {
                continue;
            }
            let mut braces = 0;
            let end = (j..toks.len()).find(|&k| {
                match toks[k].0.as_str() {
                    "{" => braces += 1,
                    "}" => braces -= 1,
                    _ => {}
                }
                braces == 0
            });
            let end_line = end.map_or(toks.last().map_or(0, |t| t.1), |k| toks[k].1);
            out.push((format!("{rel}:{}", toks[i].1), toks[i + 1].0.clone(), end_line - toks[i].1 + 1));
        }
    }
    out
}

/// The longest a function of the platform or the Linux half may run, in lines.
const MOST_LINES: usize = 80;

#[test]
fn no_function_of_the_host_half_runs_over_80_lines() {
    let mut long = Vec::new();
    let mut seen = 0;
    for name in ["sluice-platform", "sluice-host"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name).join("src");
        for (at, f, lines) in functions(&sources(&src)) {
            seen += 1;
            if lines > MOST_LINES {
                long.push(format!("{name}/src/{at}: fn {f} runs {lines} lines"));
            }
        }
    }
    assert!(seen > 250, "{seen} functions read: the sources were not read");
    assert!(long.is_empty(), "functions over {MOST_LINES} lines; split each into steps with names:\n{}", long.join("\n"));
}

#[test]
fn function_lengths_count_from_fn_to_the_closing_brace() {
    let files: BTreeMap<String, String> = [(
        "a.rs".to_string(),
        "fn short() -> [u8; 2] {\n    [0, 1]\n}\n\ntrait T {\n    fn decl(&self);\n}\n\nfn f(x: u8) -> u8\nwhere\n    u8: Copy,\n{\n    let s = \"}\";\n    // }\n    x\n}\n#[cfg(test)]\nmod tests { fn t() {} }\n"
            .to_string(),
    )]
    .into_iter()
    .collect();
    let got: Vec<(String, String, usize)> = functions(&files);
    assert_eq!(got, [("a.rs:1".to_string(), "short".to_string(), 3), ("a.rs:9".to_string(), "f".to_string(), 8)]);
}
