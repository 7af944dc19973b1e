//! Flow-trace import: a plain CSV format, the HPCC simulator's flow file and the UEC reference
//! simulator's connection matrix.

use crate::time::Time;

/// The CSV header every trace must start with.
const CSV_HEADER: [&str; 4] = ["src", "dst", "size_bytes", "start"];
/// The HPCC flow line form, quoted in errors.
const HPCC_FORM: &str = "`<src> <dst> <priority> <dport> <size bytes> <start seconds>`";

/// One flow read from a trace: host ordinals, size, start time, and (HPCC format) priority class and destination port.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFlow {
    /// Source host ordinal.
    pub src: usize,
    /// Destination host ordinal.
    pub dst: usize,
    /// Flow size in bytes.
    pub size_bytes: u64,
    /// Time the flow starts.
    pub start: Time,
    /// Priority class (HPCC format only).
    pub priority: Option<u8>,
    /// Destination port (HPCC format only).
    pub dport: Option<u16>,
    /// 1-based line of the trace file this flow came from (0 if the flow was not read from a file).
    pub line: usize,
}

/// Parses a CSV trace with header `src,dst,size_bytes,start` (start is a duration with unit, e.g. "10us", or a bare number of nanoseconds); extra columns after these four are an error naming the column; `#` comment lines and blank lines allowed.
pub fn parse_csv_trace(text: &str, name: &str) -> Result<Vec<TraceFlow>, String> {
    let header_form = CSV_HEADER.join(",");
    let mut flows = Vec::new();
    let mut seen_header = false;
    for (line_no, line) in content_lines(text) {
        let err = |msg: String| format!("{name} line {line_no}: {msg}");
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if !seen_header {
            check_csv_header(&fields, &header_form).map_err(err)?;
            seen_header = true;
            continue;
        }
        if fields.len() != CSV_HEADER.len() {
            return Err(err(format!(
                "expected 4 fields `src,dst,size_bytes,start`, got {} (\"{line}\")",
                fields.len()
            )));
        }
        let src = parse_host(fields[0], "src").map_err(err)?;
        let dst = parse_host(fields[1], "dst").map_err(err)?;
        let size_bytes = parse_size(fields[2], "size_bytes").map_err(err)?;
        let start = parse_csv_start(fields[3]).map_err(err)?;
        flows.push(TraceFlow {
            src,
            dst,
            size_bytes,
            start,
            priority: None,
            dport: None,
            line: line_no,
        });
    }
    if !seen_header {
        return Err(format!(
            "{name} line 1: empty trace; expected the header `{header_form}`"
        ));
    }
    Ok(flows)
}

/// Parses the HPCC simulator's flow file: first line the flow count N, then N lines `<src> <dst> <priority> <dport> <size bytes> <start seconds>` (start is a decimal number of seconds like 2.000001, converted to picoseconds exactly, without floating point).
pub fn parse_hpcc_flows(text: &str, name: &str) -> Result<Vec<TraceFlow>, String> {
    let mut lines = content_lines(text);
    let Some((count_line, count_text)) = lines.next() else {
        return Err(format!(
            "{name} line 1: empty flow file; expected the flow count on the first line"
        ));
    };
    let count: usize = match count_text.split_whitespace().collect::<Vec<_>>()[..] {
        [n] if is_digits(n) => n.parse().map_err(|_| {
            format!("{name} line {count_line}: flow count {n} is too large")
        })?,
        _ => {
            return Err(format!(
                "{name} line {count_line}: expected the flow count (one non-negative integer), got \"{count_text}\""
            ))
        }
    };
    // The count comes from the file, so do not trust it for the allocation size.
    let mut flows = Vec::with_capacity(count.min(1 << 16));
    for (line_no, line) in lines {
        let err = |msg: String| format!("{name} line {line_no}: {msg}");
        if flows.len() == count {
            return Err(err(format!(
                "more flow lines than the count of {count} on line {count_line}"
            )));
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != 6 {
            return Err(err(format!(
                "expected 6 fields {HPCC_FORM}, got {} (\"{line}\")",
                fields.len()
            )));
        }
        let src = parse_host(fields[0], "src").map_err(err)?;
        let dst = parse_host(fields[1], "dst").map_err(err)?;
        let priority = parse_small::<u8>(fields[2], "priority").map_err(err)?;
        let dport = parse_small::<u16>(fields[3], "dport").map_err(err)?;
        let size_bytes = parse_size(fields[4], "size").map_err(err)?;
        let start = parse_seconds(fields[5]).map_err(err)?;
        flows.push(TraceFlow {
            src,
            dst,
            size_bytes,
            start,
            priority: Some(priority),
            dport: Some(dport),
            line: line_no,
        });
    }
    if flows.len() != count {
        return Err(format!(
            "{name} line {count_line}: the count says {count} flows but the file has {} flow lines",
            flows.len()
        ));
    }
    Ok(flows)
}

/// The `.cm` connection line form, quoted in errors.
const CM_FORM: &str = "`<src>-><dst> [id <n>] start <microseconds> size <bytes>`";

/// Parses the UEC reference simulator's connection matrix (uet-htsim's `.cm`,
/// `ConnectionMatrix::load`): `Nodes <n>` and `Connections <c>` lines, then a line a
/// connection. A start is in microseconds, cut to whole ones as the reference cuts it
/// (`uec.cpp:615`); `Nodes` must be the topology's `hosts`. Triggers, messages and failures are
/// refused by name.
pub fn parse_htsim_cm(text: &str, name: &str, hosts: usize) -> Result<Vec<TraceFlow>, String> {
    let (mut nodes, mut count) = (None, None);
    let mut flows = Vec::new();
    for (line_no, line) in content_lines(text) {
        let err = |msg: String| format!("{name} line {line_no}: {msg}");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[0].to_ascii_lowercase().as_str() {
            "nodes" | "connections" => {
                let [key, n] = words[..] else { return Err(err(format!("expected `{} <count>`, got \"{line}\"", words[0]))) };
                let n = parse_host(n, key).map_err(err)?;
                if key.eq_ignore_ascii_case("nodes") {
                    if n != hosts {
                        return Err(err(format!("Nodes {n}, but the topology has {hosts} hosts")));
                    }
                    nodes = Some(n);
                } else {
                    count = Some((n, line_no));
                }
            }
            key @ ("triggers" | "failures") => {
                return Err(err(format!("{key} are not supported: every connection starts at its time (fail links with [[failures]])")));
            }
            _ => flows.push(parse_cm_connection(&words).map_err(err).map(|mut f| {
                f.line = line_no;
                f
            })?),
        }
    }
    if nodes.is_none() {
        return Err(format!("{name}: no `Nodes <n>` line; the reference's matrices start with one"));
    }
    match count {
        Some((c, _)) if c == flows.len() => Ok(flows),
        Some((c, line)) => Err(format!("{name} line {line}: Connections {c}, but the file has {} connection lines", flows.len())),
        None => Err(format!("{name}: no `Connections <c>` line; the reference's matrices give the count")),
    }
}

/// One `.cm` connection line, split into words.
fn parse_cm_connection(words: &[&str]) -> Result<TraceFlow, String> {
    let (src, dst) = words[0].split_once("->").ok_or_else(|| format!("expected a connection {CM_FORM}, got \"{}\"", words.join(" ")))?;
    let (src, dst) = (parse_host(src, "src")?, parse_host(dst, "dst")?);
    let (mut start, mut size) = (None, None);
    let mut rest = words[1..].chunks(2);
    for pair in rest.by_ref() {
        let [key, value] = *pair else { return Err(format!("\"{}\" has no value; expected {CM_FORM}", pair[0])) };
        match key {
            "id" => {
                parse_host(value, "id")?;
            }
            "start" => {
                let us: f64 = value.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(|| format!("start \"{value}\" is not a time; expected microseconds, a non-negative number"))?;
                start = Some(Time::from_us(us as u64));
            }
            "size" => size = Some(parse_size(value, "size")?),
            "trigger" | "send_done_trigger" | "recv_done_trigger" | "msg" => {
                return Err(format!("{key} is not supported: every connection starts at its time and carries one message"));
            }
            "prio" => {}
            _ => return Err(format!("unknown field \"{key}\"; expected {CM_FORM}")),
        }
    }
    Ok(TraceFlow {
        src,
        dst,
        size_bytes: size.ok_or_else(|| format!("no size; expected {CM_FORM}"))?,
        start: start.ok_or_else(|| format!("no start; expected {CM_FORM}"))?,
        priority: None,
        dport: None,
        line: 0,
    })
}

/// Checks every flow against the host count: src/dst < hosts, src != dst, size > 0; errors name the file and the flow's source line.
pub fn validate(flows: &[TraceFlow], hosts: usize, name: &str) -> Result<(), String> {
    for (i, f) in flows.iter().enumerate() {
        // Flows built in code rather than read from a file have no line; name them by position.
        let at = if f.line > 0 {
            format!("{name} line {}", f.line)
        } else {
            format!("{name} flow {}", i + 1)
        };
        for (role, host) in [("src", f.src), ("dst", f.dst)] {
            if host >= hosts {
                let range = if hosts == 0 {
                    "none".to_string()
                } else {
                    format!("0-{}", hosts - 1)
                };
                return Err(format!(
                    "{at}: {role} host {host} does not exist; the topology has {hosts} hosts (ordinals {range})"
                ));
            }
        }
        if f.src == f.dst {
            return Err(format!(
                "{at}: src and dst are both host {}; a flow needs two different hosts",
                f.src
            ));
        }
        if f.size_bytes == 0 {
            return Err(format!(
                "{at}: size is 0 bytes; a flow must carry at least 1 byte"
            ));
        }
    }
    Ok(())
}

/// Non-blank, non-comment lines with their 1-based line numbers, trimmed.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    // Editors on some platforms prepend a byte-order mark, which would otherwise spoil the first field.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Checks the CSV header fields, naming the first column that is wrong, missing or extra.
fn check_csv_header(fields: &[&str], form: &str) -> Result<(), String> {
    for (i, want) in CSV_HEADER.iter().enumerate() {
        match fields.get(i) {
            Some(got) if got.eq_ignore_ascii_case(want) => {}
            Some(got) => {
                return Err(format!(
                    "column {} is \"{got}\", expected \"{want}\"; the header must be `{form}`",
                    i + 1
                ))
            }
            None => {
                return Err(format!(
                    "column \"{want}\" is missing; the header must be `{form}`"
                ))
            }
        }
    }
    if let Some(extra) = fields.get(CSV_HEADER.len()) {
        return Err(format!(
            "unexpected column \"{extra}\" after \"start\"; the header must be exactly `{form}`"
        ));
    }
    Ok(())
}

/// True for a non-empty run of ASCII digits.
fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parses a host ordinal.
fn parse_host(s: &str, field: &str) -> Result<usize, String> {
    if !is_digits(s) {
        return Err(format!(
            "{field} \"{s}\" is not a host ordinal; expected a non-negative integer"
        ));
    }
    s.parse()
        .map_err(|_| format!("{field} {s} is too large for a host ordinal"))
}

/// Parses a flow size in whole bytes, with a dedicated message for negative sizes.
fn parse_size(s: &str, field: &str) -> Result<u64, String> {
    if s.starts_with('-') && is_digits(&s[1..]) {
        return Err(format!(
            "{field} {s} is negative; expected a whole number of bytes"
        ));
    }
    if !is_digits(s) {
        return Err(format!("{field} \"{s}\" is not a whole number of bytes"));
    }
    s.parse().map_err(|_| format!("{field} {s} is too large"))
}

/// Parses a small unsigned field (priority class, port), naming its range on overflow.
fn parse_small<T: std::str::FromStr + Bounded>(s: &str, field: &str) -> Result<T, String> {
    if !is_digits(s) {
        return Err(format!("{field} \"{s}\" is not a non-negative integer"));
    }
    s.parse()
        .map_err(|_| format!("{field} {s} is out of range; expected 0-{}", T::MAX_U64))
}

/// The largest value of a small unsigned type, for range messages.
trait Bounded {
    /// The type's maximum as u64.
    const MAX_U64: u64;
}
impl Bounded for u8 {
    const MAX_U64: u64 = u8::MAX as u64;
}
impl Bounded for u16 {
    const MAX_U64: u64 = u16::MAX as u64;
}

/// Parses a CSV start time: a duration with a unit, or a bare number of nanoseconds.
fn parse_csv_start(s: &str) -> Result<Time, String> {
    let bare = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.');
    let parsed = if bare {
        Time::parse(&format!("{s}ns"))
    } else {
        Time::parse(s)
    };
    parsed.map_err(|_| {
        format!(
            "start \"{s}\" is not a time; expected a non-negative duration with a unit like \"10us\" \
             or a bare number of nanoseconds"
        )
    })
}

/// Parses HPCC's start time, a plain decimal number of seconds, exactly to picoseconds.
fn parse_seconds(s: &str) -> Result<Time, String> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let plain = !(int.is_empty() && frac.is_empty())
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit());
    let bad = || {
        format!(
            "start \"{s}\" is not a time; expected a non-negative decimal number of seconds \
             like 2.000001, at most 12 decimal places"
        )
    };
    if !plain {
        return Err(bad());
    }
    // Time::parse works on the decimal digits, so no binary rounding creeps in.
    Time::parse(&format!("{s}s")).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_connection_matrix_is_read_with_starts_cut_to_whole_microseconds() {
        let cm = "Nodes 16\nConnections 2\n0->13 start 0 size 2000000\n\n4->5 id 7 start 2.9 size 100 prio 1\n";
        let flows = parse_htsim_cm(cm, "one.cm", 16).unwrap();
        assert_eq!(flows, [flow(0, 13, 2_000_000, 0, 3), flow(4, 5, 100, 2_000_000, 5)]);
        let err = |text: &str| parse_htsim_cm(text, "x.cm", 16).unwrap_err();
        assert_eq!(err("Nodes 128\nConnections 0\n"), "x.cm line 1: Nodes 128, but the topology has 16 hosts");
        assert_eq!(err("Nodes 16\nConnections 2\n0->1 start 0 size 5\n"), "x.cm line 2: Connections 2, but the file has 1 connection lines");
        assert_eq!(err("Nodes 16\nConnections 1\n0-1 start 0 size 5\n"), "x.cm line 3: expected a connection `<src>-><dst> [id <n>] start <microseconds> size <bytes>`, got \"0-1 start 0 size 5\"");
        assert_eq!(err("Nodes 16\nConnections 1\n0->1 trigger 1 size 5\n"), "x.cm line 3: trigger is not supported: every connection starts at its time and carries one message");
        assert_eq!(err("Nodes 16\nConnections 1\n0->1 start 0\n"), "x.cm line 3: no size; expected `<src>-><dst> [id <n>] start <microseconds> size <bytes>`");
        assert_eq!(err("Nodes 16\nConnections 1\n0->1 start -3 size 5\n"), "x.cm line 3: start \"-3\" is not a time; expected microseconds, a non-negative number");
        assert!(err("Nodes 16\nConnections 1\nFailures 1\n").starts_with("x.cm line 3: failures are not supported"));
        assert!(err("Connections 0\n").starts_with("x.cm: no `Nodes <n>` line"));
        assert!(err("Nodes 16\nConnections 1\n0->1 start 0 size 5 colour red\n").contains("unknown field \"colour\""));
    }

    fn flow(src: usize, dst: usize, size_bytes: u64, start_ps: u64, line: usize) -> TraceFlow {
        TraceFlow {
            src,
            dst,
            size_bytes,
            start: Time(start_ps),
            priority: None,
            dport: None,
            line,
        }
    }

    #[test]
    fn parses_csv() {
        let text = "\u{feff}# a comment\n\
                    src, dst ,size_bytes,start\r\n\
                    \n\
                    0,1,1500,10us\n\
                    # mid comment\n\
                    3 , 2 , 1000000 , 2.5ms\n\
                    4,5,64,1200\n\
                    4,5,64,0.5\n";
        let flows = parse_csv_trace(text, "t.csv").unwrap();
        assert_eq!(
            flows,
            vec![
                flow(0, 1, 1500, 10_000_000, 4),
                flow(3, 2, 1_000_000, 2_500_000_000, 6),
                flow(4, 5, 64, 1_200_000, 7),
                flow(4, 5, 64, 500, 8),
            ]
        );
        assert_eq!(
            parse_csv_trace("src,dst,size_bytes,start\n", "t.csv").unwrap(),
            vec![]
        );
    }

    #[test]
    fn parses_hpcc() {
        let text = "3\n\
                    2 1 3 100 200000 2.000001\n\
                    0 7 3 100 1 2\n\
                    \n\
                    5 6 0 65535 18446744073709551615 0.000000000001\n";
        let flows = parse_hpcc_flows(text, "flow.txt").unwrap();
        assert_eq!(flows.len(), 3);
        assert_eq!(
            flows[0],
            TraceFlow {
                src: 2,
                dst: 1,
                size_bytes: 200_000,
                start: Time(2_000_001_000_000),
                priority: Some(3),
                dport: Some(100),
                line: 2,
            }
        );
        assert_eq!(flows[1].start, Time(2_000_000_000_000));
        assert_eq!((flows[1].src, flows[1].dst, flows[1].size_bytes), (0, 7, 1));
        assert_eq!(flows[2].start, Time(1));
        assert_eq!(flows[2].size_bytes, u64::MAX);
        assert_eq!(
            (flows[2].priority, flows[2].dport, flows[2].line),
            (Some(0), Some(65535), 5)
        );
        assert_eq!(parse_hpcc_flows("0\n", "flow.txt").unwrap(), vec![]);
    }

    fn expect_err(result: Result<Vec<TraceFlow>, String>, file: &str, line: usize, needle: &str) {
        let e = result.unwrap_err();
        assert!(
            e.starts_with(&format!("{file} line {line}: ")),
            "wrong line in: {e}"
        );
        assert!(e.contains(needle), "missing {needle:?} in: {e}");
    }

    #[test]
    fn rejects_malformed_csv() {
        let csv = |t: &str| parse_csv_trace(t, "t.csv");
        expect_err(csv(""), "t.csv", 1, "empty trace");
        expect_err(
            csv("src,dst,bytes,start\n"),
            "t.csv",
            1,
            "column 3 is \"bytes\"",
        );
        expect_err(
            csv("# c\nsrc,dst,size_bytes\n"),
            "t.csv",
            2,
            "column \"start\" is missing",
        );
        expect_err(
            csv("src,dst,size_bytes,start,priority\n"),
            "t.csv",
            1,
            "unexpected column \"priority\"",
        );
        expect_err(csv("0,1,100,1us\n"), "t.csv", 1, "column 1 is \"0\"");
        let h = "src,dst,size_bytes,start\n";
        expect_err(
            csv(&format!("{h}0,1,100\n")),
            "t.csv",
            2,
            "expected 4 fields",
        );
        expect_err(
            csv(&format!("{h}0,1,100,1us,9\n")),
            "t.csv",
            2,
            "expected 4 fields",
        );
        expect_err(
            csv(&format!("{h}0,1,100,1us\nx,1,100,1us\n")),
            "t.csv",
            3,
            "src \"x\"",
        );
        expect_err(csv(&format!("{h}0,-1,100,1us\n")), "t.csv", 2, "dst \"-1\"");
        expect_err(
            csv(&format!("{h}0,1,-100,1us\n")),
            "t.csv",
            2,
            "size_bytes -100 is negative",
        );
        expect_err(
            csv(&format!("{h}0,1,1.5,1us\n")),
            "t.csv",
            2,
            "size_bytes \"1.5\"",
        );
        expect_err(
            csv(&format!("{h}0,1,100,soon\n")),
            "t.csv",
            2,
            "start \"soon\"",
        );
        expect_err(csv(&format!("{h}0,1,100,-5\n")), "t.csv", 2, "start \"-5\"");
        expect_err(
            csv(&format!("{h}0,1,100,3 fortnights\n")),
            "t.csv",
            2,
            "start \"3 fortnights\"",
        );
    }

    #[test]
    fn rejects_malformed_hpcc() {
        let hp = |t: &str| parse_hpcc_flows(t, "flow.txt");
        expect_err(hp(""), "flow.txt", 1, "empty flow file");
        expect_err(hp("two\n"), "flow.txt", 1, "expected the flow count");
        expect_err(hp("2 3\n"), "flow.txt", 1, "expected the flow count");
        expect_err(
            hp("2\n0 1 3 100 10 1.0\n"),
            "flow.txt",
            1,
            "count says 2 flows but the file has 1",
        );
        expect_err(
            hp("1\n0 1 3 100 10 1.0\n\n2 3 3 100 10 1.0\n"),
            "flow.txt",
            4,
            "more flow lines than the count of 1",
        );
        expect_err(hp("1\n0 1 3 100 10\n"), "flow.txt", 2, "expected 6 fields");
        expect_err(
            hp("1\n0 1 3 100 10 1.0 7\n"),
            "flow.txt",
            2,
            "expected 6 fields",
        );
        expect_err(
            hp("1\n0 1 3 100 -10 1.0\n"),
            "flow.txt",
            2,
            "size -10 is negative",
        );
        expect_err(
            hp("1\n0 1 300 100 10 1.0\n"),
            "flow.txt",
            2,
            "priority 300 is out of range; expected 0-255",
        );
        expect_err(
            hp("1\n0 1 3 70000 10 1.0\n"),
            "flow.txt",
            2,
            "dport 70000 is out of range",
        );
        expect_err(hp("1\n0 b 3 100 10 1.0\n"), "flow.txt", 2, "dst \"b\"");
        expect_err(
            hp("1\n0 1 3 100 10 1e-6\n"),
            "flow.txt",
            2,
            "start \"1e-6\"",
        );
        expect_err(
            hp("1\n0 1 3 100 10 -1.0\n"),
            "flow.txt",
            2,
            "start \"-1.0\"",
        );
        expect_err(
            hp("1\n0 1 3 100 10 1.0000000000001\n"),
            "flow.txt",
            2,
            "at most 12 decimal places",
        );
        expect_err(hp("1\n0 1 3 100 10 .\n"), "flow.txt", 2, "start \".\"");
    }

    #[test]
    fn validates_against_topology() {
        let ok = vec![flow(0, 1, 10, 0, 2), flow(7, 0, 1, 5, 3)];
        assert_eq!(validate(&ok, 8, "t.csv"), Ok(()));
        let e = validate(&[flow(0, 1, 10, 0, 2), flow(8, 1, 10, 0, 9)], 8, "t.csv").unwrap_err();
        assert!(
            e.starts_with(
                "t.csv line 9: src host 8 does not exist; the topology has 8 hosts (ordinals 0-7)"
            ),
            "{e}"
        );
        let e = validate(&[flow(0, 12, 10, 0, 4)], 8, "t.csv").unwrap_err();
        assert!(e.starts_with("t.csv line 4: dst host 12"), "{e}");
        let e = validate(&[flow(3, 3, 10, 0, 5)], 8, "t.csv").unwrap_err();
        assert!(
            e.starts_with("t.csv line 5: src and dst are both host 3"),
            "{e}"
        );
        let e = validate(&[flow(3, 4, 0, 0, 6)], 8, "t.csv").unwrap_err();
        assert!(e.starts_with("t.csv line 6: size is 0 bytes"), "{e}");
        let e = validate(&[flow(0, 1, 10, 0, 0), flow(0, 1, 0, 0, 0)], 8, "gen").unwrap_err();
        assert!(e.starts_with("gen flow 2: size is 0 bytes"), "{e}");
        let e = validate(&[flow(0, 1, 10, 0, 1)], 0, "t.csv").unwrap_err();
        assert!(e.contains("ordinals none"), "{e}");
    }

    #[test]
    fn validate_after_parse_names_source_lines() {
        let flows =
            parse_hpcc_flows("2\n# c\n0 1 3 100 10 0.5\n1 1 3 100 10 0.6\n", "flow.txt").unwrap();
        let e = validate(&flows, 4, "flow.txt").unwrap_err();
        assert!(
            e.starts_with("flow.txt line 4: src and dst are both host 1"),
            "{e}"
        );
    }
}
