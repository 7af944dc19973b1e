//! Simulated time (integer picoseconds), link rates (bit/s) and byte sizes, with human-unit parsing.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in (or span of) simulated time, in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// Time zero, the start of every run.
    pub const ZERO: Time = Time(0);
    /// The latest representable time (about 213 days).
    pub const MAX: Time = Time(u64::MAX);
    /// The longest duration or instant a scenario may state (1,000,000 s, about 11.6 days): sums of
    /// a handful of such values (a start plus a run, a delay plus a transmission) stay representable.
    pub const INPUT_MAX: Time = Time(1_000_000_000_000_000_000);

    /// A span of `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Time {
        Time(ns * 1_000)
    }
    /// A span of `us` microseconds.
    pub const fn from_us(us: u64) -> Time {
        Time(us * 1_000_000)
    }
    /// A span of `ms` milliseconds.
    pub const fn from_ms(ms: u64) -> Time {
        Time(ms * 1_000_000_000)
    }
    /// Picoseconds.
    pub const fn ps(self) -> u64 {
        self.0
    }
    /// Whole nanoseconds (truncated).
    pub const fn ns(self) -> u64 {
        self.0 / 1_000
    }
    /// Seconds as a float, for reporting only.
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 * 1e-12
    }
    /// Seconds from a float, for rates computed by algorithms (rounded to the nearest ps).
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s * 1e12).round().max(0.0) as u64)
    }
    /// Saturating subtraction.
    pub fn saturating_sub(self, o: Time) -> Time {
        Time(self.0.saturating_sub(o.0))
    }
    /// Checked addition.
    pub fn checked_add(self, o: Time) -> Option<Time> {
        self.0.checked_add(o.0).map(Time)
    }
    /// Multiplies a span by an integer, saturating.
    pub fn saturating_mul(self, k: u64) -> Time {
        Time(self.0.saturating_mul(k))
    }

    /// Parses "10us", "2.5ms", "1s", "800ps", "3ns".
    pub fn parse(s: &str) -> Result<Time, String> {
        let (num, unit) = split_unit(s);
        let scale = match unit {
            "ps" => 1,
            "ns" => 1_000,
            "us" | "µs" => 1_000_000,
            "ms" => 1_000_000_000,
            "s" => 1_000_000_000_000,
            _ => return Err(format!("expected a duration with a unit (ps, ns, us, ms, s), like \"10us\"; got \"{s}\"")),
        };
        let t = parse_scaled(num, scale)
            .map(Time)
            .ok_or_else(|| format!("expected a non-negative duration like \"2.5ms\"; got \"{s}\""))?;
        if t > Time::INPUT_MAX {
            return Err(format!("expected a duration of at most {} (the largest that works); got \"{s}\"", Time::INPUT_MAX));
        }
        Ok(t)
    }
}

impl Add for Time {
    type Output = Time;
    /// Saturates at [`Time::MAX`] rather than wrapping to the past.
    fn add(self, o: Time) -> Time {
        Time(self.0.saturating_add(o.0))
    }
}
impl AddAssign for Time {
    fn add_assign(&mut self, o: Time) {
        self.0 = self.0.saturating_add(o.0)
    }
}
impl Sub for Time {
    type Output = Time;
    fn sub(self, o: Time) -> Time {
        Time(self.0 - o.0)
    }
}

impl fmt::Display for Time {
    /// The largest unit in which the value is at least 1, with up to 3 decimals: "2.5ms", "800ps".
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let ps = self.0;
        let (scale, unit) = match ps {
            p if p >= 1_000_000_000_000 => (1_000_000_000_000, "s"),
            p if p >= 1_000_000_000 => (1_000_000_000, "ms"),
            p if p >= 1_000_000 => (1_000_000, "us"),
            p if p >= 1_000 => (1_000, "ns"),
            _ => (1, "ps"),
        };
        let (whole, frac) = (ps / scale, ps % scale);
        let milli = (frac as u128 * 1000 / scale as u128) as u64;
        if milli == 0 {
            write!(f, "{whole}{unit}")
        } else {
            let decimals = format!("{milli:03}");
            write!(f, "{whole}.{}{unit}", decimals.trim_end_matches('0'))
        }
    }
}

/// A link or pacing rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    /// `g` gigabits per second.
    pub const fn gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Time to serialize `bytes` at this rate (rounded up to a whole picosecond; [`Time::MAX`]
    /// when it is not representable).
    #[inline]
    pub fn tx_time(self, bytes: u64) -> Time {
        // Any frame (under 2 MB) fits the 64-bit division, which is far cheaper than 128-bit.
        if let Some(num) = bytes.checked_mul(8_000_000_000_000) {
            return Time(num.div_ceil(self.0.max(1)));
        }
        let num = bytes as u128 * 8 * 1_000_000_000_000u128;
        Time(u64::try_from(num.div_ceil(self.0.max(1) as u128)).unwrap_or(u64::MAX))
    }
    /// Bytes this rate carries in `t` (saturating).
    pub fn bytes_in(self, t: Time) -> u64 {
        u64::try_from(self.0 as u128 * t.0 as u128 / 8 / 1_000_000_000_000u128).unwrap_or(u64::MAX)
    }

    /// Parses "100Gbps", "2.5Gbps", "400Mbps", "1Tbps", "9600bps".
    pub fn parse(s: &str) -> Result<Rate, String> {
        let (num, unit) = split_unit(s);
        let scale = match unit {
            "bps" => 1,
            "Kbps" | "kbps" => 1_000,
            "Mbps" => 1_000_000,
            "Gbps" => 1_000_000_000,
            "Tbps" => 1_000_000_000_000,
            _ => return Err(format!("expected a rate with a unit (bps, Kbps, Mbps, Gbps, Tbps), like \"100Gbps\"; got \"{s}\"")),
        };
        match parse_scaled(num, scale) {
            Some(0) | None => Err(format!("expected a positive rate like \"25Gbps\"; got \"{s}\"")),
            Some(v) => Ok(Rate(v)),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let b = self.0;
        if b.is_multiple_of(1_000_000_000) {
            write!(f, "{}Gbps", b / 1_000_000_000)
        } else if b.is_multiple_of(1_000_000) {
            write!(f, "{}Mbps", b / 1_000_000)
        } else {
            write!(f, "{b}bps")
        }
    }
}

/// A size in bytes, parsed from "9KB" (decimal units), "32MiB" (binary units) or "1500B": always
/// with a unit, as durations and rates are, so that `k = 40` is not silently 40 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Parses "1500B", "9KB", "32MB", "1GB", "64KiB", "16MiB".
    pub fn parse(s: &str) -> Result<Bytes, String> {
        let (num, unit) = split_unit(s);
        let scale = match unit {
            "" if !num.is_empty() => return Err(format!("expected a size with a unit (B, KB, MB, GB, KiB, MiB, GiB), like \"{num}KB\" or \"{num}B\"; got \"{s}\"")),
            "B" => 1,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "TB" => 1_000_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => return Err(format!("expected a size (B, KB, MB, GB, KiB, MiB, GiB), like \"32MB\"; got \"{s}\"")),
        };
        let b = parse_scaled(num, scale)
            .map(Bytes)
            .ok_or_else(|| format!("expected a non-negative size like \"9KB\"; got \"{s}\""))?;
        b.within_limit().map_err(|e| format!("{e}; got \"{s}\""))
    }

    /// The largest size a scenario may state (1 PB): a transfer of it at 8 Gb/s or faster still
    /// ends within [`Time::INPUT_MAX`].
    pub const INPUT_MAX: Bytes = Bytes(1_000_000_000_000_000);

    fn within_limit(self) -> Result<Bytes, String> {
        if self > Bytes::INPUT_MAX {
            Err(format!("expected a size of at most {}B (1PB, the largest that works)", Bytes::INPUT_MAX.0))
        } else {
            Ok(self)
        }
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

/// Splits "2.5ms" into ("2.5", "ms").
fn split_unit(s: &str) -> (&str, &str) {
    let s = s.trim();
    let i = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == '_'))
        .unwrap_or(s.len());
    (s[..i].trim(), s[i..].trim())
}

/// Parses a non-negative decimal such as "2.5" exactly and multiplies by `scale`;
/// None for negative, malformed, overflowing or non-integral results.
fn parse_scaled(num: &str, scale: u64) -> Option<u64> {
    let num = num.replace('_', "");
    if num.is_empty() || num.starts_with('-') {
        return None;
    }
    let num = num.strip_prefix('+').unwrap_or(&num);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut v = int_v.checked_mul(scale as u128)?;
    let mut unit = scale as u128;
    for c in frac.chars() {
        let d = c.to_digit(10)? as u128;
        if !unit.is_multiple_of(10) {
            if d != 0 {
                return None; // finer than the unit can hold (e.g. "0.5ps")
            }
            continue;
        }
        unit /= 10;
        v += d * unit;
    }
    u64::try_from(v).ok()
}

/// What a TOML value of the wrong kind is, in words.
fn kind_of(u: de::Unexpected) -> String {
    match u {
        de::Unexpected::Bool(b) => format!("the boolean {b}"),
        de::Unexpected::Signed(i) => format!("the number {i}"),
        de::Unexpected::Unsigned(i) => format!("the number {i}"),
        de::Unexpected::Float(f) => format!("the number {f}"),
        de::Unexpected::Seq => "a list".into(),
        de::Unexpected::Map => "a table".into(),
        other => other.to_string(),
    }
}

/// Reads a quantity written as a string with a unit (or, where `int` allows, a bare integer),
/// explaining anything else in words.
struct UnitVisitor<T> {
    expected: &'static str,
    parse: fn(&str) -> Result<T, String>,
    int: fn(i64) -> Result<T, String>,
}

impl<T> UnitVisitor<T> {
    fn wrong<E: de::Error>(&self, u: de::Unexpected) -> E {
        E::custom(format!("expected {}; got {}", self.expected, kind_of(u)))
    }
}

impl<'de, T> de::Visitor<'de> for UnitVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expected)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        (self.int)(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        (self.int)(i64::try_from(v).unwrap_or(i64::MAX)).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Err(self.wrong(de::Unexpected::Float(v)))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        Err(self.wrong(de::Unexpected::Bool(v)))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<T, A::Error> {
        Err(self.wrong(de::Unexpected::Seq))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<T, A::Error> {
        Err(self.wrong(de::Unexpected::Map))
    }
}

const DURATION_WORDS: &str = "a duration with a unit, like \"10us\" or \"2.5ms\"";
const RATE_WORDS: &str = "a rate with a unit, like \"100Gbps\"";
const SIZE_WORDS: &str = "a size with a unit, like \"9KB\" or \"1500B\"";

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UnitVisitor {
            expected: DURATION_WORDS,
            parse: Time::parse,
            int: |i| match i {
                0 => Ok(Time::ZERO),
                i if i < 0 => Err(format!("expected a non-negative duration like \"2.5ms\"; got the number {i}")),
                i => Err(format!("expected a duration with a unit; got the number {i}: write \"{i}us\", \"{i}ms\" or another unit (ps, ns, us, ms, s)")),
            },
        })
    }
}
impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}
impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UnitVisitor {
            expected: RATE_WORDS,
            parse: Rate::parse,
            int: |i| Err(format!("expected {RATE_WORDS}; got the number {i}")),
        })
    }
}
impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}
impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UnitVisitor {
            expected: SIZE_WORDS,
            parse: Bytes::parse,
            // A bare number is refused (but 0, which is 0 in any unit), as for durations: is
            // `k = 40` 40 bytes or 40 KB?
            int: |i| match i {
                0 => Ok(Bytes(0)),
                i if i < 0 => Err(format!("expected a non-negative size like \"9KB\"; got the number {i}")),
                i => Err(format!("expected a size with a unit; got the number {i}: write \"{i}KB\", \"{i}B\" or another unit (B, KB, MB, GB, KiB, MiB, GiB)")),
            },
        })
    }
}
impl Serialize for Bytes {
    /// As written in scenarios ("1500B"), so a resolved scenario reads back as one.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(Time::parse("1us").unwrap(), Time(1_000_000));
        assert_eq!(Time::parse("2.5ms").unwrap(), Time(2_500_000_000));
        assert_eq!(Time::parse("800ps").unwrap(), Time(800));
        assert_eq!(Time::parse("0.001ns").unwrap(), Time(1));
        assert!(Time::parse("0.0001ns").is_err());
        assert!(Time::parse("10").is_err());
        assert!(Time::parse("10 parsecs").is_err());
        assert!(Time::parse("-1us").is_err());
    }

    #[test]
    fn parses_rates_and_sizes() {
        assert_eq!(Rate::parse("100Gbps").unwrap(), Rate(100_000_000_000));
        assert_eq!(Rate::parse("2.5Gbps").unwrap(), Rate(2_500_000_000));
        assert!(Rate::parse("0Gbps").is_err());
        assert!(Rate::parse("100GB").is_err());
        assert_eq!(Bytes::parse("32MB").unwrap(), Bytes(32_000_000));
        assert_eq!(Bytes::parse("9KB").unwrap(), Bytes(9_000));
        assert_eq!(Bytes::parse("64KiB").unwrap(), Bytes(65_536));
        assert_eq!(Bytes::parse("1500B").unwrap(), Bytes(1500));
        assert!(Bytes::parse("-5KB").is_err());
    }

    #[test]
    fn serialization_time_is_exact_and_rounds_up() {
        assert_eq!(Rate::gbps(400).tx_time(64), Time(1_280));
        assert_eq!(Rate::gbps(100).tx_time(1500), Time(120_000));
        assert_eq!(Rate(3_000_000_000).tx_time(1), Time(2_667));
        assert_eq!(Rate::gbps(10).bytes_in(Time::from_us(1)), 1_250);
    }

    #[test]
    fn display_round_trips() {
        for s in ["10us", "2.5us", "3s", "800ps", "7ms", "1.25ms"] {
            assert_eq!(Time::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(Time(4_131_132_720).to_string(), "4.131ms");
    }

    #[test]
    fn scenario_quantities_are_bounded_and_arithmetic_never_wraps() {
        assert_eq!(Time::parse("1000000s").unwrap(), Time::INPUT_MAX);
        let e = Time::parse("5000000s").unwrap_err();
        assert!(e.contains("at most 1000000s"), "{e}");
        assert!(Time::parse("18446744.0737s").is_err());
        assert!(Bytes::parse("2000TB").unwrap_err().contains("1PB"));
        assert_eq!(Time(u64::MAX - 5) + Time(10), Time::MAX);
        // 1 PB at 1 bps does not fit in 2^64 ps: the serialization time saturates instead of wrapping.
        assert_eq!(Rate(1).tx_time(Bytes::INPUT_MAX.0), Time::MAX);
        // The largest input size at 8 Gb/s takes exactly the largest input time.
        assert_eq!(Rate(8_000_000_000).tx_time(Bytes::INPUT_MAX.0), Time::INPUT_MAX);
    }

    #[test]
    fn sizes_need_a_unit_as_durations_do() {
        #[derive(Debug, Deserialize, Serialize)]
        struct S {
            b: Bytes,
        }
        let e = toml::from_str::<S>("b = 40").unwrap_err().message().to_string();
        assert!(e.contains("got the number 40") && e.contains("\"40KB\""), "{e}");
        let e = toml::from_str::<S>("b = \"1500\"").unwrap_err().message().to_string();
        assert!(e.contains("with a unit") && e.contains("\"1500B\""), "{e}");
        assert_eq!(toml::from_str::<S>("b = 0").unwrap().b, Bytes(0), "0 is 0 in any unit, as for durations");
        assert_eq!(toml::from_str::<S>("b = \"1500B\"").unwrap().b, Bytes(1500));
        // Written back as a scenario states it, so a resolved scenario reads again.
        let text = toml::to_string(&S { b: Bytes(40_000) }).unwrap();
        assert_eq!(text.trim(), "b = \"40000B\"");
        assert_eq!(toml::from_str::<S>(&text).unwrap().b, Bytes(40_000));
        let e = toml::from_str::<S>("b = -3").unwrap_err().message().to_string();
        assert!(e.contains("non-negative") && e.contains("-3"), "{e}");
    }

    #[test]
    fn wrong_kinds_are_explained_in_words() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct T {
            d: Time,
        }
        let e = toml::from_str::<T>("d = true").unwrap_err().message().to_string();
        assert!(e.contains("expected a duration with a unit") && e.contains("the boolean true"), "{e}");
        assert!(!e.contains("enum"), "{e}");
        let e = toml::from_str::<T>("d = 5").unwrap_err().message().to_string();
        assert!(e.contains("got the number 5"), "{e}");
    }
}
