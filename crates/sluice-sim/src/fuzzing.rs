//! Entry points for the fuzz targets in `fuzz/` and the corpus replay test: each takes arbitrary
//! bytes and must return, an answer or an error, without panicking, hanging or allocating beyond
//! the scenario's limits. They run what `sluice check` and the readers run, nothing else.

use crate::workload::{cdf::Cdf, trace};
use std::path::Path;

/// The separator between a scenario's text and its `--set` overrides (one a line) in a fuzz input.
pub const OVERRIDES: &str = "\n#--set\n";

/// Parses and validates a scenario as `sluice check` does; text after [`OVERRIDES`] holds `--set`
/// overrides, one a line. Files a scenario names resolve in the bundled `scenarios/` directory.
/// Panics on an error message that speaks Rust or gives no reason.
pub fn scenario(data: &[u8]) -> Result<(), String> {
    let result = check_scenario(data);
    if let Err(e) = &result {
        for rust in ["u8", "u16", "u32", "u64", "usize", "i64", "f64", "struct", "a sequence", "a map"] {
            assert!(!e.contains(&format!("expected {rust}")), "an error speaks Rust ({rust}): {e}");
        }
        assert!(!e.contains("untagged enum"), "an error speaks Rust: {e}");
        for problem in e.lines() {
            assert!(!problem.trim_end().ends_with(':'), "an error without a reason: {problem}");
        }
    }
    result
}

fn check_scenario(data: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(data);
    let (toml, sets) = text.split_once(OVERRIDES).unwrap_or((&text, ""));
    let overrides: Vec<String> = sets.lines().filter(|l| !l.is_empty()).map(String::from).collect();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    crate::check::check_text(toml, "fuzz.toml", &base, &overrides)
        .map(|_| ())
        .map_err(|problems| problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))
}

/// Parses a CDF file and draws from it.
pub fn cdf(data: &[u8]) -> Result<(), String> {
    let cdf = Cdf::parse(&String::from_utf8_lossy(data), "fuzz.cdf")?;
    let (mean, median) = (cdf.mean(), cdf.quantile(0.5));
    assert!(mean.is_finite() && mean >= 0.0, "a parsed CDF has mean {mean}");
    assert!(cdf.sample_with(0.999) >= median, "a parsed CDF is not monotone");
    Ok(())
}

/// Parses a CSV flow trace and validates it against 1,024 hosts.
pub fn csv_trace(data: &[u8]) -> Result<(), String> {
    let flows = trace::parse_csv_trace(&String::from_utf8_lossy(data), "fuzz.csv")?;
    trace::validate(&flows, 1024, "fuzz.csv")
}

/// Parses an HPCC flow file and validates it against 1,024 hosts.
pub fn hpcc_trace(data: &[u8]) -> Result<(), String> {
    let flows = trace::parse_hpcc_flows(&String::from_utf8_lossy(data), "fuzz.txt")?;
    trace::validate(&flows, 1024, "fuzz.txt")
}

/// Parses an HPCC topology file.
pub fn hpcc_topology(data: &[u8]) -> Result<(), String> {
    let graph = crate::net::topology::parse_hpcc_topology(&String::from_utf8_lossy(data), "fuzz-topo.txt")?;
    graph.ports();
    Ok(())
}

/// Decodes a TCP-INT option; whatever decodes re-encodes to the same 12 bytes (panics otherwise).
pub fn tcp_int(data: &[u8]) -> Result<(), String> {
    use crate::packet::tcp_int::TcpInt;
    let opt = TcpInt::decode(data).map_err(|e| e.to_string())?;
    assert_eq!(opt.encode()[..], data[..12], "decode then encode changed the option");
    Ok(())
}

/// Every target by name, as `fuzz/` and the replay test call them.
pub const TARGETS: [(&str, fn(&[u8]) -> Result<(), String>); 6] = [
    ("scenario", scenario),
    ("cdf", cdf),
    ("csv_trace", csv_trace),
    ("hpcc_trace", hpcc_trace),
    ("hpcc_topology", hpcc_topology),
    ("tcp_int", tcp_int),
];
