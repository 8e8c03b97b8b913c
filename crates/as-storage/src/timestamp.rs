//! Record timestamps (`datetime` fields of `_RecordBase`), read leniently and written like pydantic.

use std::cmp::Ordering;
use std::fmt;

use as_message::format_naive;
use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A record timestamp.
///
/// AgentScope 2.0.4 writes naive local times (`2025-06-01T10:00:00`, microseconds only when
/// non-zero); numbers read as Unix seconds give an aware UTC value (written with `Z`).
/// Our writers produce naive values, so Python readers can compare them.
///
/// ```
/// use as_storage::Timestamp;
/// let t: Timestamp = "2025-06-01 10:00:01.25".parse().unwrap();
/// assert_eq!(t.to_string(), "2025-06-01T10:00:01.250000");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timestamp {
    /// A naive (local, zoneless) time.
    Naive(NaiveDateTime),
    /// A time with an offset.
    Aware(DateTime<FixedOffset>),
}

impl Timestamp {
    /// The current local time, naive, microsecond precision (Python's `datetime.now()`).
    pub fn now() -> Self {
        Self::Naive(as_message::now_naive())
    }

    /// A comparable instant: naive values are taken as UTC wall time for ordering purposes.
    pub fn sort_key(&self) -> NaiveDateTime {
        match self {
            Self::Naive(n) => *n,
            Self::Aware(a) => a.naive_utc(),
        }
    }

    /// The smallest naive time strictly after `self` (one microsecond later).
    ///
    /// At the very end of chrono's range (`NaiveDateTime::MAX`, in year 262142) there is none: it
    /// returns that end itself instead of panicking. Long before, past 9999-12-31T23:59:59.999999,
    /// the time is one no reader takes back ([`Timestamp::in_python_range`]), which
    /// [`crate::check_record_timestamps`] refuses to write.
    pub fn next_micro(&self) -> Self {
        let key = self.sort_key();
        Self::Naive(key.checked_add_signed(chrono::Duration::microseconds(1)).unwrap_or(key))
    }

    /// `now()`, but strictly after `prev` (so revisions strictly increase). Never panics; after a
    /// `prev` at 9999-12-31T23:59:59.999999 (or later) it is a time outside Python's range, and a
    /// record with it is refused by [`crate::encode_checked_record`] (`InvalidInput`): the write
    /// fails and the record stays as it was, readable.
    pub fn now_after(prev: &Timestamp) -> Self {
        let now = Self::now();
        if now.sort_key() > prev.sort_key() { now } else { prev.next_micro() }
    }

    /// Whether Python's `datetime` can hold it, which is what AgentScope 2.0.4 (pydantic) and this
    /// crate's readers take back: a year from 1 to 9999 (of the local time, for a time with an
    /// offset) and no leap second. Parsing never gives another one; arithmetic and constructors
    /// can.
    ///
    /// ```
    /// use as_storage::Timestamp;
    /// let end: Timestamp = "9999-12-31T23:59:59.999999".parse().unwrap();
    /// assert!(end.in_python_range());
    /// assert!(!end.next_micro().in_python_range()); // year 10000
    /// ```
    pub fn in_python_range(&self) -> bool {
        within_python_range(*self).is_some()
    }
}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Naive(n) => f.write_str(&format_naive(n)),
            Self::Aware(a) => {
                f.write_str(&format_naive(&a.naive_local()))?;
                let secs = a.offset().fix().local_minus_utc();
                if secs == 0 {
                    f.write_str("Z")
                } else {
                    let sign = if secs < 0 { '-' } else { '+' };
                    let s = secs.abs();
                    write!(f, "{sign}{:02}:{:02}", s / 3600, (s % 3600) / 60)?;
                    if s % 60 != 0 { write!(f, ":{:02}", s % 60) } else { Ok(()) }
                }
            }
        }
    }
}

/// Why a timestamp could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid datetime {0:?}: expected an ISO 8601 date/time or a Unix timestamp")]
pub struct TimestampError(String);

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s).ok_or_else(|| TimestampError(s.to_owned()))
    }
}

fn truncate_micros(n: NaiveDateTime) -> NaiveDateTime {
    let micros = n.nanosecond() / 1_000 * 1_000;
    n.with_nanosecond(micros).unwrap_or(n)
}

fn from_unix(value: f64) -> Option<Timestamp> {
    if !value.is_finite() || value.abs() > 1e16 {
        return None;
    }
    // pydantic treats values above 2e10 as milliseconds. The whole units are split in integers
    // (a float division by 1000 would be off by microseconds for large values).
    let (unit_micros, whole) = if value.abs() > 2e10 { (1_000, value.floor()) } else { (1_000_000, value.floor()) };
    let whole_units = whole as i64;
    let fraction_micros = ((value - whole) * unit_micros as f64).round() as i64;
    let micros = whole_units.checked_mul(unit_micros)?.checked_add(fraction_micros)?;
    let dt = Utc.timestamp_micros(micros).single()?;
    within_python_range(Timestamp::Aware(dt.fixed_offset()))
}

/// `t` if Python's `datetime` can hold it (what pydantic accepts): years 1 to 9999, no leap
/// second. A record written with anything else could not be read back by AgentScope 2.0.4.
fn within_python_range(t: Timestamp) -> Option<Timestamp> {
    let local = match &t {
        Timestamp::Naive(n) => *n,
        Timestamp::Aware(a) => a.naive_local(),
    };
    ((1..=9999).contains(&local.year()) && local.nanosecond() < 1_000_000_000).then_some(t)
}

fn parse(s: &str) -> Option<Timestamp> {
    // pydantic refuses a datetime string with surrounding whitespace (chrono would skip it).
    if s.trim() != s {
        return None;
    }
    match canonical_naive(s) {
        Some(n) => Some(Timestamp::Naive(n)),
        None => parse_general(s),
    }
}

/// The forms every writer of records produces, `YYYY-MM-DDTHH:MM:SS` with an optional `.ffffff`
/// (or a space for the `T`), read digit by digit. `None` for anything else, including what
/// [`parse_general`] would reject; when this returns a time, it is the one `parse_general` returns.
fn canonical_naive(s: &str) -> Option<NaiveDateTime> {
    let b = s.as_bytes();
    if b.len() != 19 && b.len() != 26 {
        return None;
    }
    let at = |i: usize| b.get(i).copied();
    let separators = at(4) == Some(b'-')
        && at(7) == Some(b'-')
        && matches!(at(10), Some(b'T' | b' '))
        && at(13) == Some(b':')
        && at(16) == Some(b':')
        && (b.len() == 19 || at(19) == Some(b'.'));
    if !separators {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        b.get(from..to)?.iter().try_fold(0u32, |acc, &d| d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0')))
    };
    let micros = if b.len() == 26 { num(20, 26)? } else { 0 };
    let second = num(17, 19).filter(|s| *s < 60)?; // a leap second: the general reader
    let year = num(0, 4).filter(|y| *y >= 1)?; // year 0: Python's datetime starts at year 1
    let date = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, num(5, 7)?, num(8, 10)?)?;
    date.and_hms_micro_opt(num(11, 13)?, num(14, 16)?, second, micros)
}

/// Every form pydantic accepts for a `datetime`: Unix seconds (or milliseconds), RFC 3339 and
/// other ISO 8601 variants with or without an offset, and a bare date.
fn parse_general(s: &str) -> Option<Timestamp> {
    parse_any(s).and_then(within_python_range)
}

/// [`parse_general`] before the range check.
fn parse_any(s: &str) -> Option<Timestamp> {
    if let Ok(n) = s.parse::<f64>() {
        return from_unix(n);
    }
    // pydantic takes `T`, `t`, a space or `_` between date and time, `.` or `,` before the
    // fraction, and `z` for `Z`: spelled the one way chrono reads.
    let mut norm = s.to_owned();
    if matches!(norm.as_bytes().get(10), Some(b't' | b' ' | b'_')) {
        norm.replace_range(10..11, "T");
    }
    if norm.as_bytes().get(19) == Some(&b',') {
        norm.replace_range(19..20, ".");
    }
    if norm.ends_with('z') {
        norm.pop();
        norm.push('Z');
    }
    if let Ok(a) = DateTime::parse_from_rfc3339(&norm) {
        return Some(Timestamp::Aware(
            a.with_timezone(&a.offset().fix()).with_nanosecond(a.nanosecond() / 1000 * 1000)?,
        ));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z", "%Y-%m-%dT%H:%M:%S%.f%z"] {
        if let Ok(a) = DateTime::parse_from_str(&norm, fmt) {
            return Some(Timestamp::Aware(a));
        }
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(n) = NaiveDateTime::parse_from_str(&norm, fmt) {
            return Some(Timestamp::Naive(truncate_micros(n)));
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)).map(Timestamp::Naive)
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let parsed = match &v {
            serde_json::Value::String(s) => parse(s),
            serde_json::Value::Number(n) => n.as_f64().and_then(from_unix),
            _ => None,
        };
        parsed.ok_or_else(|| serde::de::Error::custom(format!("invalid value: invalid datetime {v}")))
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "format": "date-time" })
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spellings AgentScope 2.0.4 (pydantic) reads, written back as it writes them, and the ones it
    /// refuses (measured with `TypeAdapter(datetime)`).
    #[test]
    fn separators_and_whitespace_as_pydantic_reads_them() {
        for (s, read) in [
            ("2025-06-01t10:00:00", Some("2025-06-01T10:00:00")),
            ("2025-06-01_10:00:00", Some("2025-06-01T10:00:00")),
            ("2025-06-01T10:00:00,5", Some("2025-06-01T10:00:00.500000")),
            ("2025-06-01t10:00", Some("2025-06-01T10:00:00")),
            ("2025-06-01T10:00:00,123456+01:00", Some("2025-06-01T10:00:00.123456+01:00")),
            ("2025-06-01T10:00:00z", Some("2025-06-01T10:00:00Z")),
            (" 2025-06-01T10:00:00", None),
            ("2025-06-01T10:00:00 ", None),
        ] {
            assert_eq!(s.parse::<Timestamp>().ok().map(|t| t.to_string()), read.map(str::to_owned), "{s:?}");
        }
    }

    #[test]
    fn canonical_forms_take_the_fast_path_and_agree_with_the_general_reader() {
        // (input, read by the fast path); the others (not canonical, or not valid) are left to the
        // general reader. Either way the answer is the general reader's.
        for (s, fast) in [
            ("2025-06-01T10:00:00", true),
            ("2025-06-01 10:00:00", true),
            ("2025-06-01T10:00:01.250000", true),
            ("0000-01-01T00:00:00.000001", false),
            ("0001-01-01T00:00:00.000001", true),
            ("9999-12-31T23:59:59.999999", true),
            ("2024-02-29T12:30:45", true),
            ("2025-06-01T10:00:60", false),
            ("2023-02-29T10:00:00", false),
            ("2025-13-01T10:00:00", false),
            ("2025-06-01T24:00:00", false),
            ("2025-06-01T10:00:00.25", false),
            ("2025-06-01T10:00:00Z", false),
            ("2025-06-01X10:00:00", false),
            ("2025-06-01T10:00:0a", false),
            ("+2025-06-01T10:00:00", false),
            ("1717236000", false),
        ] {
            assert_eq!(canonical_naive(s).is_some(), fast, "{s}");
            assert_eq!(parse(s), parse_general(s), "{s}");
        }
    }

    /// What Python's `datetime` cannot hold is refused, as pydantic refuses it (checked against
    /// AgentScope 2.0.4): writing it back would make the record unreadable there.
    #[test]
    fn only_what_python_can_hold_is_read() {
        let read = |v: serde_json::Value| serde_json::from_value::<Timestamp>(v).ok().map(|t| t.to_string());
        for bad in [
            serde_json::json!("0000-01-01T00:00:00"),
            serde_json::json!("2025-06-01T23:59:60"),
            serde_json::json!("2025-06-01T23:59:60.5+00:00"),
            serde_json::json!("10000-01-01T00:00:00"),
            serde_json::json!(1e15),
            serde_json::json!(1_748_772_001_123_456_i64),
            serde_json::json!(-250_000_000_000_001_i64),
            serde_json::json!(-62_135_596_801_000_i64),
        ] {
            assert_eq!(read(bad.clone()), None, "{bad}");
        }
        assert_eq!(
            read(serde_json::json!("9999-12-31T23:59:59.999999")).as_deref(),
            Some("9999-12-31T23:59:59.999999")
        );
        // Milliseconds, split exactly (pydantic: .001000, .375300).
        assert_eq!(read(serde_json::json!(250_000_000_000_001_i64)).as_deref(), Some("9892-03-08T12:26:40.001000Z"));
        // The JSON number 1722704338375.299577 (more digits than an f64 holds, as a client sends it).
        let ms: serde_json::Value = serde_json::from_str("1722704338375.299577").unwrap();
        assert_eq!(read(ms).as_deref(), Some("2024-08-03T16:58:58.375300Z"));
        assert_eq!(read(serde_json::json!(1_748_772_000.123_456)).as_deref(), Some("2025-06-01T10:00:00.123456Z"));
    }

    /// At the end of the range, the next revision is outside Python's range (and is refused where a
    /// record is encoded), never a panic; at the end of chrono's range it saturates.
    #[test]
    fn the_next_revision_at_the_edges_never_panics() {
        let end: Timestamp = "9999-12-31T23:59:59.999999".parse().unwrap();
        let next = Timestamp::now_after(&end);
        assert_eq!(next.to_string(), "+10000-01-01T00:00:00");
        assert!(end.in_python_range() && !next.in_python_range());
        let max = Timestamp::Naive(NaiveDateTime::MAX);
        assert_eq!(Timestamp::now_after(&max), max);
        assert_eq!(max.next_micro(), max);
        assert!(!max.in_python_range());
        let min = Timestamp::Naive(NaiveDateTime::MIN);
        assert!(!min.in_python_range());
        assert!(Timestamp::now_after(&min).in_python_range());
        let aware = Timestamp::Aware(DateTime::parse_from_rfc3339("9999-12-31T23:00:00-05:00").unwrap());
        assert!(aware.in_python_range(), "the local year is 9999, as Python reads it");
        assert!(!Timestamp::now_after(&aware).in_python_range(), "one microsecond after it is in year 10000 UTC");
    }

    proptest::proptest! {
        /// Strings shaped like the canonical form, digits drawn freely (so months 00–99, days that
        /// do not exist, leap seconds), separators sometimes wrong: the fast path never disagrees.
        #[test]
        fn fast_path_never_disagrees_with_the_general_reader(
            digits in proptest::collection::vec(0u8..10, 20),
            sep in proptest::sample::select(vec!['T', ' ', 'x', '-']),
            fraction in proptest::bool::ANY,
            plausible in proptest::bool::ANY,
        ) {
            let d: Vec<char> = digits.iter().map(|d| char::from(b'0' + d)).collect();
            let two = |i: usize, max: u8| if plausible { char::from(b'0' + digits[i] % max) } else { d[i] };
            let mut s: String = [d[0], d[1], d[2], d[3], '-', two(4, 2), d[5], '-', two(6, 3), d[7], sep,
                two(8, 3), d[9], ':', two(10, 6), d[11], ':', two(12, 6), d[13]].iter().collect();
            if fraction {
                s.push('.');
                s.extend(&d[14..20]);
            }
            proptest::prop_assert_eq!(parse(&s), parse_general(&s), "{}", s);
        }

        #[test]
        fn written_timestamps_read_back(days in 0i64..3_000_000, secs in 0u32..86_400, micros in 0u32..1_000_000) {
            let date = NaiveDate::from_ymd_opt(1, 1, 1).unwrap() + chrono::Duration::days(days);
            let t = Timestamp::Naive(date.and_hms_micro_opt(secs / 3600, secs / 60 % 60, secs % 60, micros).unwrap());
            let text = t.to_string();
            proptest::prop_assert!(canonical_naive(&text).is_some(), "{}", text);
            proptest::prop_assert_eq!(parse(&text), Some(t));
        }
    }
}
