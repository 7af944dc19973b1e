//! The scenario file: its schema (`schema.rs`), reading it with its `--set` overrides
//! (`overrides.rs`), the world it builds (`build.rs`) and the checks that need the topology
//! (`validation.rs`), every problem named by file, line and key.

mod build;
pub mod classes;
mod edit;
mod footprint;
pub mod host_policy;
mod overrides;
mod schema;
mod validation;

pub use build::{build, build_measured, prepare};
pub use classes::{ClassConfig, ClassTransport, MatchRules, DEFAULT_CC};
pub(crate) use edit::Edit;
pub use footprint::Footprint;

pub(crate) use overrides::parse_edited;
pub use overrides::{load, parse, LoadedScenario, ScenarioError};
pub use schema::*;

#[cfg(test)]
mod tests {
    use super::overrides::*;
    use super::*;
    use crate::net::link::Link;
    use crate::net::port::Port;
    use crate::time::{Rate, Time};

    #[test]
    fn shift_by_rate_takes_one_per_doubling_above_the_host_rate() {
        // The HPCC simulator's third.cc: shift 3 at the NIC's 100G, 1 at 400G, never below 0.
        let ports: Vec<Port> = [25, 100, 200, 400, 6400]
            .iter()
            .map(|&g| Port::new(0, 0, 1, Rate::gbps(g), Link { delay: Time::from_us(1), ..Link::default() }, 1))
            .collect();
        let table = PfcTable { enabled: true, shift_by_rate: true, ..PfcTable::default() };
        let cfg = table.settings(1538, Rate::gbps(100)).unwrap().unwrap()(&ports);
        assert_eq!(cfg.shift, vec![3, 3, 2, 1, 0]);
        let fixed = PfcTable { enabled: true, ..PfcTable::default() }.settings(1538, Rate::gbps(100)).unwrap().unwrap()(&ports);
        assert_eq!(fixed.shift, vec![3; 5], "off by default");
    }

    #[test]
    fn a_key_is_found_on_its_own_line_or_the_nearest_one_above_it() {
        let text = "[[workloads]]\nkind = \"flows\"\nsize = \"1KB\"\n\n[[workloads]]\nkind = \"bulk\"\nsize = 5\n\
                    [classes.q]\ncc = \"dctcp\"\nparams = { gg = 1 }\n";
        assert_eq!(line_of_key(text, "workloads[1].size"), Some(7), "the second entry's, not the first's");
        assert_eq!(line_of_key(text, "workloads[0].size"), Some(3));
        assert_eq!(line_of_key(text, "workloads[1]"), Some(5), "the entry's header");
        assert_eq!(line_of_key(text, "workloads[1].cc"), Some(5), "a key the entry lacks: its header");
        assert_eq!(line_of_key(text, "classes.q.params.gg"), Some(10), "inside an inline table: its line");
        assert_eq!(line_of_key(text, "classes.q.cc"), Some(9));
        let listed = "[[workloads]]\nkind = \"flows\"\nflows = [\n  { src = 0, dst = 1, size = \"1KB\" },\n  { name = \"b,[\", src = 1 },\n\n  { src = 2 },\n]\n";
        assert_eq!(line_of_key(listed, "workloads[0].flows[0].after[0]"), Some(4), "an inline entry: its own line");
        assert_eq!(line_of_key(listed, "workloads[0].flows[2]"), Some(7), "brackets and commas in strings are text");
        assert_eq!(line_of_key(listed, "workloads[0].flows[3]"), Some(3), "past the last entry: the array's line");
    }

    #[test]
    fn a_quoted_key_in_a_set_path_is_one_key_without_its_quotes() {
        let keys = split_key_path(r#"switch.rates."2.5Gbps".ecn.k"#).unwrap();
        assert_eq!(keys, ["switch", "rates", "2.5Gbps", "ecn", "k"]);
        assert_eq!(split_key_path("classes.query.cc").unwrap(), ["classes", "query", "cc"]);
        assert_eq!(split_key_path(r#"switch.rates."100Gbps.ecn"#), None, "an open quote");
        assert_eq!(split_key_path("workloads[0].connections").unwrap(), ["workloads", "0", "connections"], "as errors spell it");
        assert_eq!(split_key_path("workloads[1].flows[2]").unwrap(), ["workloads", "1", "flows", "2"]);
        assert_eq!(split_key_path(r#"a."b[0]".c"#).unwrap(), ["a", "b[0]", "c"], "brackets in quotes are text");
        assert!(split_key_path("[0].size").unwrap().contains(&String::new()), "an index of nothing is an empty key");
        let mut doc: toml_edit::DocumentMut = "[switch.rates.\"100Gbps\".ecn]\nmode = \"red\"\n".parse().unwrap();
        apply_override(&mut doc, r#"switch.rates."100Gbps".ecn.mark_at=dequeue"#).unwrap();
        let t: toml::Table = doc.to_string().parse().unwrap();
        assert_eq!(t["switch"]["rates"]["100Gbps"]["ecn"]["mark_at"].as_str(), Some("dequeue"));
        assert_eq!(t["switch"]["rates"]["100Gbps"]["ecn"]["mode"].as_str(), Some("red"), "the table is the same one");
    }
}
