//! How messages put things in words: counts with their noun, quantities of memory, and the near
//! miss a mistyped name most likely meant.

/// `n` with its noun in the right number: "1 switch", "3 switches", "0 flows".
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A quantity of memory in decimal units, as sluice writes sizes: "420 MB", "4.3 GB".
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    match n {
        n if n >= 1e12 => format!("{:.1} TB", n / 1e12),
        n if n >= 1e9 => format!("{:.1} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.0} MB", n / 1e6),
        n if n >= 1e3 => format!("{:.0} KB", n / 1e3),
        n => format!("{n} B"),
    }
}

/// The candidate a mistyped `word` most likely meant, if one is close enough to suggest: within
/// one edit (an insertion, a deletion, a substitution or two letters swapped, as in "dctpc" for
/// "dctcp") per three letters, ignoring case; never a candidate the word shares no letter with.
pub fn near_miss<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_lowercase();
    let allowed = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(&word, &c.to_lowercase()), c))
        .filter(|&(d, c)| d <= allowed && d < word.chars().count().max(c.chars().count()))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// "; did you mean `x`?" for a near miss of `word` among `candidates`, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    near_miss(word, candidates).map(|c| format!("; did you mean `{c}`?")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_noun_in_the_right_number() {
        assert_eq!(count(1u32, "switch", "switches"), "1 switch");
        assert_eq!(count(0u32, "flow", "flows"), "0 flows");
        assert_eq!(count(3u64, "entry", "entries"), "3 entries");
        assert_eq!(bytes(4_294_967_296), "4.3 GB");
        assert_eq!(bytes(425_748_000), "426 MB");
        assert_eq!(bytes(999), "999 B");
    }

    #[test]
    fn near_misses_are_suggested_and_strangers_are_not() {
        let algorithms = ["newreno", "cubic", "dctcp", "dcqcn", "hpcc", "timely"];
        assert_eq!(near_miss("dctpc", algorithms), Some("dctcp"), "two letters swapped");
        assert_eq!(near_miss("DCTCP", algorithms), Some("dctcp"), "case");
        assert_eq!(near_miss("cubik", algorithms), Some("cubic"));
        assert_eq!(near_miss("timly", algorithms), Some("timely"), "a letter left out");
        assert_eq!(near_miss("bbr2", algorithms), None);
        assert_eq!(near_miss("nosuch", algorithms), None);
        assert_eq!(near_miss("bufer", ["buffer", "alpha"]), Some("buffer"));
        assert_eq!(near_miss("gg", ["g", "alpha_init"]), Some("g"));
        assert_eq!(near_miss("x", ["g", "k"]), None, "one letter for another is no near miss");
        assert_eq!(did_you_mean("enable", ["enabled", "threshold"]), "; did you mean `enabled`?");
        assert_eq!(did_you_mean("zzz", ["enabled"]), "");
    }
}

/// Turns serde's type vocabulary (`u32`, `struct SimConfig`, `sequence`) into words, and adds
/// the near miss an unknown key or value most likely meant.
pub fn in_words(msg: &str) -> String {
    if let Some(rest) = msg.strip_prefix("unknown field `").or_else(|| msg.strip_prefix("unknown variant `")) {
        // "unknown field `bufer`, expected one of `buffer`, `alpha`": the names are quoted.
        let (word, expected) = rest.split_once('`').unwrap_or_default();
        let names = expected.split('`').skip(1).step_by(2);
        return format!("{msg}{}", did_you_mean(word, names));
    }
    let Some(rest) = msg.strip_prefix("invalid type: ").or_else(|| msg.strip_prefix("invalid value: ")) else {
        return msg.to_string();
    };
    let Some((got, expected)) = rest.rsplit_once(", expected ") else {
        return msg.to_string();
    };
    let expected = match expected.trim() {
        "u8" => "a whole number from 0 to 255".to_string(),
        "u16" => "a whole number from 0 to 65535".to_string(),
        "u32" => "a whole number from 0 to 4294967295".to_string(),
        "u64" | "usize" => "a whole number of 0 or more".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a sequence" => "a list like [1, 2]".to_string(),
        "a map" => "a table".to_string(),
        e if e.starts_with("struct ") => "a table of named keys".to_string(),
        e => e.to_string(),
    };
    let got = got.trim();
    let got = if let Some(v) = got.strip_prefix("integer ").or_else(|| got.strip_prefix("floating point ")) {
        format!("the number {}", v.trim_matches('`'))
    } else if let Some(v) = got.strip_prefix("boolean ") {
        format!("the boolean {}", v.trim_matches('`'))
    } else if let Some(v) = got.strip_prefix("string ") {
        format!("the text {v}")
    } else if got == "sequence" {
        "a list".to_string()
    } else if got == "map" {
        "a table".to_string()
    } else {
        got.to_string()
    };
    format!("expected {expected}; got {got}")
}

/// A TOML value of the wrong kind, described for an error message.
pub fn value_in_words(v: &toml::Value) -> String {
    match v {
        toml::Value::Array(_) => "a list".into(),
        toml::Value::Table(_) => "a table".into(),
        toml::Value::Boolean(b) => format!("the boolean {b}"),
        other => other.to_string(),
    }
}
