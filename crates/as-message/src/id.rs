//! Id generation and timestamp formatting, as AgentScope 2.0.4 does it.

use std::cell::RefCell;
use std::sync::{Arc, RwLock};

use chrono::{NaiveDateTime, Timelike};

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
    let micros = t.nanosecond() / 1_000 % 1_000_000;
    if micros == 0 {
        t.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        format!("{}.{:06}", t.format("%Y-%m-%dT%H:%M:%S"), micros)
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
