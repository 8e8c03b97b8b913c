//! Id generation and timestamp formatting, as AgentScope 2.0.4 does it.

use std::cell::RefCell;
use std::sync::{Arc, RwLock};

use chrono::{Datelike, NaiveDateTime, Timelike};

/// A replaceable id generator (AgentScope's `set_id_factory`).
pub type IdFactory = Arc<dyn Fn() -> String + Send + Sync>;

static GLOBAL_FACTORY: RwLock<Option<IdFactory>> = RwLock::new(None);

thread_local! {
    static LOCAL_FACTORY: RefCell<Option<IdFactory>> = const { RefCell::new(None) };
}

/// Generates a new entity id.
///
/// By default this is a uuid4 in lowercase hex without dashes (32 characters), like
/// Python's `uuid.uuid4().hex`. A factory installed with [`with_id_factory`] (this thread,
/// scoped) or [`set_id_factory`] (process-wide) replaces it.
///
/// ```
/// let id = as_message::generate_id();
/// assert_eq!(id.len(), 32);
/// assert!(id.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
/// ```
pub fn generate_id() -> String {
    if let Some(id) = LOCAL_FACTORY.with(|f| f.borrow().as_ref().map(|f| f())) {
        return id;
    }
    if let Ok(guard) = GLOBAL_FACTORY.read()
        && let Some(f) = guard.as_ref()
    {
        return f();
    }
    uuid::Uuid::new_v4().simple().to_string()
}

/// Installs (or with `None` removes) the process-wide id factory.
pub fn set_id_factory(factory: Option<IdFactory>) {
    if let Ok(mut guard) = GLOBAL_FACTORY.write() {
        *guard = factory;
    }
}

/// Runs `body` with `factory` as this thread's id factory, restoring the previous one after.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
/// let n = Arc::new(AtomicU32::new(0));
/// let id = as_message::with_id_factory(
///     Arc::new(move || format!("id{}", n.fetch_add(1, Ordering::SeqCst))),
///     as_message::generate_id,
/// );
/// assert_eq!(id, "id0");
/// ```
pub fn with_id_factory<R>(factory: IdFactory, body: impl FnOnce() -> R) -> R {
    struct Restore(Option<IdFactory>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            LOCAL_FACTORY.with(|f| *f.borrow_mut() = prev);
        }
    }
    let prev = LOCAL_FACTORY.with(|f| f.borrow_mut().replace(factory));
    let _restore = Restore(prev);
    body()
}

/// Formats a naive datetime like Python's `datetime.isoformat()`: microseconds only when non-zero.
///
/// ```
/// use chrono::NaiveDate;
/// let t = NaiveDate::from_ymd_opt(2025, 6, 1).unwrap().and_hms_micro_opt(10, 0, 1, 250_000).unwrap();
/// assert_eq!(as_message::format_naive(&t), "2025-06-01T10:00:01.250000");
/// let t = NaiveDate::from_ymd_opt(2025, 6, 1).unwrap().and_hms_opt(10, 0, 0).unwrap();
/// assert_eq!(as_message::format_naive(&t), "2025-06-01T10:00:00");
/// ```
pub fn format_naive(t: &NaiveDateTime) -> String {
    // Years 0–9999 (all Python can write) digit by digit; other years and leap seconds through
    // chrono's formatter, which gives the same text.
    let mut out = String::with_capacity(26);
    let micros = t.nanosecond() / 1_000 % 1_000_000;
    match u32::try_from(t.year()).ok().filter(|y| *y <= 9999) {
        Some(year) if t.nanosecond() < 1_000_000_000 => {
            push_digits(&mut out, year, 4);
            out.push('-');
            push_digits(&mut out, t.month(), 2);
            out.push('-');
            push_digits(&mut out, t.day(), 2);
            out.push('T');
            push_digits(&mut out, t.hour(), 2);
            out.push(':');
            push_digits(&mut out, t.minute(), 2);
            out.push(':');
            push_digits(&mut out, t.second(), 2);
        }
        _ => {
            use std::fmt::Write as _;
            let _ = write!(out, "{}", t.format("%Y-%m-%dT%H:%M:%S"));
        }
    }
    if micros != 0 {
        out.push('.');
        push_digits(&mut out, micros, 6);
    }
    out
}

/// The last `width` decimal digits of `v`, zero-padded.
fn push_digits(out: &mut String, v: u32, width: u32) {
    for place in (0..width).rev() {
        let digit = v / 10u32.pow(place) % 10;
        out.push(char::from(b'0' + digit as u8));
    }
}

/// The current local time as Python's `datetime.now().isoformat()` writes it (naive, no offset).
pub fn now_iso() -> String {
    format_naive(&now_naive())
}

/// The current local time, naive, truncated to microseconds (Python's `datetime.now()`).
pub fn now_naive() -> NaiveDateTime {
    let now = chrono::Local::now().naive_local();
    let micros = now.nanosecond() / 1_000 * 1_000;
    now.with_nanosecond(micros).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, NaiveDateTime, Timelike};

    use super::format_naive;

    /// The formatter `format_naive` replaced: chrono's strftime, the oracle.
    fn by_strftime(t: &NaiveDateTime) -> String {
        let micros = t.nanosecond() / 1_000 % 1_000_000;
        if micros == 0 {
            t.format("%Y-%m-%dT%H:%M:%S").to_string()
        } else {
            format!("{}.{:06}", t.format("%Y-%m-%dT%H:%M:%S"), micros)
        }
    }

    #[test]
    fn edge_times_format_like_strftime() {
        let at = |y, mo, d, h, mi, s, nano| {
            NaiveDate::from_ymd_opt(y, mo, d).and_then(|d| d.and_hms_nano_opt(h, mi, s, nano)).unwrap()
        };
        for (t, want) in [
            (at(2025, 6, 1, 10, 0, 0, 0), "2025-06-01T10:00:00"),
            (at(2025, 6, 1, 10, 0, 1, 250_000_000), "2025-06-01T10:00:01.250000"),
            (at(1, 1, 1, 0, 0, 0, 1_000), "0001-01-01T00:00:00.000001"),
            (at(9999, 12, 31, 23, 59, 59, 999_999_999), "9999-12-31T23:59:59.999999"),
            (at(2016, 12, 31, 23, 59, 59, 1_500_000_000), "2016-12-31T23:59:60.500000"),
            (at(10000, 1, 1, 0, 0, 0, 0), "+10000-01-01T00:00:00"),
            (at(-5, 3, 4, 5, 6, 7, 0), "-0005-03-04T05:06:07"),
            (at(2025, 6, 1, 10, 0, 0, 999), "2025-06-01T10:00:00"),
        ] {
            assert_eq!(format_naive(&t), want);
            assert_eq!(format_naive(&t), by_strftime(&t));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_time_formats_like_strftime(
            days in -4_000_000i64..4_000_000,
            secs in 0u32..86_400,
            nano in 0u32..2_000_000_000,
        ) {
            let date = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + chrono::Duration::days(days);
            // Leap-second nanos (>= 1e9) are only valid at second 59.
            let secs = if nano >= 1_000_000_000 { secs / 60 * 60 + 59 } else { secs };
            let t = date.and_hms_nano_opt(secs / 3600, secs / 60 % 60, secs % 60, nano).unwrap();
            proptest::prop_assert_eq!(format_naive(&t), by_strftime(&t));
        }
    }
}
