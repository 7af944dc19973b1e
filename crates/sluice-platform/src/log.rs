//! The agent's log: a line per event, stamped with the UTC time to the millisecond, so a log read
//! after the fact (a file, a container's output) says when each version arrived and when each
//! failure began and ended. What happened goes to stdout; warnings and errors to stderr.

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The civil date (year, month, day) of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: u64) -> (i64, u64, u64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    (yoe + era * 400 + i64::from(mo <= 2), mo, d)
}

/// Seconds since the epoch as `2026-11-28 12:00:00`, as tables show a time.
pub fn utc(t: u64) -> String {
    let (y, mo, d) = civil(t / 86400);
    format!("{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}", t % 86400 / 3600, t % 3600 / 60, t % 60)
}

/// Milliseconds since the epoch as RFC 3339 (`2026-11-28T12:00:00.250Z`), as the log stamps a line.
pub fn rfc3339_ms(ms: u64) -> String {
    let t = ms / 1000;
    let (y, mo, d) = civil(t / 86400);
    format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", t % 86400 / 3600, t % 3600 / 60, t % 60, ms % 1000)
}

/// Now, as the log stamps a line.
pub fn stamp() -> String {
    rfc3339_ms(now_ms())
}

/// A line of the agent's log on stdout: what happened.
#[macro_export]
macro_rules! log_info {
    ($($arg:tt)*) => { println!("{} {}", $crate::log::stamp(), format_args!($($arg)*)) };
}

/// A warning in the agent's log, on stderr.
#[macro_export]
macro_rules! log_warn {
    ($($arg:tt)*) => { eprintln!("{} warning: {}", $crate::log::stamp(), format_args!($($arg)*)) };
}

/// An error in the agent's log, on stderr.
#[macro_export]
macro_rules! log_error {
    ($($arg:tt)*) => { eprintln!("{} error: {}", $crate::log::stamp(), format_args!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_tables_and_the_log_show_them() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_867_200), "2026-11-28 12:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(rfc3339_ms(1_795_867_200_250), "2026-11-28T12:00:00.250Z");
        assert_eq!(rfc3339_ms(951_868_799_999), "2000-02-29T23:59:59.999Z");
    }
}
