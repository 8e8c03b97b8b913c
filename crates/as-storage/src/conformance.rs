//! A reusable conformance suite for [`crate::StorageBase`] implementations.
//!
//! * It is for **custom backend implementations**: a backend crate implements [`StorageFactory`]
//!   and invokes [`storage_conformance_tests!`](crate::storage_conformance_tests) in
//!   `tests/conformance.rs`, which generates one test per scenario, so failures are reported one
//!   by one. [`run_all`] runs every scenario in one call instead.
//! * It is **not covered by semver**: scenarios are added and tightened as the contract is.
//! * It **writes and deletes sessions**: point the factory at a disposable namespace (a temp
//!   directory, a random Redis key prefix), one per [`StorageFactory::build`].
//!
//! Every scenario is a `pub async fn` named after the clause of the `# Contract` of
//! [`crate::StorageBase`] it checks, and returns [`Outcome::Passed`], [`Outcome::Skipped`] (the backend
//! lacks a [`crate::Capabilities`] flag or an optional method such as `import_record`; the runner prints why) or a [`ConformanceError`] naming the
//! scenario and what differed.
//!
//! **Pin your skips.** A skipped scenario checked nothing: list the exact scenarios your backend
//! is expected to skip (`skipped = [...]` in [`storage_conformance_tests!`](crate::storage_conformance_tests),
//! or an `assert_eq!` on [`Report::skipped`] after [`run_all`]), so that a capability or hook your
//! backend loses later fails a test instead of silently skipping its checks.
//!
//! ```
//! use as_storage::conformance::{BuildOptions, StorageFactory};
//! use as_storage::{InMemoryStorage, SharedStorage, StorageBase, StorageError};
//!
//! struct MemoryFactory;
//!
//! impl StorageFactory for MemoryFactory {
//!     type Guard = ();
//!     async fn build(&self, options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
//!         let mut store = InMemoryStorage::new();
//!         if let Some(max) = options.max_record_bytes {
//!             store = store.with_max_record_bytes(max);
//!         }
//!         store.open().await?;
//!         Ok(((), std::sync::Arc::new(store)))
//!     }
//! }
//!
//! // In tests/conformance.rs: one #[test] per scenario. The memory store declares no optional
//! // capability and the factory has no `reopen` or `build_faulty`: these scenarios skip, and
//! // any other skip fails its test.
//! as_storage::storage_conformance_tests!(
//!     MemoryFactory,
//!     skipped = [
//!         save_turn_failure_at_any_write_leaves_nothing,
//!         durable_survives_reopen,
//!         cross_process_instances_agree,
//!         ttl_expires_idle_sessions,
//!         ttl_restarts_on_writes,
//!     ]
//! );
//! # fn main() {}
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use as_message::{ContentBlock, JsonValue, Msg, ToolCallBlock, ToolResultBlock};
use as_state::AgentState;

use crate::{
    ImportMode, ImportOutcome, Owner, PageRequest, Revision, SessionConfig, SessionKey, SessionRecord, SessionSource,
    SharedStorage, StorageError, StorageErrorKind, Timestamp, UpsertSession, message_range,
};

/// What a scenario may ask of the factory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuildOptions {
    /// Configure the store's maximum record size to exactly this many bytes.
    pub max_record_bytes: Option<usize>,
    /// Configure a key TTL (only asked when [`crate::Capabilities::ttl`] is set).
    pub ttl: Option<Duration>,
}

impl BuildOptions {
    /// Options with a maximum record size.
    pub fn with_max_record_bytes(mut self, max: usize) -> Self {
        self.max_record_bytes = Some(max);
        self
    }

    /// Options with a TTL.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// Builds a fresh, isolated, **opened** store for each scenario.
pub trait StorageFactory: Send + Sync {
    /// Kept alive for the whole scenario and dropped after it (e.g. a temp dir or a key prefix
    /// that is flushed on `Drop`).
    type Guard: Send + Sync;

    /// A new empty store, opened, that honours `options`.
    fn build(
        &self,
        options: &BuildOptions,
    ) -> impl Future<Output = Result<(Self::Guard, SharedStorage), StorageError>> + Send;

    /// A second, independent, opened instance over the data of `guard`'s store (a new
    /// connection, or the same file opened again). Needed by the `durable` and `cross_process`
    /// scenarios; `Ok(None)` (the default) skips them.
    fn reopen(&self, guard: &Self::Guard) -> impl Future<Output = Result<Option<SharedStorage>, StorageError>> + Send {
        let _ = guard;
        async { Ok(None) }
    }

    /// A new empty store, opened, that honours `options`, together with a hook that makes its
    /// low-level writes fail on demand ([`Faults`]), returned disarmed. Needed by
    /// [`save_turn_failure_at_any_write_leaves_nothing`]; `Ok(None)` (the default) skips it.
    ///
    /// The faults must come from **outside** the backend (the medium it writes to, such as extra
    /// triggers in an SQLite test file, or a proxy in front of a server), never from test-only code
    /// paths in the backend itself: the scenario is to check the code that runs in production.
    fn build_faulty(
        &self,
        options: &BuildOptions,
    ) -> impl Future<Output = Result<Option<Faulty<Self::Guard>>, StorageError>> + Send {
        let _ = options;
        async { Ok(None) }
    }

    /// `Some(reason)` to skip every scenario (e.g. "set AS_TEST_REDIS_URL"); printed.
    fn skip_reason(&self) -> Option<String> {
        None
    }
}

/// A store whose low-level writes can be made to fail, from [`StorageFactory::build_faulty`].
#[non_exhaustive]
pub struct Faulty<G> {
    /// Kept alive for the whole scenario, as [`StorageFactory::build`]'s guard.
    pub guard: G,
    /// The store, opened.
    pub store: SharedStorage,
    /// Arms and disarms the store's faults.
    pub faults: Arc<dyn Faults>,
}

impl<G> Faulty<G> {
    /// A store with its fault hook, disarmed.
    pub fn new(guard: G, store: SharedStorage, faults: Arc<dyn Faults>) -> Self {
        Self { guard, store, faults }
    }
}

/// Fault injection into a store's low-level writes, for
/// [`save_turn_failure_at_any_write_leaves_nothing`].
///
/// A *low-level write* is one unit of what the backend writes to its medium (an SQL row written, a
/// command sent, a file replaced); a call makes finitely many of them, in an order that does not
/// depend on the faults. An injected fault must be a definite failure the backend is told about (a
/// write refused, rolled back with whatever transaction it is part of), not a lost answer: the
/// scenario demands that a call failing with it wrote nothing.
#[async_trait::async_trait]
pub trait Faults: Send + Sync {
    /// From now until [`Faults::disarm`], the `n`-th low-level write (counted from 0, from this
    /// call on) fails; the writes before it do not. Called between store calls, never during one.
    async fn arm(&self, n: usize) -> Result<(), StorageError>;

    /// No write fails any more.
    async fn disarm(&self) -> Result<(), StorageError>;

    /// Whether `error` (returned by a store call) is the failure an armed fault caused, and not
    /// some other failure.
    fn is_injected(&self, error: &StorageError) -> bool;
}

/// How a scenario ended when it did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// Not applicable to this backend; the reason is printed by the runners.
    Skipped(String),
}

/// A scenario found the backend in breach of the contract (or could not run).
#[derive(thiserror::Error)]
#[error("conformance scenario `{scenario}` failed: {details}")]
pub struct ConformanceError {
    scenario: &'static str,
    details: String,
}

impl fmt::Debug for ConformanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Test harnesses print `Debug` of a returned error: make it the readable message.
        fmt::Display::fmt(self, f)
    }
}

impl ConformanceError {
    /// A failure of `scenario`.
    pub fn new(scenario: &'static str, details: impl Into<String>) -> Self {
        Self { scenario, details: details.into() }
    }

    /// The scenario's name.
    pub fn scenario(&self) -> &'static str {
        self.scenario
    }

    /// What differed.
    pub fn details(&self) -> &str {
        &self.details
    }
}

type Res = Result<Outcome, ConformanceError>;

/// The result of [`run_all`].
#[derive(Debug, Default)]
pub struct Report {
    /// `(scenario, result)` in run order.
    pub results: Vec<(&'static str, Result<Outcome, ConformanceError>)>,
}

impl Report {
    /// Whether no scenario failed.
    pub fn is_success(&self) -> bool {
        self.results.iter().all(|(_, r)| r.is_ok())
    }

    /// The failures.
    pub fn failures(&self) -> impl Iterator<Item = &ConformanceError> {
        self.results.iter().filter_map(|(_, r)| r.as_ref().err())
    }

    /// Names of the scenarios that were skipped, with the reason.
    pub fn skipped(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.results.iter().filter_map(|(n, r)| match r {
            Ok(Outcome::Skipped(why)) => Some((*n, why.as_str())),
            _ => None,
        })
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, r) in &self.results {
            match r {
                Ok(Outcome::Passed) => writeln!(f, "ok       {name}")?,
                Ok(Outcome::Skipped(why)) => writeln!(f, "skipped  {name}: {why}")?,
                Err(e) => writeln!(f, "FAILED   {name}: {}", e.details)?,
            }
        }
        Ok(())
    }
}

/// Names of every scenario, in run order.
pub const SCENARIOS: &[&str] = &[
    "lifecycle",
    "get_missing_is_none",
    "create_and_get_roundtrip",
    "get_session_raw_is_the_record",
    "create_with_explicit_or_empty_id",
    "upsert_updates_existing",
    "id_taken_by_other_agent_already_exists",
    "update_missing_is_not_found",
    "update_replaces_state_only",
    "revisions_strictly_increase",
    "cas_rejects_stale_revision",
    "state_session_id_is_forced",
    "ownership_is_exact",
    "list_is_scoped_to_owner",
    "invalid_ids_are_rejected",
    "too_large_is_rejected_before_writing",
    "too_deep_is_rejected_before_writing",
    "delete_cascades",
    "list_is_newest_first",
    "list_pagination_is_stable",
    "list_ties_are_ordered_by_id",
    "messages_upsert_replaces_last_or_appends",
    "messages_list_uses_lrange_semantics",
    "messages_require_session",
    "save_turn_is_update_then_messages",
    "save_turn_is_conditional",
    "save_turn_is_all_or_nothing",
    "save_turn_failure_at_any_write_leaves_nothing",
    "concurrent_cas_writers_lose_no_update",
    "concurrent_readers_see_whole_writes",
    "concurrent_plain_writes_get_distinct_revisions",
    "delete_racing_update_leaves_no_zombie",
    "concurrent_creates_of_one_id_have_one_winner",
    "concurrent_message_writers_overwrite_nothing",
    "message_racing_delete_leaves_no_log",
    "model_based_random_operations",
    "durable_survives_reopen",
    "cross_process_instances_agree",
    "ttl_expires_idle_sessions",
    "ttl_restarts_on_writes",
    "import_record_is_verbatim",
    "import_record_modes",
    "import_record_validates",
    "timestamps_stay_in_python_range",
    "list_agents_is_scoped_and_sorted",
    "list_users_is_complete_and_sorted",
];

/// Calls `$cb!` with every scenario name (the single list both runners use).
#[doc(hidden)]
#[macro_export]
macro_rules! __storage_conformance_scenarios {
    ($cb:ident; $($ctx:tt)*) => {
        $crate::$cb! { [$($ctx)*]
            lifecycle get_missing_is_none create_and_get_roundtrip get_session_raw_is_the_record
            create_with_explicit_or_empty_id
            upsert_updates_existing id_taken_by_other_agent_already_exists update_missing_is_not_found
            update_replaces_state_only revisions_strictly_increase cas_rejects_stale_revision
            state_session_id_is_forced ownership_is_exact list_is_scoped_to_owner invalid_ids_are_rejected
            too_large_is_rejected_before_writing too_deep_is_rejected_before_writing delete_cascades list_is_newest_first list_pagination_is_stable
            list_ties_are_ordered_by_id
            messages_upsert_replaces_last_or_appends messages_list_uses_lrange_semantics messages_require_session
            save_turn_is_update_then_messages save_turn_is_conditional save_turn_is_all_or_nothing
            save_turn_failure_at_any_write_leaves_nothing
            concurrent_cas_writers_lose_no_update concurrent_readers_see_whole_writes
            concurrent_plain_writes_get_distinct_revisions
            delete_racing_update_leaves_no_zombie concurrent_creates_of_one_id_have_one_winner
            concurrent_message_writers_overwrite_nothing message_racing_delete_leaves_no_log
            model_based_random_operations durable_survives_reopen
            cross_process_instances_agree ttl_expires_idle_sessions ttl_restarts_on_writes
            import_record_is_verbatim import_record_modes
            import_record_validates timestamps_stay_in_python_range list_agents_is_scoped_and_sorted
            list_users_is_complete_and_sorted
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __storage_conformance_run_all {
    ([$factory:ident, $report:ident] $($name:ident)*) => {
        $(
            let r = $crate::conformance::$name($factory).await;
            $crate::conformance::__private::print_outcome(stringify!($name), &r);
            $report.results.push((stringify!($name), r));
        )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __storage_conformance_test_fns {
    ([$factory:expr, $skips:tt] $($name:ident)*) => {
        $(
            #[test]
            fn $name() -> ::std::result::Result<(), $crate::conformance::ConformanceError> {
                let factory = $factory;
                $crate::conformance::__private::run_test(
                    stringify!($name),
                    &factory,
                    &$skips,
                    |f| $crate::conformance::__private::Box::pin($crate::conformance::$name(f)),
                )
            }
        )*
    };
}

/// Generates one `#[test]` per conformance scenario for a [`StorageFactory`] expression.
///
/// Each test runs its scenario on a fresh multi-threaded Tokio runtime (so the caller needs no
/// Tokio dependency of its own) and fails with the scenario's [`ConformanceError`]. Invoke it at
/// module level of an integration test (`tests/conformance.rs`) with an expression that builds
/// your factory and, after `skipped =`, the exact list of scenarios your backend is expected to
/// skip ([`Outcome::Skipped`]: a [`crate::Capabilities`] flag it does not declare, an optional
/// method it does not implement, a factory hook it does not provide):
///
/// ```
/// # use as_storage::conformance::{BuildOptions, StorageFactory};
/// # use as_storage::{InMemoryStorage, SharedStorage, StorageBase, StorageError};
/// # struct MyFactory;
/// # impl MyFactory { fn new() -> Self { MyFactory } }
/// # impl StorageFactory for MyFactory {
/// #     type Guard = ();
/// #     async fn build(&self, _: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
/// #         let store = InMemoryStorage::new();
/// #         store.open().await?;
/// #         Ok(((), std::sync::Arc::new(store)))
/// #     }
/// # }
/// // No `ttl`, no `reopen`, no `build_faulty`: these scenarios skip, and only these.
/// as_storage::storage_conformance_tests!(
///     MyFactory::new(),
///     skipped = [
///         save_turn_failure_at_any_write_leaves_nothing,
///         durable_survives_reopen,
///         cross_process_instances_agree,
///         ttl_expires_idle_sessions,
///         ttl_restarts_on_writes,
///     ]
/// );
/// # fn main() {}
/// ```
///
/// **Pin your skips**: a skip is not a pass. A scenario that skips without being listed fails
/// (so a capability or hook your backend loses, by a refactor or a wrapper, is caught instead of
/// silently skipping its checks), and so does a listed scenario that runs (remove it from the
/// list once your backend supports it). A name that is not a scenario (see [`SCENARIOS`]) fails
/// every test. `storage_conformance_tests!(MyFactory::new())` is the same as `skipped = []`:
/// every scenario must run and pass. Only [`StorageFactory::skip_reason`] skips the whole suite
/// without failing (for a missing server); [`run_all`] users pin [`Report::skipped`] themselves.
#[macro_export]
macro_rules! storage_conformance_tests {
    ($factory:expr, skipped = [$($skip:ident),* $(,)?] $(,)?) => {
        $crate::__storage_conformance_scenarios!(__storage_conformance_test_fns; $factory, [$(stringify!($skip)),*]);
    };
    ($factory:expr $(,)?) => {
        $crate::__storage_conformance_scenarios!(__storage_conformance_test_fns; $factory, []);
    };
}

/// Runs every scenario against `factory`, printing one line per scenario.
pub async fn run_all<F: StorageFactory>(factory: &F) -> Report {
    let mut report = Report::default();
    if let Some(why) = factory.skip_reason() {
        println!("skipping: {why}");
        for name in SCENARIOS {
            report.results.push((name, Ok(Outcome::Skipped(why.clone()))));
        }
        return report;
    }
    crate::__storage_conformance_scenarios!(__storage_conformance_run_all; factory, report);
    report
}

/// Support for the exported macros. Not public API.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;
    use std::pin::Pin;

    pub use std::boxed::Box;

    use super::{ConformanceError, Outcome, SCENARIOS, StorageFactory};

    /// Prints skips and failures (passes are silent).
    pub fn print_outcome(name: &str, r: &Result<Outcome, ConformanceError>) {
        match r {
            Ok(Outcome::Passed) => {}
            Ok(Outcome::Skipped(why)) => println!("skipped: {name}: {why}"),
            Err(e) => println!("FAILED: {e}"),
        }
    }

    /// Runs one scenario on a fresh runtime, for the generated tests: it fails if the scenario
    /// fails, if it skips and is not in `expected_skips`, or if it is in `expected_skips` and ran.
    pub fn run_test<F: StorageFactory>(
        name: &'static str,
        factory: &F,
        expected_skips: &[&str],
        scenario: impl for<'a> FnOnce(&'a F) -> Pin<Box<dyn Future<Output = Result<Outcome, ConformanceError>> + 'a>>,
    ) -> Result<(), ConformanceError> {
        if let Some(unknown) = expected_skips.iter().find(|s| !SCENARIOS.contains(s)) {
            return Err(ConformanceError::new(
                name,
                format!("`{unknown}` in `skipped = [...]` is not a conformance scenario"),
            ));
        }
        if let Some(why) = factory.skip_reason() {
            println!("skipping: {why}");
            return Ok(());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ConformanceError::new(name, format!("cannot build a tokio runtime: {e}")))?;
        let r = rt.block_on(scenario(factory));
        print_outcome(name, &r);
        check_skip(name, r?, expected_skips.contains(&name))
    }

    /// Holds a scenario's outcome against whether the factory listed it as an expected skip.
    pub(super) fn check_skip(name: &'static str, outcome: Outcome, expected: bool) -> Result<(), ConformanceError> {
        match (outcome, expected) {
            (Outcome::Passed, false) | (Outcome::Skipped(_), true) => Ok(()),
            (Outcome::Skipped(why), false) => Err(ConformanceError::new(
                name,
                format!(
                    "skipped ({why}) but not listed in `skipped = [...]`: a skip is not a pass; \
                     list it only if the backend really lacks what it needs"
                ),
            )),
            (Outcome::Passed, true) => Err(ConformanceError::new(
                name,
                "listed in `skipped = [...]` but ran and passed: remove it from the list",
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

struct Ctx {
    name: &'static str,
}

impl Ctx {
    fn fail(&self, details: impl Into<String>) -> ConformanceError {
        ConformanceError::new(self.name, details)
    }

    fn ensure(&self, cond: bool, details: impl FnOnce() -> String) -> Result<(), ConformanceError> {
        if cond { Ok(()) } else { Err(self.fail(details())) }
    }

    fn ok<T>(&self, what: &str, r: Result<T, StorageError>) -> Result<T, ConformanceError> {
        r.map_err(|e| self.fail(format!("{what}: unexpected error: {e}")))
    }

    fn kind<T: fmt::Debug>(
        &self,
        what: &str,
        r: Result<T, StorageError>,
        kind: StorageErrorKind,
    ) -> Result<(), ConformanceError> {
        match r {
            Err(e) if e.kind() == kind => Ok(()),
            Err(e) => Err(self.fail(format!("{what}: expected {kind:?}, got {:?}: {e}", e.kind()))),
            Ok(v) => {
                let mut v = format!("{v:?}");
                if v.len() > 300 {
                    let cut = (0..=300).rev().find(|i| v.is_char_boundary(*i)).unwrap_or(0);
                    v.truncate(cut);
                    v.push_str("...");
                }
                Err(self.fail(format!("{what}: expected {kind:?}, got Ok({v})")))
            }
        }
    }

    fn joined<T>(
        &self,
        what: &str,
        r: Result<Result<T, StorageError>, tokio::task::JoinError>,
    ) -> Result<T, ConformanceError> {
        match r {
            Ok(r) => self.ok(what, r),
            Err(e) => Err(self.fail(format!("{what}: task failed: {e}"))),
        }
    }

    async fn build<F: StorageFactory>(
        &self,
        factory: &F,
        options: &BuildOptions,
    ) -> Result<(F::Guard, SharedStorage), ConformanceError> {
        factory.build(options).await.map_err(|e| self.fail(format!("factory.build failed: {e}")))
    }

    async fn create(&self, s: &SharedStorage, req: UpsertSession) -> Result<SessionRecord, ConformanceError> {
        self.ok("upsert_session (create)", s.upsert_session(req).await)
    }

    async fn get(&self, s: &SharedStorage, key: &SessionKey) -> Result<Option<SessionRecord>, ConformanceError> {
        self.ok("get_session", s.get_session(key).await)
    }

    async fn must_get(&self, s: &SharedStorage, key: &SessionKey) -> Result<SessionRecord, ConformanceError> {
        self.get(s, key).await?.ok_or_else(|| self.fail(format!("get_session({key}) returned None")))
    }

    async fn list_all(&self, s: &SharedStorage, owner: &Owner, limit: usize) -> Result<Vec<String>, ConformanceError> {
        let mut ids = Vec::new();
        let mut page = PageRequest::first(limit);
        for _ in 0..10_000 {
            let p = self.ok("list_sessions", s.list_sessions(owner, &page).await)?;
            ids.extend(p.sessions.into_iter().map(|x| x.id));
            match p.next_cursor {
                Some(c) => page.cursor = Some(c),
                None => return Ok(ids),
            }
        }
        Err(self.fail("list_sessions never returned next_cursor = None"))
    }
}

fn skipped(what: &str) -> Res {
    Ok(Outcome::Skipped(what.to_owned()))
}

fn owner(u: &str, a: &str) -> Owner {
    Owner::new(u, a)
}

fn config(name: &str) -> SessionConfig {
    SessionConfig::new("ws-conformance").with_name(name)
}

fn req(o: &Owner, name: &str) -> UpsertSession {
    UpsertSession::new(o.clone(), config(name))
}

fn ts(rev: &Revision) -> Option<Timestamp> {
    rev.0.parse().ok()
}

/// A realistic state: `turns` user/assistant turns with a tool call and its result, tagged in
/// `reply_id` and `middle_context` so a reader can check it is one whole write.
pub fn conversation_state(turns: usize, tag: &str) -> AgentState {
    let mut st = AgentState::for_session("not-the-session-id");
    st.reply_id = format!("reply-{tag}");
    for i in 0..turns {
        st.context.push(Msg::user("user", format!("Question {i}: what does file_{i}.rs do? Please be brief.")));
        let mut a = Msg::assistant("Friday", format!("Let me read file_{i}.rs first."));
        a.content.push(ContentBlock::ToolCall(ToolCallBlock::new(
            format!("call_{tag}_{i}"),
            "Read",
            format!(r#"{{"file_path":"src/file_{i}.rs"}}"#),
        )));
        st.context.push(a);
    }
    st.middle_context.insert("tag".into(), JsonValue::String(tag.to_owned()));
    st.middle_context.insert("messages".into(), JsonValue::from(st.context.len() as u64));
    st
}

fn rich_state() -> Result<AgentState, String> {
    let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/rich_agent_state.compact.json");
    as_message::from_json(text).map_err(|e| format!("rich_agent_state fixture: {e}"))
}

fn tool_result_msg(id: &str, text: &str) -> Msg {
    let mut m = Msg::assistant("Friday", text);
    m.id = id.to_owned();
    m.content.push(ContentBlock::ToolResult(ToolResultBlock::new(
        format!("call_{id}"),
        "Read",
        as_message::TextOrBlocks::Text(format!("output of {id}")),
        as_message::ToolResultState::Success,
    )));
    m
}

fn msg(id: &str, text: &str) -> Msg {
    let mut m = Msg::assistant("Friday", text);
    m.id = id.to_owned();
    m
}

fn texts(msgs: &[Msg]) -> Vec<String> {
    msgs.iter().map(|m| m.get_text_content("").unwrap_or_default()).collect()
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// `open`/`close` are idempotent; a closed store answers `Unavailable` (a bad id: `InvalidKey`);
/// opened again, it holds what it held (the record, its message log, its listing entry).
pub async fn lifecycle<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "lifecycle" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    c.ok("second open", s.open().await)?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "life")).await?;
    c.ok("upsert_message", s.upsert_message(&o.session(rec.id.clone()), &msg("m1", "before close")).await)?;
    c.ok("close", s.close().await)?;
    c.ok("second close", s.close().await)?;
    c.kind("get_session after close", s.get_session(&o.session(rec.id.clone())).await, StorageErrorKind::Unavailable)?;
    c.kind("upsert_session after close", s.upsert_session(req(&o, "x")).await, StorageErrorKind::Unavailable)?;
    let k = o.session(rec.id.clone());
    c.kind(
        "update_session_state after close",
        s.update_session_state(&k, &AgentState::default(), None).await,
        StorageErrorKind::Unavailable,
    )?;
    c.kind(
        "list_sessions after close",
        s.list_sessions(&o, &PageRequest::first(5)).await,
        StorageErrorKind::Unavailable,
    )?;
    c.kind("delete_session after close", s.delete_session(&k).await, StorageErrorKind::Unavailable)?;
    c.kind("upsert_message after close", s.upsert_message(&k, &msg("m", "t")).await, StorageErrorKind::Unavailable)?;
    c.kind("get_message after close", s.get_message(&k, "m").await, StorageErrorKind::Unavailable)?;
    c.kind("list_messages after close", s.list_messages(&k, 0, 0).await, StorageErrorKind::Unavailable)?;
    // The optional methods: `Unsupported` (not implemented) is as good as `Unavailable`.
    let optional = |what: &str, r: Result<String, StorageError>| match r {
        Err(e) if matches!(e.kind(), StorageErrorKind::Unavailable | StorageErrorKind::Unsupported) => Ok(()),
        Err(e) => Err(c.fail(format!("{what} after close: expected Unavailable, got {:?}: {e}", e.kind()))),
        Ok(v) => Err(c.fail(format!("{what} after close: expected Unavailable, got Ok({v})"))),
    };
    let record = foreign_record(&o, "after-close", "c").map_err(|e| c.fail(e))?;
    optional("import_record", s.import_record(&record, &[], ImportMode::CreateOnly).await.map(|o| format!("{o:?}")))?;
    optional("list_agents", s.list_agents("user-1").await.map(|a| format!("{a:?}")))?;
    optional("list_users", s.list_users().await.map(|a| format!("{a:?}")))?;
    c.kind("get_session_raw after close", s.get_session_raw(&k).await, StorageErrorKind::Unavailable)?;
    c.kind(
        "save_turn after close",
        s.save_turn(&k, &AgentState::default(), None, &[msg("m", "t")]).await,
        StorageErrorKind::Unavailable,
    )?;
    // Ids are checked before the store's state: a bad one is `InvalidKey` on a closed store too.
    let bad = o.session("a:b");
    c.kind("get_session with a bad id after close", s.get_session(&bad).await, StorageErrorKind::InvalidKey)?;
    c.kind(
        "save_turn with a bad id after close",
        s.save_turn(&bad, &AgentState::default(), None, &[]).await,
        StorageErrorKind::InvalidKey,
    )?;
    c.kind(
        "upsert_message with a bad id after close",
        s.upsert_message(&bad, &msg("m", "t")).await,
        StorageErrorKind::InvalidKey,
    )?;
    // Reopened, the store holds what it held: the record, its message log and its listing entry.
    c.ok("open after close", s.open().await)?;
    let back = c.ok("get_session after reopening", s.get_session(&k).await)?;
    if back.as_ref() != Some(&rec) {
        return Err(c.fail(format!("after reopening, get_session found {back:?}")));
    }
    let log = c.ok("list_messages after reopening", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&log) == ["before close"], || format!("after reopening, the message log is {:?}", texts(&log)))?;
    let listed = c.list_all(&s, &o, 50).await?;
    c.ensure(listed == [k.session_id.clone()], || format!("after reopening, the listing is {listed:?}"))?;
    Ok(Outcome::Passed)
}

/// `get_session_raw` sees what `get_session` sees, and its text reads back as that record.
pub async fn get_session_raw_is_the_record<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "get_session_raw_is_the_record" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "raw").with_state(conversation_state(3, "raw"))).await?;
    let k = o.session(rec.id.clone());
    c.ok("update", s.update_session_state(&k, &conversation_state(4, "raw2"), None).await)?;
    let got = c.must_get(&s, &k).await?;
    let raw = c.ok("get_session_raw", s.get_session_raw(&k).await)?;
    let raw = raw.ok_or_else(|| c.fail("get_session_raw returned None for an existing session"))?;
    let parsed = crate::decode_record(&raw).map_err(|e| c.fail(format!("the raw text does not read: {e}")))?;
    c.ensure(parsed == got, || "the raw text reads as another record than get_session's".into())?;
    let stranger = owner("user-1", "agent-2").session(rec.id.clone());
    c.ensure(c.ok("get_session_raw", s.get_session_raw(&stranger).await)?.is_none(), || {
        "get_session_raw shows a session to another agent".into()
    })?;
    let missing = o.session("nope");
    c.ensure(c.ok("get_session_raw", s.get_session_raw(&missing).await)?.is_none(), || {
        "get_session_raw found a missing session".into()
    })?;
    Ok(Outcome::Passed)
}

/// Absent sessions: `get` is `None`, `delete` is `false`, the listing is empty.
pub async fn get_missing_is_none<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "get_missing_is_none" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session("nope");
    c.ensure(c.get(&s, &k).await?.is_none(), || "get_session of an unknown id is not None".into())?;
    c.ensure(!c.ok("delete_session", s.delete_session(&k).await)?, || "delete of an unknown id returned true".into())?;
    let page = c.ok("list_sessions", s.list_sessions(&o, &PageRequest::default()).await)?;
    c.ensure(page.sessions.is_empty() && page.next_cursor.is_none(), || format!("empty store lists {page:?}"))?;
    Ok(Outcome::Passed)
}

/// A created record is returned as stored and reads back equal, the rich golden state included.
pub async fn create_and_get_roundtrip<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "create_and_get_roundtrip" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let state = rich_state().map_err(|e| c.fail(e))?;
    let rec = c.create(&s, req(&o, "rich").with_state(state.clone()).with_schedule("sched-1")).await?;
    c.ensure(crate::validate_id("session_id", &rec.id).is_ok(), || format!("fresh id {:?} is not a valid id", rec.id))?;
    c.ensure(rec.user_id == o.user_id && rec.agent_id == o.agent_id, || format!("owner not kept: {rec:?}"))?;
    c.ensure(rec.source == crate::SessionSource::Schedule, || "source not kept".into())?;
    c.ensure(rec.source_schedule_id.as_deref() == Some("sched-1"), || "source_schedule_id not kept".into())?;
    c.ensure(rec.team_id.is_none(), || "a new session has a team".into())?;
    c.ensure(rec.updated_at == rec.created_at, || {
        format!("a create set updated_at {} != created_at {}", rec.updated_at, rec.created_at)
    })?;
    c.ensure(rec.config == config("rich"), || "config not kept".into())?;
    let mut expected = state;
    expected.session_id.clone_from(&rec.id);
    c.ensure(rec.state == expected, || "returned state differs from the one given (apart from session_id)".into())?;
    let got = c.must_get(&s, &o.session(rec.id.clone())).await?;
    c.ensure(got == rec, || format!("get_session differs from the record upsert returned:\n{got:?}\n{rec:?}"))?;
    c.ensure(got.to_canonical_json() == rec.to_canonical_json(), || "canonical JSON differs".into())?;
    // Without a state: a fresh one, under the session's id.
    let plain = c.create(&s, req(&o, "plain")).await?;
    let got = c.must_get(&s, &o.session(plain.id.clone())).await?;
    c.ensure(got.state.context.is_empty() && got.state.session_id == plain.id, || "default state not fresh".into())?;
    c.ensure(got.source == crate::SessionSource::User, || "default source is not user".into())?;
    Ok(Outcome::Passed)
}

/// An empty id creates a fresh one; an unknown explicit id creates under that id, also one whose
/// session was deleted. Every create, whichever way, sets `updated_at == created_at` (how a caller
/// tells from the returned record that its upsert created the session) and stores it so.
pub async fn create_with_explicit_or_empty_id<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "create_with_explicit_or_empty_id" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let a = c.create(&s, req(&o, "a").with_session_id("")).await?;
    c.ensure(!a.id.is_empty(), || "an empty session id was stored as is".into())?;
    let b = c.create(&s, req(&o, "b")).await?;
    c.ensure(a.id != b.id, || "two creates without id got the same id".into())?;
    let e = c.create(&s, req(&o, "e").with_session_id("my-session.1")).await?;
    c.ensure(e.id == "my-session.1", || format!("explicit id not used: {}", e.id))?;
    c.ensure(c.get(&s, &o.session("my-session.1")).await?.is_some(), || "explicit-id session not readable".into())?;
    // Written to and deleted, then created again under the same id: a create like any other.
    let k = o.session(e.id.clone());
    c.ok("update", s.update_session_state(&k, &conversation_state(1, "e"), None).await)?;
    c.ensure(c.ok("delete", s.delete_session(&k).await)?, || "delete of an existing session returned false".into())?;
    let again = c.create(&s, req(&o, "again").with_session_id(e.id.clone())).await?;
    for (what, rec) in [("an empty id", &a), ("no id", &b), ("an explicit id", &e), ("an id deleted before", &again)] {
        c.ensure(rec.updated_at == rec.created_at, || {
            format!("a create with {what} returned updated_at {} != created_at {}", rec.updated_at, rec.created_at)
        })?;
    }
    // (The first session `e` is gone: its id now holds `again`.)
    for (what, rec) in [("an empty id", &a), ("no id", &b), ("an id deleted before", &again)] {
        let got = c.must_get(&s, &o.session(rec.id.clone())).await?;
        c.ensure(got == *rec, || format!("the session created with {what} reads back as {:?}", got.meta()))?;
    }
    Ok(Outcome::Passed)
}

/// Upserting an existing id replaces the config, keeps or replaces the state, keeps
/// `created_at`/`source`/`source_schedule_id` and `team_id` (which only an import sets, so that
/// part needs `import_record`), and bumps `updated_at`.
pub async fn upsert_updates_existing<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "upsert_updates_existing" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let s1 = conversation_state(2, "s1");
    let first = c.create(&s, req(&o, "first").with_state(s1).with_schedule("sch")).await?;
    let k = o.session(first.id.clone());
    let upd =
        c.ok("upsert (update, no state)", s.upsert_session(req(&o, "second").with_session_id(first.id.clone())).await)?;
    c.ensure(upd.id == first.id, || "update changed the id".into())?;
    c.ensure(upd.config.name == "second", || "config not replaced".into())?;
    c.ensure(upd.state == first.state, || "state not kept when none was given".into())?;
    c.ensure(upd.created_at == first.created_at, || "created_at changed".into())?;
    c.ensure(upd.source == crate::SessionSource::Schedule && upd.source_schedule_id.as_deref() == Some("sch"), || {
        "source/source_schedule_id changed on update".into()
    })?;
    c.ensure(upd.updated_at > first.updated_at, || "updated_at did not increase".into())?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got == upd, || "get differs from the updated record".into())?;
    let s2 = conversation_state(3, "s2");
    let upd2 = c.ok(
        "upsert (update, with state)",
        s.upsert_session(req(&o, "third").with_session_id(first.id.clone()).with_state(s2)).await,
    )?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == "reply-s2" && got.state.context.len() == 6, || "state not replaced".into())?;
    c.ensure(got == upd2, || "get differs from the updated record".into())?;
    // A session in a team (only an import writes one): an update keeps the team, with or without
    // a new state.
    let mut teamed = foreign_record(&o, "teamed", "t").map_err(|e| c.fail(e))?;
    teamed.team_id = Some("team-x".into());
    if try_import(&c, &s, &teamed, &[], ImportMode::CreateOnly).await?.is_some() {
        let tk = o.session(teamed.id.clone());
        for (i, state) in [None, Some(conversation_state(1, "t2"))].into_iter().enumerate() {
            let mut r = req(&o, &format!("renamed-{i}")).with_session_id(teamed.id.clone());
            r.state = state;
            let upd = c.ok("upsert (update of an imported session)", s.upsert_session(r).await)?;
            let got = c.must_get(&s, &tk).await?;
            for (what, rec) in [("returned", &upd), ("stored", &got)] {
                c.ensure(rec.team_id.as_deref() == Some("team-x"), || {
                    format!("update {i}: the {what} record has team_id {:?}, the session's is \"team-x\"", rec.team_id)
                })?;
                c.ensure(
                    rec.created_at == teamed.created_at
                        && rec.source == teamed.source
                        && rec.source_schedule_id == teamed.source_schedule_id,
                    || format!("update {i}: the {what} record lost imported fields: {:?}", rec.meta()),
                )?;
            }
            c.ensure(got == upd, || format!("update {i}: get differs from the updated record"))?;
        }
    }
    Ok(Outcome::Passed)
}

/// A session id of the same user owned by another agent cannot be taken over.
pub async fn id_taken_by_other_agent_already_exists<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "id_taken_by_other_agent_already_exists" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let a1 = owner("user-1", "agent-1");
    let a2 = owner("user-1", "agent-2");
    let orig = c.create(&s, req(&a1, "orig").with_session_id("shared").with_state(conversation_state(1, "o"))).await?;
    c.kind(
        "upsert by another agent of the same user",
        s.upsert_session(req(&a2, "thief").with_session_id("shared")).await,
        StorageErrorKind::AlreadyExists,
    )?;
    let got = c.must_get(&s, &a1.session("shared")).await?;
    c.ensure(got == orig, || "the owner's record changed".into())?;
    // Another user has its own id space.
    let other = c.create(&s, req(&owner("user-2", "agent-1"), "mine").with_session_id("shared")).await?;
    c.ensure(other.user_id == "user-2", || "wrong user".into())?;
    let got = c.must_get(&s, &a1.session("shared")).await?;
    c.ensure(got == orig, || "another user's create changed this user's session".into())?;
    Ok(Outcome::Passed)
}

/// `update_session_state` of a missing session is `NotFound` and creates nothing.
pub async fn update_missing_is_not_found<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "update_missing_is_not_found" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session("ghost");
    let st = conversation_state(1, "g");
    c.kind("update of a missing session", s.update_session_state(&k, &st, None).await, StorageErrorKind::NotFound)?;
    let stale = Revision("2020-01-01T00:00:00".into());
    c.kind(
        "conditional update of a missing session",
        s.update_session_state(&k, &st, Some(&stale)).await,
        StorageErrorKind::NotFound,
    )?;
    c.ensure(c.get(&s, &k).await?.is_none(), || "a failed update created the session".into())?;
    let rec = c.create(&s, req(&o, "x")).await?;
    let k = o.session(rec.id);
    c.ok("delete", s.delete_session(&k).await)?;
    c.kind("update after delete", s.update_session_state(&k, &st, None).await, StorageErrorKind::NotFound)?;
    c.ensure(c.get(&s, &k).await?.is_none(), || "an update after delete revived the session".into())?;
    Ok(Outcome::Passed)
}

/// `update_session_state` replaces the state and `updated_at` only, and returns the revision a
/// read then sees.
pub async fn update_replaces_state_only<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "update_replaces_state_only" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "keep-me").with_schedule("sch").with_state(conversation_state(1, "a"))).await?;
    let k = o.session(rec.id.clone());
    let rev = c.ok("update", s.update_session_state(&k, &conversation_state(4, "b"), None).await)?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.revision() == rev, || format!("returned revision {rev} but get sees {}", got.revision()))?;
    c.ensure(got.state.reply_id == "reply-b" && got.state.context.len() == 8, || "state not replaced".into())?;
    let mut env = got.meta();
    let old = rec.meta();
    c.ensure(env.updated_at > old.updated_at, || "updated_at not bumped".into())?;
    env.updated_at = old.updated_at;
    c.ensure(env == old, || format!("the envelope changed:\n{env:?}\n{old:?}"))?;
    Ok(Outcome::Passed)
}

/// Every write makes the revision strictly greater, even writes in a tight loop.
pub async fn revisions_strictly_increase<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "revisions_strictly_increase" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "r")).await?;
    let k = o.session(rec.id.clone());
    let mut prev = rec.updated_at;
    let st = conversation_state(1, "r");
    for i in 0..30 {
        let rev = c.ok("update", s.update_session_state(&k, &st, None).await)?;
        let t = ts(&rev).ok_or_else(|| c.fail(format!("revision {rev} is not an updated_at timestamp")))?;
        c.ensure(t > prev, || format!("write {i}: revision {t} is not after {prev}"))?;
        prev = t;
        if i % 10 == 9 {
            let up = c.ok("upsert update", s.upsert_session(req(&o, "r2").with_session_id(rec.id.clone())).await)?;
            c.ensure(up.updated_at > prev, || "upsert did not bump updated_at".into())?;
            prev = up.updated_at;
        }
    }
    Ok(Outcome::Passed)
}

/// A conditional update with a stale revision is a `Conflict` and writes nothing.
pub async fn cas_rejects_stale_revision<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "cas_rejects_stale_revision" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "cas")).await?;
    let k = o.session(rec.id.clone());
    let r0 = rec.revision();
    let r1 = c.ok(
        "update expecting the current revision",
        s.update_session_state(&k, &conversation_state(1, "one"), Some(&r0)).await,
    )?;
    c.kind(
        "update expecting a stale revision",
        s.update_session_state(&k, &conversation_state(2, "two"), Some(&r0)).await,
        StorageErrorKind::Conflict,
    )?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == "reply-one" && got.revision() == r1, || "a conflicting update wrote".into())?;
    let bogus = Revision("garbage".into());
    c.kind(
        "update expecting a bogus revision",
        s.update_session_state(&k, &AgentState::default(), Some(&bogus)).await,
        StorageErrorKind::Conflict,
    )?;
    c.ok(
        "update expecting the new revision",
        s.update_session_state(&k, &conversation_state(3, "three"), Some(&r1)).await,
    )?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == "reply-three", || "the second conditional update was lost".into())?;
    Ok(Outcome::Passed)
}

/// What is stored has `state.session_id == id`, whatever the caller passed.
pub async fn state_session_id_is_forced<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "state_session_id_is_forced" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let mut st = conversation_state(1, "x");
    st.session_id = "something-else".into();
    let rec = c.create(&s, req(&o, "sid").with_state(st.clone())).await?;
    let k = o.session(rec.id.clone());
    c.ensure(rec.state.session_id == rec.id, || "create returned a record with a foreign state.session_id".into())?;
    c.ensure(c.must_get(&s, &k).await?.state.session_id == rec.id, || "create stored a foreign session_id".into())?;
    c.ok("update", s.update_session_state(&k, &st, None).await)?;
    c.ensure(c.must_get(&s, &k).await?.state.session_id == rec.id, || "update stored a foreign session_id".into())?;
    let up = c.ok("upsert", s.upsert_session(req(&o, "sid").with_session_id(rec.id.clone()).with_state(st)).await)?;
    c.ensure(up.state.session_id == rec.id, || "upsert returned a foreign session_id".into())?;
    c.ensure(c.must_get(&s, &k).await?.state.session_id == rec.id, || "upsert stored a foreign session_id".into())?;
    Ok(Outcome::Passed)
}

/// A wrong `agent_id` or `user_id` sees nothing and changes nothing, also when the record quotes
/// the stranger's ids inside its own free-form data (a backend that matches the owner as text must
/// match only the record's own fields).
pub async fn ownership_is_exact<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "ownership_is_exact" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let strangers = [owner("user-1", "agent-2"), owner("user-2", "agent-1")];
    // Free-form parameters that spell each stranger's owner fields exactly as a record does.
    let mut parameters = as_message::JsonMap::new();
    for (i, stranger) in strangers.iter().enumerate() {
        let mut quoted = as_message::JsonMap::new();
        quoted.insert("user_id".into(), JsonValue::from(stranger.user_id.clone()));
        quoted.insert("agent_id".into(), JsonValue::from(stranger.agent_id.clone()));
        quoted.insert("source".into(), JsonValue::from("user"));
        parameters.insert(format!("quoted-{i}"), JsonValue::Object(quoted));
    }
    let mut quoting = config("quoting");
    quoting.chat_model_config = Some(crate::ChatModelConfig {
        kind: "openai_credential".into(),
        credential_id: "cred-1".into(),
        model: "gpt-4o".into(),
        parameters,
    });
    let mut mine = Vec::new();
    for request in [req(&o, "mine"), UpsertSession::new(o.clone(), quoting)] {
        let rec = c.create(&s, request.with_state(conversation_state(1, "mine"))).await?;
        let k = o.session(rec.id.clone());
        c.ok("upsert_message", s.upsert_message(&k, &msg("m1", "hello")).await)?;
        mine.push((rec, k));
    }
    for (rec, _) in &mine {
        for stranger in &strangers {
            let sk = stranger.session(rec.id.clone());
            let who = format!("{}/{} on {}", stranger.user_id, stranger.agent_id, rec.config.name);
            c.ensure(c.get(&s, &sk).await?.is_none(), || format!("{who} can read the session"))?;
            c.kind(
                &format!("update by {who}"),
                s.update_session_state(&sk, &conversation_state(1, "evil"), None).await,
                StorageErrorKind::NotFound,
            )?;
            c.kind(
                &format!("cas update by {who}"),
                s.update_session_state(&sk, &AgentState::default(), Some(&rec.revision())).await,
                StorageErrorKind::NotFound,
            )?;
            c.ensure(!c.ok("delete", s.delete_session(&sk).await)?, || format!("{who} deleted the session"))?;
            c.kind(
                &format!("upsert_message by {who}"),
                s.upsert_message(&sk, &msg("m2", "evil")).await,
                StorageErrorKind::NotFound,
            )?;
            c.ensure(c.ok("get_message", s.get_message(&sk, "m1").await)?.is_none(), || {
                format!("{who} can read a message")
            })?;
            c.ensure(c.ok("list_messages", s.list_messages(&sk, 0, 0).await)?.is_empty(), || {
                format!("{who} can list messages")
            })?;
        }
    }
    for (rec, k) in &mine {
        let got = c.must_get(&s, k).await?;
        c.ensure(got == *rec, || format!("the owner's session {} changed", rec.config.name))?;
        let msgs = c.ok("list_messages", s.list_messages(k, 0, 0).await)?;
        c.ensure(texts(&msgs) == ["hello"], || format!("the owner's messages changed: {:?}", texts(&msgs)))?;
    }
    Ok(Outcome::Passed)
}

/// A listing shows exactly the owner's sessions.
pub async fn list_is_scoped_to_owner<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "list_is_scoped_to_owner" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let mut mine = BTreeSet::new();
    for i in 0..2 {
        mine.insert(c.create(&s, req(&o, &format!("mine-{i}"))).await?.id);
    }
    c.create(&s, req(&owner("user-1", "agent-2"), "other-agent")).await?;
    c.create(&s, req(&owner("user-2", "agent-1"), "other-user")).await?;
    c.create(&s, req(&owner("user-10", "agent-1"), "prefix-user")).await?;
    c.create(&s, req(&owner("user-1", "agent-10"), "prefix-agent")).await?;
    let listed: BTreeSet<String> = c.list_all(&s, &o, 50).await?.into_iter().collect();
    c.ensure(listed == mine, || format!("listed {listed:?}, owner has {mine:?}"))?;
    Ok(Outcome::Passed)
}

/// Ids that could break a key layout are `InvalidKey` on every method; ordinary ids pass. Message
/// ids are data, not keys: any text, empty included (as AgentScope 2.0.4 takes it), is written,
/// found and listed.
pub async fn invalid_ids_are_rejected<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "invalid_ids_are_rejected" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let long = "x".repeat(crate::MAX_ID_BYTES + 1);
    let bad: Vec<&str> =
        vec!["a:b", "{x}", "*", "a?", "[a]", "a b", "x\ny", "tab\t", "nul\0", "é ", long.as_str(), "s]"];
    let good = owner("user-1", "agent-1");
    let st = AgentState::default();
    for b in bad.iter().copied().chain(std::iter::once("")) {
        let keys = [
            SessionKey::new(b, "agent-1", "s1"),
            SessionKey::new("user-1", b, "s1"),
            SessionKey::new("user-1", "agent-1", b),
        ];
        for (i, k) in keys.iter().enumerate() {
            let w = format!("{b:?} as {}", ["user_id", "agent_id", "session_id"][i]);
            c.kind(&format!("get_session {w}"), s.get_session(k).await, StorageErrorKind::InvalidKey)?;
            c.kind(&format!("get_session_raw {w}"), s.get_session_raw(k).await, StorageErrorKind::InvalidKey)?;
            c.kind(
                &format!("save_turn {w}"),
                s.save_turn(k, &st, None, &[msg("m", "t")]).await,
                StorageErrorKind::InvalidKey,
            )?;
            c.kind(
                &format!("update_session_state {w}"),
                s.update_session_state(k, &st, None).await,
                StorageErrorKind::InvalidKey,
            )?;
            c.kind(&format!("delete_session {w}"), s.delete_session(k).await, StorageErrorKind::InvalidKey)?;
            c.kind(
                &format!("upsert_message {w}"),
                s.upsert_message(k, &msg("m", "t")).await,
                StorageErrorKind::InvalidKey,
            )?;
            c.kind(&format!("get_message {w}"), s.get_message(k, "m").await, StorageErrorKind::InvalidKey)?;
            c.kind(&format!("list_messages {w}"), s.list_messages(k, 0, 0).await, StorageErrorKind::InvalidKey)?;
            // (An empty session id in upsert_session means "create with a fresh id".)
            if !(b.is_empty() && i == 2) {
                let u = UpsertSession::new(k.owner(), config("bad")).with_session_id(k.session_id.clone());
                c.kind(&format!("upsert_session {w}"), s.upsert_session(u).await, StorageErrorKind::InvalidKey)?;
            }
            if i < 2 {
                c.kind(
                    &format!("list_sessions {w}"),
                    s.list_sessions(&k.owner(), &PageRequest::default()).await,
                    StorageErrorKind::InvalidKey,
                )?;
            }
        }
    }
    // A schedule id is an id too (it names a schedule index); empty means none.
    for b in bad.iter().copied() {
        c.kind(
            &format!("upsert_session with schedule {b:?}"),
            s.upsert_session(req(&good, "bad").with_schedule(b)).await,
            StorageErrorKind::InvalidKey,
        )?;
    }
    c.ensure(c.list_all(&s, &good, 50).await?.is_empty(), || "a rejected call wrote something".into())?;
    let unscheduled = c.create(&s, req(&good, "no schedule").with_schedule("")).await?;
    // Stored as given, as 2.0.4 stores it (`"source_schedule_id":""`), and indexed under no schedule.
    let stored = c.must_get(&s, &good.session(unscheduled.id.clone())).await?;
    c.ensure(unscheduled.source_schedule_id.as_deref() == Some("") && stored == unscheduled, || {
        format!("an empty schedule id is not stored as given: {:?}", stored.source_schedule_id)
    })?;
    c.ensure(c.ok("delete", s.delete_session(&good.session(unscheduled.id)).await)?, || {
        "the session created with an empty schedule id is not there".into()
    })?;
    let max = "y".repeat(crate::MAX_ID_BYTES);
    for (u, a, sid) in [
        ("user-1", "a_b.c", "0d65955a11824199afb64130822a68b9"),
        ("u@x.org", "agent-1", max.as_str()),
        ("user-1", "agent-1", "é-ü"),
    ] {
        let o = owner(u, a);
        let rec = c.create(&s, req(&o, "ok").with_session_id(sid)).await?;
        c.ensure(rec.id == sid, || format!("valid id {sid:?} not kept"))?;
        c.ensure(c.get(&s, &o.session(sid)).await?.is_some(), || format!("valid id {sid:?} not readable"))?;
    }
    // Message ids are data inside the log: none is checked, every one is found again.
    let k = good.session(c.create(&s, req(&good, "message ids")).await?.id);
    let quoted = "q\"uote\\";
    let message_ids: Vec<&str> = bad.iter().copied().chain(["tool:call:1", "", quoted, "user_id:agent_id"]).collect();
    for (i, id) in message_ids.iter().enumerate() {
        let m = msg(id, &format!("message {i}"));
        c.ok(&format!("upsert_message with message id {id:?}"), s.upsert_message(&k, &m).await)?;
    }
    let turn = [msg("turn:1", "turn one"), msg("", "turn two")];
    c.ok("save_turn with message ids \"turn:1\" and \"\"", s.save_turn(&k, &st, None, &turn).await)?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    let ids: Vec<&str> = log.iter().map(|m| m.id.as_str()).collect();
    let want: Vec<&str> = message_ids.iter().copied().chain(["turn:1", ""]).collect();
    c.ensure(ids == want, || format!("the log holds message ids {ids:?}, expected {want:?}"))?;
    for (i, id) in message_ids.iter().enumerate() {
        let want = if id.is_empty() { "turn two".to_owned() } else { format!("message {i}") };
        let got = c.ok(&format!("get_message {id:?}"), s.get_message(&k, id).await)?;
        c.ensure(
            got.as_ref().is_some_and(|m| m.id == *id && texts(std::slice::from_ref(m)) == [want.as_str()]),
            || format!("get_message({id:?}) found {got:?}, expected the message {want:?}"),
        )?;
    }
    // Written again as the log's last message, an odd id replaces it like any other.
    c.ok("upsert_message replacing the last", s.upsert_message(&k, &msg("", "turn two, again")).await)?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(
        log.len() == want.len() && log.last().is_some_and(|m| texts(std::slice::from_ref(m)) == ["turn two, again"]),
        || format!("after replacing the last message (id \"\"), the log is {:?}", texts(&log)),
    )?;
    c.ensure(c.ok("get_message", s.get_message(&k, "never:written").await)?.is_none(), || {
        "get_message found a message id never written".into()
    })?;
    Ok(Outcome::Passed)
}

/// A record or message over the configured limit is `TooLarge` and nothing is written.
pub async fn too_large_is_rejected_before_writing<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "too_large_is_rejected_before_writing" };
    const MAX: usize = 8 * 1024;
    let (_g, s) = c.build(factory, &BuildOptions::default().with_max_record_bytes(MAX)).await?;
    let o = owner("user-1", "agent-1");
    let small = conversation_state(1, "small");
    let rec = c.create(&s, req(&o, "small").with_state(small)).await?;
    let k = o.session(rec.id.clone());
    let mut big = conversation_state(1, "big");
    big.context.push(Msg::user("user", "z".repeat(MAX)));
    c.kind("update with a too large state", s.update_session_state(&k, &big, None).await, StorageErrorKind::TooLarge)?;
    c.ensure(c.must_get(&s, &k).await? == rec, || "a rejected update changed the record".into())?;
    c.kind(
        "upsert update with a too large state",
        s.upsert_session(req(&o, "small").with_session_id(rec.id.clone()).with_state(big.clone())).await,
        StorageErrorKind::TooLarge,
    )?;
    c.ensure(c.must_get(&s, &k).await? == rec, || "a rejected upsert changed the record".into())?;
    c.kind(
        "create with a too large state",
        s.upsert_session(req(&o, "big").with_session_id("big").with_state(big)).await,
        StorageErrorKind::TooLarge,
    )?;
    c.ensure(c.get(&s, &o.session("big")).await?.is_none(), || "a rejected create left a record".into())?;
    c.ensure(c.list_all(&s, &o, 50).await? == [rec.id.clone()], || "a rejected create left an index entry".into())?;
    c.kind("a too large message", s.upsert_message(&k, &msg("m", &"q".repeat(MAX))).await, StorageErrorKind::TooLarge)?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "a rejected message was stored".into()
    })?;
    // Just under the limit still fits: the limit is on the stored bytes, not far below them.
    let mut fits = conversation_state(0, "fits");
    fits.context.push(Msg::user("user", "f".repeat(MAX / 2)));
    c.ok("update with a state well under the limit", s.update_session_state(&k, &fits, None).await)?;
    Ok(Outcome::Passed)
}

/// A record or message nested deeper than [`as_message::MAX_JSON_DEPTH`] (which no reader takes
/// back) is `InvalidInput` and nothing is written, by every writing method; one at the limit is
/// written and reads back equal.
pub async fn too_deep_is_rejected_before_writing<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "too_deep_is_rejected_before_writing" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "ok").with_state(conversation_state(1, "ok"))).await?;
    let k = o.session(rec.id.clone());
    let nest = |n: usize| (0..n).fold(JsonValue::from(1), |v, _| JsonValue::Array(vec![v]));
    // A record is one level, its state the next, `middle_context` the third: `n` arrays in it make
    // a record `n + 3` deep.
    let state_in_record_of_depth = |depth: usize| {
        let mut state = conversation_state(1, "deep");
        state.middle_context.insert("k".into(), nest(depth - 3));
        state
    };
    // A message is one level, its metadata the next: `n` arrays in it make it `n + 2` deep.
    let message_of_depth = |id: &str, depth: usize| {
        let mut m = msg(id, "deep");
        m.metadata.insert("k".into(), nest(depth - 2));
        m
    };
    let limit = as_message::MAX_JSON_DEPTH;
    let deep = state_in_record_of_depth(limit + 1);
    let invalid = StorageErrorKind::InvalidInput;
    c.kind("update with a too deep state", s.update_session_state(&k, &deep, None).await, invalid)?;
    c.kind(
        "upsert update with a too deep state",
        s.upsert_session(req(&o, "ok").with_session_id(rec.id.clone()).with_state(deep.clone())).await,
        invalid,
    )?;
    c.kind(
        "save_turn with a too deep state",
        s.save_turn(&k, &deep, Some(&rec.revision()), &[msg("t1", "x")]).await,
        invalid,
    )?;
    c.kind(
        "save_turn with a too deep message",
        s.save_turn(&k, &conversation_state(2, "t"), Some(&rec.revision()), &[message_of_depth("t2", limit + 1)]).await,
        invalid,
    )?;
    c.kind("a too deep message", s.upsert_message(&k, &message_of_depth("m", limit + 1)).await, invalid)?;
    c.ensure(c.must_get(&s, &k).await? == rec, || "a rejected write changed the record".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "a rejected write stored a message".into()
    })?;
    c.kind(
        "create with a too deep state",
        s.upsert_session(req(&o, "deep").with_session_id("deep").with_state(deep.clone())).await,
        invalid,
    )?;
    c.ensure(c.get(&s, &o.session("deep")).await?.is_none(), || "a rejected create left a record".into())?;
    c.ensure(c.list_all(&s, &o, 50).await? == [rec.id.clone()], || "a rejected create left an index entry".into())?;
    // The envelope counts too: a model config's free-form `parameters` are the record's fourth
    // level (record, config, chat model config, parameters), so `n` arrays in it make it `n + 4` deep.
    let config_of_record_depth = |depth: usize| {
        let mut parameters = as_message::JsonMap::new();
        parameters.insert("k".into(), nest(depth - 4));
        let mut config = SessionConfig::new("ws-1");
        config.chat_model_config = Some(crate::ChatModelConfig {
            kind: "openai_credential".into(),
            credential_id: "c".into(),
            model: "m".into(),
            parameters,
        });
        config
    };
    c.kind(
        "create with a too deep config",
        s.upsert_session(UpsertSession::new(o.clone(), config_of_record_depth(limit + 1)).with_session_id("deep"))
            .await,
        invalid,
    )?;
    c.kind(
        "upsert update with a too deep config",
        s.upsert_session(
            UpsertSession::new(o.clone(), config_of_record_depth(limit + 1)).with_session_id(rec.id.clone()),
        )
        .await,
        invalid,
    )?;
    c.ensure(c.must_get(&s, &k).await? == rec, || "a rejected config update changed the record".into())?;
    c.ensure(c.get(&s, &o.session("deep")).await?.is_none(), || "a rejected create left a record".into())?;
    let at_limit_config = config_of_record_depth(limit);
    let created = c.ok(
        "create with a config at the limit",
        s.upsert_session(UpsertSession::new(o.clone(), at_limit_config.clone()).with_session_id("deep-config")).await,
    )?;
    c.ensure(c.must_get(&s, &o.session("deep-config")).await? == created && created.config == at_limit_config, || {
        "a config at the limit did not read back equal".into()
    })?;
    if let Ok(mut record) = foreign_record(&o, "deep", "deep") {
        record.state = deep;
        match s.import_record(&record, &[], ImportMode::CreateOnly).await {
            Err(e) if e.kind() == StorageErrorKind::Unsupported => {}
            r => c.kind("import of a too deep record", r, invalid)?,
        }
        let shallow = foreign_record(&o, "deep", "shallow").map_err(|e| c.fail(e))?;
        match s.import_record(&shallow, &[message_of_depth("m", limit + 1)], ImportMode::CreateOnly).await {
            Err(e) if e.kind() == StorageErrorKind::Unsupported => {}
            r => c.kind("import with a too deep message", r, invalid)?,
        }
        c.ensure(c.get(&s, &o.session("deep")).await?.is_none(), || "a rejected import left a record".into())?;
    }
    // At the limit: written, and read back equal.
    let at_limit = state_in_record_of_depth(limit);
    c.ok("update with a state at the limit", s.update_session_state(&k, &at_limit, None).await)?;
    c.ensure(
        c.must_get(&s, &k).await?.state == as_stored(&SessionRecord::from_parts(rec.meta(), at_limit)).state,
        || "a state at the limit did not read back equal".into(),
    )?;
    let m = message_of_depth("m", limit);
    c.ok("a message at the limit", s.upsert_message(&k, &m).await)?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)? == [m], || {
        "a message at the limit did not read back equal".into()
    })?;
    Ok(Outcome::Passed)
}

/// Delete removes the record, its listing entry and its message log; a new session under the
/// same id starts empty.
pub async fn delete_cascades<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "delete_cascades" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "doomed").with_session_id("doomed")).await?;
    let k = o.session(rec.id.clone());
    for i in 0..3 {
        c.ok("upsert_message", s.upsert_message(&k, &msg(&format!("m{i}"), "x")).await)?;
    }
    c.ensure(c.ok("delete", s.delete_session(&k).await)?, || "delete of an existing session returned false".into())?;
    c.ensure(c.get(&s, &k).await?.is_none(), || "record survives delete".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || "messages survive delete".into())?;
    c.ensure(c.ok("get_message", s.get_message(&k, "m1").await)?.is_none(), || "a message survives delete".into())?;
    c.ensure(c.list_all(&s, &o, 50).await?.is_empty(), || "index entry survives delete".into())?;
    c.ensure(!c.ok("delete", s.delete_session(&k).await)?, || "second delete returned true".into())?;
    let reborn = c.create(&s, req(&o, "reborn").with_session_id("doomed")).await?;
    c.ensure(reborn.updated_at == reborn.created_at, || {
        format!("the session created again has updated_at {} != created_at {}", reborn.updated_at, reborn.created_at)
    })?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "a recreated session inherited messages".into()
    })?;
    c.ensure(c.list_all(&s, &o, 50).await? == ["doomed"], || "recreated session listed wrongly".into())?;
    Ok(Outcome::Passed)
}

/// The listing is newest first and its summaries describe the records.
pub async fn list_is_newest_first<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "list_is_newest_first" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let mut recs = Vec::new();
    for i in 0..5 {
        let r = req(&o, &format!("name-{i}")).with_state(conversation_state(i, &format!("t{i}")));
        let r = if i == 3 { r.with_schedule("sch") } else { r };
        recs.push(c.create(&s, r).await?);
    }
    // One more write so updated_at and created_at differ for one of them.
    let rev = c.ok(
        "update",
        s.update_session_state(&o.session(recs[0].id.clone()), &conversation_state(7, "late"), None).await,
    )?;
    let page = c.ok("list_sessions", s.list_sessions(&o, &PageRequest::first(50)).await)?;
    c.ensure(page.errors.is_empty() && page.next_cursor.is_none(), || format!("unexpected errors/cursor: {page:?}"))?;
    let mut expected = recs.clone();
    expected.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let got: Vec<&str> = page.sessions.iter().map(|x| x.id.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|x| x.id.as_str()).collect();
    c.ensure(got == want, || format!("order {got:?}, expected newest first {want:?}"))?;
    for sum in &page.sessions {
        let r = recs.iter().find(|r| r.id == sum.id).ok_or_else(|| c.fail("listed an unknown id"))?;
        let fresh = c.must_get(&s, &o.session(r.id.clone())).await?;
        c.ensure(sum.name == r.config.name, || format!("name {} != {}", sum.name, r.config.name))?;
        c.ensure(sum.created_at == fresh.created_at && sum.updated_at == fresh.updated_at, || {
            "timestamps differ from the record".into()
        })?;
        c.ensure(sum.source == r.source, || "source differs".into())?;
        if let Some(n) = sum.message_count {
            c.ensure(n == fresh.state.context.len() as u64, || {
                format!("{}: message_count {n} != {}", r.id, fresh.state.context.len())
            })?;
        }
        c.ensure(sum.size_bytes > 0, || "size_bytes is 0".into())?;
    }
    let first = page.sessions.iter().find(|x| x.id == recs[0].id).ok_or_else(|| c.fail("missing"))?;
    c.ensure(first.updated_at.to_string() == rev.0, || "summary updated_at is not the latest revision".into())?;
    let small = page.sessions.iter().find(|x| x.id == recs[1].id).ok_or_else(|| c.fail("missing"))?;
    c.ensure(first.size_bytes > small.size_bytes, || "size_bytes does not grow with the state".into())?;
    Ok(Outcome::Passed)
}

/// Paging visits every session once, in order, even when sessions are created between pages;
/// a bad cursor is `InvalidInput`.
pub async fn list_pagination_is_stable<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "list_pagination_is_stable" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let mut recs = Vec::new();
    for i in 0..7 {
        recs.push(c.create(&s, req(&o, &format!("p{i}"))).await?);
    }
    recs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let want: Vec<String> = recs.iter().map(|r| r.id.clone()).collect();
    let mut got = Vec::new();
    let mut page = PageRequest::first(3);
    let mut pages = 0;
    loop {
        let p = c.ok("list_sessions", s.list_sessions(&o, &page).await)?;
        c.ensure(p.sessions.len() <= 3, || format!("page of {} > limit 3", p.sessions.len()))?;
        got.extend(p.sessions.into_iter().map(|x| x.id));
        pages += 1;
        // Newer sessions arrive while paging; they must not show up on later pages.
        c.create(&s, req(&o, &format!("late{pages}"))).await?;
        match p.next_cursor {
            Some(cur) if pages < 20 => page.cursor = Some(cur),
            Some(_) => return Err(c.fail("pagination does not terminate")),
            None => break,
        }
    }
    c.ensure(got == want, || format!("paged {got:?}, expected {want:?}"))?;
    let one = c.ok("list_sessions limit 0", s.list_sessions(&o, &PageRequest::first(0)).await)?;
    c.ensure(one.sessions.len() == 1, || format!("limit 0 gave {} sessions, expected 1", one.sessions.len()))?;
    let bad = PageRequest { limit: 3, cursor: Some("not a cursor".into()) };
    c.kind("list_sessions with a garbage cursor", s.list_sessions(&o, &bad).await, StorageErrorKind::InvalidInput)?;
    // A real cursor with a byte in front: shaped like one, but not one this store wrote.
    let real = c.ok("list_sessions", s.list_sessions(&o, &PageRequest::first(1)).await)?.next_cursor;
    let real = real.ok_or_else(|| c.fail("a page of 1 of 14 sessions has no next_cursor"))?;
    let mangled = PageRequest { limit: 3, cursor: Some(format!("x{real}")) };
    c.kind("list_sessions with a mangled cursor", s.list_sessions(&o, &mangled).await, StorageErrorKind::InvalidInput)?;
    Ok(Outcome::Passed)
}

/// Sessions created at the same instant are ordered by id, descending, and paging through them
/// repeats and skips none (a cursor on `created_at` alone would). Needs `import_record` to plant
/// equal timestamps.
pub async fn list_ties_are_ordered_by_id<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "list_ties_are_ordered_by_id" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let ids = ["tie-c", "tie-a", "tie-g", "tie-e", "tie-b", "tie-f", "tie-d"];
    for id in ids {
        let rec = foreign_record(&o, id, "tie").map_err(|e| c.fail(e))?;
        if try_import(&c, &s, &rec, &[], ImportMode::CreateOnly).await?.is_none() {
            return skipped(IMPORT_UNSUPPORTED);
        }
    }
    let mut want: Vec<String> = ids.iter().map(|&i| i.to_owned()).collect();
    want.sort_by(|a, b| b.cmp(a));
    for limit in [1, 2, 3, 50] {
        let got = c.list_all(&s, &o, limit).await?;
        c.ensure(got == want, || format!("pages of {limit}: {got:?}, expected {want:?}"))?;
    }
    Ok(Outcome::Passed)
}

/// `upsert_message` replaces the last message when ids match and appends otherwise;
/// `get_message` finds the newest with that id.
pub async fn messages_upsert_replaces_last_or_appends<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "messages_upsert_replaces_last_or_appends" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session(c.create(&s, req(&o, "m")).await?.id);
    let m1 = tool_result_msg("m1", "one");
    c.ok("upsert m1", s.upsert_message(&k, &m1).await)?;
    c.ok("upsert m2", s.upsert_message(&k, &msg("m2", "two")).await)?;
    c.ok("upsert m2 again", s.upsert_message(&k, &msg("m2", "two-v2")).await)?;
    c.ok("upsert m1 again (not last)", s.upsert_message(&k, &msg("m1", "one-v2")).await)?;
    let all = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&all) == ["one", "two-v2", "one-v2"], || format!("log is {:?}", texts(&all)))?;
    c.ensure(all[0] == m1, || "a message did not round-trip".into())?;
    let got = c.ok("get_message", s.get_message(&k, "m1").await)?;
    c.ensure(got.as_ref().map(|m| texts(std::slice::from_ref(m))) == Some(vec!["one-v2".to_owned()]), || {
        format!("get_message(m1) = {got:?}, expected the newest")
    })?;
    c.ensure(c.ok("get_message", s.get_message(&k, "nope").await)?.is_none(), || "unknown message found".into())?;
    Ok(Outcome::Passed)
}

/// `save_turn` leaves what `update_session_state` then `upsert_message` of each message leaves:
/// the state at a new, readable revision, and the messages appended in order, one with the id of
/// the log's last message (the stored one, or the turn's previous one) replacing it.
pub async fn save_turn_is_update_then_messages<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "save_turn_is_update_then_messages" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "turns")).await?;
    let k = o.session(rec.id.clone());
    c.ok("upsert m0", s.upsert_message(&k, &msg("m0", "zero")).await)?;
    let turn = [msg("m0", "zero-v2"), tool_result_msg("m1", "one"), msg("m2", "two"), msg("m2", "two-v2")];
    let saved = c.ok("save_turn", s.save_turn(&k, &conversation_state(2, "t1"), Some(&rec.revision()), &turn).await)?;
    c.ensure(saved.log_error.is_none(), || format!("save_turn reported a log error: {:?}", saved.log_error))?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == "reply-t1" && got.revision() == saved.revision, || {
        format!("read {} at {}, save_turn returned {}", got.state.reply_id, got.revision(), saved.revision)
    })?;
    c.ensure(ts(&saved.revision) > ts(&rec.revision()), || "save_turn did not advance the revision".into())?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&log) == ["zero-v2", "one", "two-v2"], || format!("log is {:?}", texts(&log)))?;
    c.ensure(log[1] == turn[1], || "a message did not round-trip through save_turn".into())?;
    // Unconditional, and with no messages: a plain state update.
    let saved = c.ok("save_turn without expected", s.save_turn(&k, &conversation_state(1, "t2"), None, &[]).await)?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == "reply-t2" && got.revision() == saved.revision, || {
        "save_turn without messages did not write the state".into()
    })?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.len() == 3, || {
        "save_turn without messages changed the log".into()
    })?;
    Ok(Outcome::Passed)
}

/// A `save_turn` whose state update fails writes no message: a stale revision is `Conflict`, a
/// missing session (or another agent's) `NotFound`; of N concurrent conditional `save_turn`s from
/// one revision exactly one wins, and the log holds exactly the winner's messages.
pub async fn save_turn_is_conditional<F: StorageFactory>(factory: &F) -> Res {
    const N: usize = 6;
    let c = Ctx { name: "save_turn_is_conditional" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "fenced")).await?;
    let k = o.session(rec.id.clone());
    let r1 = c.ok("update", s.update_session_state(&k, &conversation_state(1, "one"), None).await)?;
    c.kind(
        "save_turn expecting a stale revision",
        s.save_turn(&k, &conversation_state(2, "stale"), Some(&rec.revision()), &[msg("late", "late")]).await,
        StorageErrorKind::Conflict,
    )?;
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == "reply-one" && got.revision() == r1, || "a stale save_turn wrote its state".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "a stale save_turn wrote its messages".into()
    })?;
    for (what, key) in [
        ("a missing session", o.session("ghost")),
        ("another agent", owner("user-1", "agent-2").session(rec.id.clone())),
    ] {
        c.kind(
            &format!("save_turn to {what}"),
            s.save_turn(&key, &conversation_state(1, "x"), None, &[msg("m", "x")]).await,
            StorageErrorKind::NotFound,
        )?;
        c.ensure(c.ok("list_messages", s.list_messages(&key, 0, 0).await)?.is_empty(), || {
            format!("save_turn to {what} wrote messages")
        })?;
    }
    c.ensure(c.get(&s, &o.session("ghost")).await?.is_none(), || "save_turn created a session".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "save_turn by another agent wrote to the owner's log".into()
    })?;
    // N writers from one revision, as runners that each think they hold the session.
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let tasks: Vec<_> = (0..N)
        .map(|w| {
            let (s, k, r1, barrier) = (s.clone(), k.clone(), r1.clone(), barrier.clone());
            tokio::spawn(async move {
                let turn =
                    [msg(&format!("q{w}"), &format!("question {w}")), msg(&format!("a{w}"), &format!("answer {w}"))];
                barrier.wait().await;
                match s.save_turn(&k, &conversation_state(1, &format!("w{w}")), Some(&r1), &turn).await {
                    Ok(saved) => Ok(Some((w, saved))),
                    Err(e) if e.kind() == StorageErrorKind::Conflict => Ok(None),
                    Err(e) => Err(e),
                }
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        winners.extend(c.joined("concurrent save_turn", t.await)?);
    }
    let [(w, saved)] = winners.as_slice() else {
        let who: Vec<usize> = winners.iter().map(|(w, _)| *w).collect();
        return Err(c.fail(format!("{} of {N} conditional save_turns from one revision won: {who:?}", winners.len())));
    };
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.reply_id == format!("reply-w{w}") && got.revision() == saved.revision, || {
        format!("the stored state is {} at {}, the winner was w{w}", got.state.reply_id, got.revision())
    })?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&log) == [format!("question {w}"), format!("answer {w}")], || {
        format!("the log is {:?}, expected exactly the winner's (w{w}) messages", texts(&log))
    })?;
    Ok(Outcome::Passed)
}

/// With [`crate::Capabilities::atomic_turns`], a `save_turn` that fails writes nothing: a message
/// over the size limit leaves the state as it was (and a state over it leaves the log).
pub async fn save_turn_is_all_or_nothing<F: StorageFactory>(factory: &F) -> Res {
    const MAX: usize = 8 * 1024;
    let c = Ctx { name: "save_turn_is_all_or_nothing" };
    let (_g, s) = c.build(factory, &BuildOptions::default().with_max_record_bytes(MAX)).await?;
    if !s.capabilities().atomic_turns {
        return skipped("capability `atomic_turns` not declared");
    }
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "atomic").with_state(conversation_state(1, "zero"))).await?;
    let k = o.session(rec.id.clone());
    c.ok("upsert m0", s.upsert_message(&k, &msg("m0", "zero")).await)?;
    let too_big = msg("m2", &"q".repeat(MAX));
    for expected in [None, Some(rec.revision())] {
        c.kind(
            "save_turn with a too large message",
            s.save_turn(
                &k,
                &conversation_state(1, "one"),
                expected.as_ref(),
                &[msg("m0", "replaced"), msg("m1", "one"), too_big.clone()],
            )
            .await,
            StorageErrorKind::TooLarge,
        )?;
        c.ensure(c.must_get(&s, &k).await? == rec, || "a save_turn with a too large message wrote the state".into())?;
        let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
        c.ensure(texts(&log) == ["zero"], || format!("a failed save_turn changed the log to {:?}", texts(&log)))?;
    }
    let mut big = conversation_state(1, "big");
    big.context.push(Msg::user("user", "z".repeat(MAX)));
    c.kind(
        "save_turn with a too large state",
        s.save_turn(&k, &big, Some(&rec.revision()), &[msg("m1", "one")]).await,
        StorageErrorKind::TooLarge,
    )?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&log) == ["zero"] && c.must_get(&s, &k).await? == rec, || {
        format!("a save_turn with a too large state wrote (log {:?})", texts(&log))
    })?;
    Ok(Outcome::Passed)
}

/// Fault positions [`save_turn_failure_at_any_write_leaves_nothing`] tries per turn before it
/// gives up on reaching a turn that succeeds.
const MAX_FAULT_POSITIONS: usize = 64;

/// The log `upsert_message` of each of `turn` leaves after `log`: the last message replaced when
/// the ids are equal, else appended.
fn upserted(log: &[Msg], turn: &[Msg]) -> Vec<Msg> {
    let mut out = log.to_vec();
    for m in turn {
        match out.last_mut() {
            Some(last) if last.id == m.id => *last = m.clone(),
            _ => out.push(m.clone()),
        }
    }
    out
}

/// With [`crate::Capabilities::atomic_turns`], a `save_turn` that fails at **any** of its writes
/// leaves the record and the message log exactly as they were (the **Turns** clause: "any failure
/// leaves the state and the log as they were"; the fault is a definite failure, not an
/// `Unavailable` of unknown outcome). Needs the factory's fault hook
/// ([`StorageFactory::build_faulty`]), and skips without it.
///
/// For n = 0, 1, 2, … the n-th low-level write of a turn (a new state, a message replacing the
/// log's last one, new messages, one of them replaced within the turn) is made to fail: the call
/// must fail with the injected fault and the record (its raw text too) and the log must equal
/// the ones read before. The sweep ends at the first n past the turn's last write, where the turn
/// must succeed, whole; a hook whose first fault lets the turn through injects nothing and fails
/// the scenario. Done for a conditional turn, then an unconditional one.
pub async fn save_turn_failure_at_any_write_leaves_nothing<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "save_turn_failure_at_any_write_leaves_nothing" };
    let faulty = c.ok("factory.build_faulty", factory.build_faulty(&BuildOptions::default()).await)?;
    let Some(Faulty { guard: _g, store: s, faults }) = faulty else {
        return skipped("the factory cannot inject faults (StorageFactory::build_faulty)");
    };
    if !s.capabilities().atomic_turns {
        return skipped("capability `atomic_turns` not declared");
    }
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "faults").with_state(conversation_state(2, "before"))).await?;
    let k = o.session(rec.id.clone());
    for m in [msg("m0", "zero"), tool_result_msg("m1", "one"), msg("m2", "two")] {
        c.ok("upsert_message", s.upsert_message(&k, &m).await)?;
    }
    let turns = [
        (
            true,
            conversation_state(3, "conditional"),
            vec![msg("m2", "two-v2"), tool_result_msg("m3", "three"), msg("m4", "four"), msg("m4", "four-v2")],
        ),
        (false, conversation_state(4, "unconditional"), vec![msg("m4", "four-v3"), msg("m5", "five")]),
    ];
    for (conditional, state, turn) in turns {
        let what = if conditional { "conditional" } else { "unconditional" };
        let before = c.must_get(&s, &k).await?;
        let before_raw = c.ok("get_session_raw", s.get_session_raw(&k).await)?;
        let before_log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
        let expected = conditional.then(|| before.revision());
        let mut n = 0;
        let saved = loop {
            if n == MAX_FAULT_POSITIONS {
                return Err(c.fail(format!(
                    "the {what} save_turn still failed with its write {n} armed to fail; it never got through"
                )));
            }
            c.ok("faults.arm", faults.arm(n).await)?;
            let r = s.save_turn(&k, &state, expected.as_ref(), &turn).await;
            c.ok("faults.disarm", faults.disarm().await)?;
            match r {
                Ok(_) if n == 0 => {
                    return Err(c.fail(format!(
                        "the {what} save_turn succeeded with its first write armed to fail: the fault hook injects \
                         nothing"
                    )));
                }
                Ok(saved) => break saved,
                Err(e) if faults.is_injected(&e) => {
                    let at = format!("the {what} save_turn failed at write {n} ({e})");
                    c.ensure(c.must_get(&s, &k).await? == before, || format!("{at} but changed the record"))?;
                    let raw = c.ok("get_session_raw", s.get_session_raw(&k).await)?;
                    c.ensure(raw == before_raw, || format!("{at} but changed the stored text of the record"))?;
                    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
                    c.ensure(log == before_log, || {
                        format!("{at} but changed the log from {:?} to {:?}", texts(&before_log), texts(&log))
                    })?;
                }
                Err(e) => {
                    return Err(c.fail(format!(
                        "with write {n} armed to fail, the {what} save_turn failed with an error the hook did not \
                         inject: {:?}: {e}",
                        e.kind()
                    )));
                }
            }
            n += 1;
        };
        c.ensure(saved.log_error.is_none(), || {
            format!("the {what} save_turn (write {n} armed) reported a log error: {:?}", saved.log_error)
        })?;
        let got = c.must_get(&s, &k).await?;
        let mut want = state.clone();
        want.session_id.clone_from(&rec.id);
        c.ensure(got.revision() == saved.revision && got.state == want, || {
            format!(
                "after the {what} save_turn got through, the record holds {} at {}, not reply-{what} at {}",
                got.state.reply_id,
                got.revision(),
                saved.revision
            )
        })?;
        c.ensure(got.config == before.config && got.created_at == before.created_at, || {
            format!("the {what} save_turn changed the session's config or created_at")
        })?;
        let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
        let want_log = upserted(&before_log, &turn);
        c.ensure(log == want_log, || {
            format!(
                "after the {what} save_turn got through, the log is {:?}, expected {:?}",
                texts(&log),
                texts(&want_log)
            )
        })?;
    }
    Ok(Outcome::Passed)
}

/// `list_messages(offset, limit)` returns exactly `LRANGE offset offset+limit-1`.
pub async fn messages_list_uses_lrange_semantics<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "messages_list_uses_lrange_semantics" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session(c.create(&s, req(&o, "m")).await?.id);
    let all: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
    for (i, t) in all.iter().enumerate() {
        c.ok("upsert_message", s.upsert_message(&k, &msg(&format!("m{i}"), t)).await)?;
    }
    for offset in -7i64..=7 {
        for limit in [-3i64, -1, 0, 1, 2, 3, 5, 6, 100] {
            let got = texts(&c.ok("list_messages", s.list_messages(&k, offset, limit).await)?);
            let want: Vec<String> = all[message_range(all.len(), offset, limit)].to_vec();
            c.ensure(got == want, || format!("list_messages({offset}, {limit}) = {got:?}, LRANGE gives {want:?}"))?;
        }
    }
    Ok(Outcome::Passed)
}

/// The message log belongs to a session: writing to a missing one is `NotFound`.
pub async fn messages_require_session<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "messages_require_session" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let k = owner("user-1", "agent-1").session("ghost");
    c.kind(
        "upsert_message to a missing session",
        s.upsert_message(&k, &msg("m", "t")).await,
        StorageErrorKind::NotFound,
    )?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "missing session has messages".into()
    })?;
    c.ensure(c.ok("get_message", s.get_message(&k, "m").await)?.is_none(), || "missing session has a message".into())?;
    c.ensure(c.get(&s, &k).await?.is_none(), || "upsert_message created a session".into())?;
    Ok(Outcome::Passed)
}

/// N tasks read the same revision and race conditional updates: exactly one wins each round,
/// every loser sees `Conflict`, and after retries no update is lost.
pub async fn concurrent_cas_writers_lose_no_update<F: StorageFactory>(factory: &F) -> Res {
    const N: usize = 8;
    let c = Ctx { name: "concurrent_cas_writers_lose_no_update" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session(c.create(&s, req(&o, "race")).await?.id);
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for w in 0..N {
        let (s, k, barrier) = (s.clone(), k.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let mut first_round: Option<bool> = None;
            let mut conflicts = 0u32;
            for attempt in 0..1000 {
                let rec = s.get_session(&k).await?.ok_or_else(|| {
                    StorageError::new(StorageErrorKind::NotFound, "conformance", "get_session", "session vanished")
                })?;
                let mut st = rec.state.clone();
                st.context.push(Msg::assistant(format!("writer-{w}"), format!("from writer {w}")));
                if attempt == 0 {
                    barrier.wait().await;
                }
                match s.update_session_state(&k, &st, Some(&rec.revision())).await {
                    Ok(_) => {
                        first_round.get_or_insert(true);
                        return Ok((first_round == Some(true), conflicts));
                    }
                    Err(e) if e.kind() == StorageErrorKind::Conflict => {
                        first_round.get_or_insert(false);
                        conflicts += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(StorageError::new(StorageErrorKind::Conflict, "conformance", "update_session_state", "never won"))
        }));
    }
    let mut first_winners = 0;
    let mut conflicts = 0;
    for t in tasks {
        let (won_first, n) = c.joined("writer", t.await)?;
        first_winners += usize::from(won_first);
        conflicts += n;
    }
    c.ensure(first_winners == 1, || {
        format!("{first_winners} writers won from the same revision (expected exactly 1)")
    })?;
    c.ensure(conflicts as usize >= N - 1, || format!("only {conflicts} conflicts for {N} writers"))?;
    let got = c.must_get(&s, &k).await?;
    let mut names: Vec<String> = got.state.context.iter().map(|m| m.name.clone()).collect();
    names.sort();
    let mut want: Vec<String> = (0..N).map(|w| format!("writer-{w}")).collect();
    want.sort();
    c.ensure(names == want, || format!("lost updates: stored writers {names:?}"))?;
    Ok(Outcome::Passed)
}

/// Readers racing plain (last-writer-wins) writers only ever see whole records, and the last
/// revision returned is the one stored.
pub async fn concurrent_readers_see_whole_writes<F: StorageFactory>(factory: &F) -> Res {
    const WRITERS: usize = 4;
    const WRITES: usize = 12;
    let c = Ctx { name: "concurrent_readers_see_whole_writes" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let id = c.create(&s, req(&o, "atomic")).await?.id;
    let k = o.session(id.clone());
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (s, k) = (s.clone(), k.clone());
        writers.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            for i in 0..WRITES {
                let st = conversation_state((w + i) % 5 + 1, &format!("w{w}-{i}"));
                revs.push(s.update_session_state(&k, &st, None).await?);
            }
            Ok::<_, StorageError>(revs)
        }));
    }
    let reader = {
        let (s, k, id) = (s.clone(), k.clone(), id.clone());
        tokio::spawn(async move {
            for _ in 0..WRITERS * WRITES {
                let Some(r) = s.get_session(&k).await? else { return Ok(Some("session vanished".to_owned())) };
                let n = r.state.middle_context.get("messages").and_then(JsonValue::as_u64);
                if r.state.session_id != id || (n.is_some() && n != Some(r.state.context.len() as u64)) {
                    return Ok(Some(format!("torn read: {} messages, header says {n:?}", r.state.context.len())));
                }
                tokio::task::yield_now().await;
            }
            Ok::<_, StorageError>(None)
        })
    };
    let mut last: Option<Timestamp> = None;
    // Every write makes the revision strictly greater than before: no two writes, however
    // concurrent, return the same one (a writer that read the same revision as another and wrote
    // "one microsecond after it" without a compare-and-set would).
    let mut seen: BTreeMap<Timestamp, Revision> = BTreeMap::new();
    for w in writers {
        for rev in c.joined("writer", w.await)? {
            let t = ts(&rev).ok_or_else(|| c.fail(format!("bad revision {rev}")))?;
            last = last.max(Some(t));
            if let Some(other) = seen.insert(t, rev.clone()) {
                return Err(
                    c.fail(format!("two concurrent unconditional writes both returned revision {rev} ({other})"))
                );
            }
        }
    }
    if let Some(torn) = c.joined("reader", reader.await)? {
        return Err(c.fail(torn));
    }
    let got = c.must_get(&s, &k).await?;
    c.ensure(Some(got.updated_at) == last, || {
        format!("stored revision {} is not the last one written {last:?}", got.updated_at)
    })?;
    Ok(Outcome::Passed)
}

/// Unconditional writes racing from one revision each get a revision of their own, also when the
/// clock is behind the stored `updated_at` (a record imported from a store whose clock ran an hour
/// ahead), where every writer computes "one microsecond after the stored one": the stored revision
/// is the greatest returned, with that writer's state, and a compare-and-set from any other
/// returned revision is a `Conflict` that writes nothing (a writer whose write was overwritten
/// must not believe it still holds the session). Needs `import_record` to plant the future
/// `updated_at`.
pub async fn concurrent_plain_writes_get_distinct_revisions<F: StorageFactory>(factory: &F) -> Res {
    const WRITERS: usize = 4;
    const ROUNDS: usize = 16;
    let c = Ctx { name: "concurrent_plain_writes_get_distinct_revisions" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let mut rec = foreign_record(&o, "ahead", "ahead").map_err(|e| c.fail(e))?;
    rec.updated_at = Timestamp::Naive(as_message::now_naive() + chrono::Duration::hours(1));
    if try_import(&c, &s, &rec, &[], ImportMode::CreateOnly).await?.is_none() {
        return skipped(IMPORT_UNSUPPORTED);
    }
    let k = o.session(rec.id.clone());
    let mut floor = rec.updated_at;
    for round in 0..ROUNDS {
        let barrier = Arc::new(tokio::sync::Barrier::new(WRITERS));
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (s, k, barrier) = (s.clone(), k.clone(), barrier.clone());
                tokio::spawn(async move {
                    let state = conversation_state(1, &format!("r{round}w{w}"));
                    barrier.wait().await;
                    s.update_session_state(&k, &state, None).await.map(|rev| (w, rev))
                })
            })
            .collect();
        let mut revs: Vec<(Timestamp, usize, Revision)> = Vec::with_capacity(WRITERS);
        for t in tasks {
            let (w, rev) = c.joined("unconditional writer", t.await)?;
            let t = ts(&rev).ok_or_else(|| c.fail(format!("revision {rev} is not an updated_at timestamp")))?;
            c.ensure(t > floor, || format!("round {round}: writer {w} returned {rev}, not after the stored {floor}"))?;
            revs.push((t, w, rev));
        }
        revs.sort();
        for pair in revs.windows(2) {
            c.ensure(pair[0].0 != pair[1].0, || {
                format!(
                    "round {round}: writers {} and {} racing from one revision both returned {}",
                    pair[0].1, pair[1].1, pair[0].2
                )
            })?;
        }
        let Some((top, winner, top_rev)) = revs.last().cloned() else { return Err(c.fail("no writer ran")) };
        let stored = c.must_get(&s, &k).await?;
        c.ensure(stored.revision() == top_rev && stored.state.reply_id == format!("reply-r{round}w{winner}"), || {
            format!(
                "round {round}: stored {} at {}, but the greatest revision returned was writer {winner}'s {top_rev}",
                stored.state.reply_id,
                stored.revision()
            )
        })?;
        for (_, w, rev) in &revs[..revs.len() - 1] {
            c.kind(
                &format!("round {round}: compare-and-set from writer {w}'s overwritten revision {rev}"),
                s.update_session_state(&k, &conversation_state(2, "stale"), Some(rev)).await,
                StorageErrorKind::Conflict,
            )?;
        }
        c.ensure(c.must_get(&s, &k).await? == stored, || format!("round {round}: a refused compare-and-set wrote"))?;
        floor = top;
    }
    Ok(Outcome::Passed)
}

/// A delete racing updates wins for good: the session does not come back.
pub async fn delete_racing_update_leaves_no_zombie<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "delete_racing_update_leaves_no_zombie" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    for round in 0..8 {
        let k = o.session(c.create(&s, req(&o, &format!("z{round}"))).await?.id);
        let updater = {
            let (s, k) = (s.clone(), k.clone());
            tokio::spawn(async move {
                let st = conversation_state(2, "zombie");
                for _ in 0..20 {
                    match s.update_session_state(&k, &st, None).await {
                        Ok(_) => tokio::task::yield_now().await,
                        Err(e) if e.kind() == StorageErrorKind::NotFound => return Ok(()),
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            })
        };
        let deleter = {
            let (s, k) = (s.clone(), k.clone());
            tokio::spawn(async move {
                for _ in 0..round {
                    tokio::task::yield_now().await;
                }
                s.delete_session(&k).await
            })
        };
        c.joined("updater", updater.await)?;
        c.ensure(c.joined("deleter", deleter.await)?, || "delete of an existing session returned false".into())?;
        c.ensure(c.get(&s, &k).await?.is_none(), || format!("round {round}: the deleted session came back"))?;
        c.kind(
            "update after delete",
            s.update_session_state(&k, &AgentState::default(), None).await,
            StorageErrorKind::NotFound,
        )?;
    }
    c.ensure(c.list_all(&s, &o, 50).await?.is_empty(), || "deleted sessions still listed".into())?;
    Ok(Outcome::Passed)
}

/// Agents of one user creating the same explicit session id at once: exactly one create wins,
/// every other gets `AlreadyExists`, and the stored session is the winner's.
pub async fn concurrent_creates_of_one_id_have_one_winner<F: StorageFactory>(factory: &F) -> Res {
    const N: usize = 6;
    let c = Ctx { name: "concurrent_creates_of_one_id_have_one_winner" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    for round in 0..4 {
        let id = format!("contested-{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(N));
        let mut tasks = Vec::new();
        for a in 0..N {
            let (s, barrier, id) = (s.clone(), barrier.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let o = owner("user-1", &format!("agent-{a}"));
                barrier.wait().await;
                match s.upsert_session(req(&o, &format!("by-{a}")).with_session_id(id)).await {
                    Ok(rec) => Ok(Some((a, rec))),
                    Err(e) if e.kind() == StorageErrorKind::AlreadyExists => Ok(None),
                    Err(e) => Err(e),
                }
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            if let Some(w) = c.joined("creator", t.await)? {
                winners.push(w);
            }
        }
        let [(a, rec)] = winners.as_slice() else {
            let who: Vec<usize> = winners.iter().map(|(a, _)| *a).collect();
            return Err(c.fail(format!("round {round}: agents {who:?} all created {id:?} (expected exactly one)")));
        };
        let winner = owner("user-1", &format!("agent-{a}"));
        let got = c.must_get(&s, &winner.session(id.clone())).await?;
        c.ensure(got == *rec && got.config.name == format!("by-{a}"), || {
            format!("round {round}: the stored session is not the winner's: {:?}", got.meta())
        })?;
        for other in (0..N).filter(|o| o != a) {
            let o = owner("user-1", &format!("agent-{other}"));
            c.ensure(c.get(&s, &o.session(id.clone())).await?.is_none(), || {
                format!("round {round}: agent-{other} sees the winner's session")
            })?;
        }
    }
    Ok(Outcome::Passed)
}

/// Writers appending to one message log while another keeps replacing its own last message:
/// no appended message is ever overwritten or lost, and each writer's messages keep their order.
pub async fn concurrent_message_writers_overwrite_nothing<F: StorageFactory>(factory: &F) -> Res {
    const APPENDERS: usize = 4;
    const EACH: usize = 24;
    let c = Ctx { name: "concurrent_message_writers_overwrite_nothing" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session(c.create(&s, req(&o, "log")).await?.id);
    let barrier = Arc::new(tokio::sync::Barrier::new(APPENDERS + 1));
    let mut tasks = Vec::new();
    for w in 0..APPENDERS {
        let (s, k, barrier) = (s.clone(), k.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            for i in 0..EACH {
                s.upsert_message(&k, &msg(&format!("w{w}-{i}"), &format!("from {w}"))).await?;
                tokio::task::yield_now().await;
            }
            Ok::<_, StorageError>(())
        }));
    }
    // A streaming reply: the same id written again and again (replace when last, else append).
    let streamer = {
        let (s, k, barrier) = (s.clone(), k.clone(), barrier.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            // Back to back, as deltas stream in: most writes replace the streamer's own last message.
            for v in 0..APPENDERS * EACH {
                s.upsert_message(&k, &msg("stream", &format!("v{v}"))).await?;
            }
            Ok::<_, StorageError>(())
        })
    };
    for t in tasks {
        c.joined("appender", t.await)?;
    }
    c.joined("streamer", streamer.await)?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    for w in 0..APPENDERS {
        let mine: Vec<&str> =
            log.iter().map(|m| m.id.as_str()).filter(|id| id.starts_with(&format!("w{w}-"))).collect();
        let want: Vec<String> = (0..EACH).map(|i| format!("w{w}-{i}")).collect();
        c.ensure(mine == want, || format!("writer {w}'s messages in the log: {mine:?}, expected {want:?}"))?;
    }
    let last = log.iter().rev().find(|m| m.id == "stream").map(|m| texts(std::slice::from_ref(m)));
    let final_version = format!("v{}", APPENDERS * EACH - 1);
    let newest = c.ok("get_message", s.get_message(&k, "stream").await)?.map(|m| texts(std::slice::from_ref(&m)));
    c.ensure(last.is_some() && newest == last && newest == Some(vec![final_version.clone()]), || {
        format!("the streamed message's newest copy is {newest:?} (last in log {last:?}), expected {final_version}")
    })?;
    Ok(Outcome::Passed)
}

/// Messages written while the session is deleted never outlive the delete: once it completed,
/// writes fail with `NotFound`, and a session created again under the id starts with an empty log.
pub async fn message_racing_delete_leaves_no_log<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "message_racing_delete_leaves_no_log" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    for round in 0..12 {
        let id = format!("md{round}");
        let k = o.session(c.create(&s, req(&o, &id).with_session_id(id.clone())).await?.id);
        let writer = {
            let (s, k) = (s.clone(), k.clone());
            tokio::spawn(async move {
                for i in 0..60 {
                    match s.upsert_message(&k, &msg(&format!("m{i}"), "racing")).await {
                        Ok(()) => tokio::task::yield_now().await,
                        Err(e) if e.kind() == StorageErrorKind::NotFound => return Ok(()),
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            })
        };
        let deleter = {
            let (s, k) = (s.clone(), k.clone());
            tokio::spawn(async move {
                // Strike while the writer is busy: after its first messages landed, then at a
                // different point of its next write in each round.
                for _ in 0..10_000 {
                    if !s.list_messages(&k, 0, 0).await?.is_empty() {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                for _ in 0..round {
                    tokio::task::yield_now().await;
                }
                s.delete_session(&k).await
            })
        };
        c.joined("message writer", writer.await)?;
        c.ensure(c.joined("deleter", deleter.await)?, || "delete of an existing session returned false".into())?;
        c.kind(
            "upsert_message after delete",
            s.upsert_message(&k, &msg("late", "x")).await,
            StorageErrorKind::NotFound,
        )?;
        c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
            format!("round {round}: messages outlived the delete")
        })?;
        c.create(&s, req(&o, "again").with_session_id(id.clone())).await?;
        c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
            format!("round {round}: the recreated session inherited messages")
        })?;
    }
    Ok(Outcome::Passed)
}

/// A durable backend keeps sessions and messages across a close and a reopen.
pub async fn durable_survives_reopen<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "durable_survives_reopen" };
    let (g, s) = c.build(factory, &BuildOptions::default()).await?;
    if !s.capabilities().durable {
        return skipped("capability `durable` not declared");
    }
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "durable").with_state(conversation_state(3, "d"))).await?;
    let k = o.session(rec.id.clone());
    c.ok("upsert_message", s.upsert_message(&k, &msg("m1", "kept")).await)?;
    c.ok("close", s.close().await)?;
    drop(s);
    let Some(s2) = c.ok("factory.reopen", factory.reopen(&g).await)? else {
        return skipped("the factory cannot reopen a store (StorageFactory::reopen)");
    };
    c.ensure(c.must_get(&s2, &k).await? == rec, || "record differs after reopen".into())?;
    let msgs = c.ok("list_messages", s2.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&msgs) == ["kept"], || "messages differ after reopen".into())?;
    Ok(Outcome::Passed)
}

/// Two instances over the same data (two processes) see each other's writes, and CAS holds
/// across them.
pub async fn cross_process_instances_agree<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "cross_process_instances_agree" };
    let (g, s) = c.build(factory, &BuildOptions::default()).await?;
    if !s.capabilities().cross_process {
        return skipped("capability `cross_process` not declared");
    }
    let Some(s2) = c.ok("factory.reopen", factory.reopen(&g).await)? else {
        return skipped("the factory cannot open a second instance (StorageFactory::reopen)");
    };
    let o = owner("user-1", "agent-1");
    let rec = c.create(&s, req(&o, "shared")).await?;
    let k = o.session(rec.id.clone());
    c.ensure(c.must_get(&s2, &k).await? == rec, || "second instance reads a different record".into())?;
    c.ok(
        "update via the first",
        s.update_session_state(&k, &conversation_state(1, "first"), Some(&rec.revision())).await,
    )?;
    c.kind(
        "stale conditional update via the second",
        s2.update_session_state(&k, &conversation_state(1, "second"), Some(&rec.revision())).await,
        StorageErrorKind::Conflict,
    )?;
    c.ensure(c.ok("delete via the second", s2.delete_session(&k).await)?, || "second instance cannot delete".into())?;
    c.ensure(c.get(&s, &k).await?.is_none(), || "first instance still sees a deleted session".into())?;
    Ok(Outcome::Passed)
}

/// With a TTL, an idle session expires with its message log and its listing entry (polled for up to 10 s).
pub async fn ttl_expires_idle_sessions<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "ttl_expires_idle_sessions" };
    let (_g0, probe) = c.build(factory, &BuildOptions::default()).await?;
    if !probe.capabilities().ttl {
        return skipped("capability `ttl` not declared");
    }
    drop(probe);
    let (_g, s) = c.build(factory, &BuildOptions::default().with_ttl(Duration::from_secs(1))).await?;
    let o = owner("user-1", "agent-1");
    let k = o.session(c.create(&s, req(&o, "ttl")).await?.id);
    c.ok("upsert_message", s.upsert_message(&k, &msg("m1", "expires too")).await)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if c.get(&s, &k).await?.is_none() {
            // Everything of the session goes with it.
            c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
                "the message log outlived its expired session".into()
            })?;
            c.ensure(c.list_all(&s, &o, 50).await?.is_empty(), || "an expired session is still listed".into())?;
            return Ok(Outcome::Passed);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(c.fail("session still present 10 s after a 1 s TTL"));
        }
        // Expiry is the passage of time itself; there is nothing to await but the clock.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// With a TTL, writes restart it: a session whose state is written every fifth of the TTL for one
/// and a half TTLs is still there, whole (its record, the message log written once at the start,
/// its listing entry), though it is older than the TTL; once the writes stop, all of it expires
/// (polled for up to 10 s).
pub async fn ttl_restarts_on_writes<F: StorageFactory>(factory: &F) -> Res {
    const TTL: Duration = Duration::from_secs(2);
    let c = Ctx { name: "ttl_restarts_on_writes" };
    let (_g0, probe) = c.build(factory, &BuildOptions::default()).await?;
    if !probe.capabilities().ttl {
        return skipped("capability `ttl` not declared");
    }
    drop(probe);
    let (_g, s) = c.build(factory, &BuildOptions::default().with_ttl(TTL)).await?;
    let o = owner("user-1", "agent-1");
    let id = c.create(&s, req(&o, "kept-alive")).await?.id;
    let k = o.session(id.clone());
    c.ok("upsert_message", s.upsert_message(&k, &msg("m1", "written once")).await)?;
    let created = tokio::time::Instant::now();
    let mut writes = 0;
    // Keeping a session alive is the passage of time itself, written through: nothing to await
    // but the clock.
    let mut tick = tokio::time::interval(TTL / 5);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while created.elapsed() < TTL * 3 / 2 {
        tick.tick().await;
        writes += 1;
        match s.update_session_state(&k, &conversation_state(1, &format!("w{writes}")), None).await {
            Ok(_) => {}
            Err(e) if e.kind() == StorageErrorKind::NotFound => {
                return Err(c.fail(format!(
                    "the session expired {:?} after it was created although its state was written every {:?} \
                     (TTL {TTL:?}): writes do not restart the TTL",
                    created.elapsed(),
                    TTL / 5
                )));
            }
            Err(e) => return Err(c.fail(format!("update_session_state: unexpected error: {e}"))),
        }
    }
    let got = c.get(&s, &k).await?;
    c.ensure(got.as_ref().is_some_and(|r| r.state.reply_id == format!("reply-w{writes}")), || {
        format!("after {writes} writes, get_session found {:?}", got.as_ref().map(|r| &r.state.reply_id))
    })?;
    let log = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&log) == ["written once"], || {
        format!(
            "the message log of a session written every {:?} is {:?} after {:?} (TTL {TTL:?}): state writes do \
             not restart the log's TTL",
            TTL / 5,
            texts(&log),
            created.elapsed()
        )
    })?;
    let listed = c.list_all(&s, &o, 50).await?;
    c.ensure(listed == [id.clone()], || {
        format!("the listing of a session kept alive is {listed:?} after {:?} (TTL {TTL:?})", created.elapsed())
    })?;
    // Idle from now on: everything of the session goes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if c.get(&s, &k).await?.is_none() {
            c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
                "the message log outlived its expired session".into()
            })?;
            c.ensure(c.list_all(&s, &o, 50).await?.is_empty(), || "an expired session is still listed".into())?;
            return Ok(Outcome::Passed);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(c.fail(format!("session still present 10 s after its last write (TTL {TTL:?})")));
        }
        // Expiry is the passage of time itself; there is nothing to await but the clock.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A record as another store (or Python) wrote it: old timestamps (one with an offset, one with
/// microseconds), a schedule, a team, a model config and a foreign `state.session_id`.
fn foreign_record(o: &Owner, id: &str, tag: &str) -> Result<SessionRecord, String> {
    let ts = |t: &str| t.parse::<Timestamp>().map_err(|e| format!("timestamp {t}: {e}"));
    let mut config = config(&format!("imported-{tag}"));
    config.chat_model_config = Some(crate::ChatModelConfig {
        kind: "openai_credential".into(),
        credential_id: "cred-1".into(),
        model: "gpt-x".into(),
        parameters: as_message::JsonMap::from_iter([("temperature".to_owned(), JsonValue::from(0.25))]),
    });
    let mut state = conversation_state(2, tag);
    state.session_id = "not-the-session-id".into();
    Ok(SessionRecord {
        id: id.to_owned(),
        updated_at: ts("2024-03-02T11:00:00.123456")?,
        created_at: ts("2024-03-01T10:00:00+08:00")?,
        user_id: o.user_id.clone(),
        agent_id: o.agent_id.clone(),
        source: SessionSource::Schedule,
        source_schedule_id: Some(format!("sched-{tag}")),
        team_id: Some(format!("team-{tag}")),
        config,
        state,
    })
}

/// What a store must give back for an imported `record`: the same, under its own id.
fn as_stored(record: &SessionRecord) -> SessionRecord {
    SessionRecord::from_parts(record.meta(), record.state.clone())
}

/// Runs `import_record`; `Ok(None)` when the backend reports `Unsupported` (the scenario skips).
async fn try_import(
    c: &Ctx,
    s: &SharedStorage,
    record: &SessionRecord,
    messages: &[Msg],
    mode: ImportMode,
) -> Result<Option<ImportOutcome>, ConformanceError> {
    match s.import_record(record, messages, mode).await {
        Err(e) if e.kind() == StorageErrorKind::Unsupported => Ok(None),
        r => c.ok("import_record", r).map(Some),
    }
}

const IMPORT_UNSUPPORTED: &str = "import_record reports Unsupported (optional method)";

/// An imported record reads back exactly as given (every field, timestamps included) with its
/// message log and its index entry; its revision is its `updated_at`, and it lives on like any
/// other session (CAS update, delete cascade).
pub async fn import_record_is_verbatim<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "import_record_is_verbatim" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let newer = c.create(&s, req(&o, "made-here")).await?;
    let mut rec = foreign_record(&o, "imported-1", "v").map_err(|e| c.fail(e))?;
    rec.state = rich_state().map_err(|e| c.fail(e))?;
    let log = vec![msg("m1", "first"), tool_result_msg("m2", "second"), msg("m3", "third")];
    let Some(outcome) = try_import(&c, &s, &rec, &log, ImportMode::CreateOnly).await? else {
        return skipped(IMPORT_UNSUPPORTED);
    };
    c.ensure(outcome == ImportOutcome::Created, || format!("import of a new id returned {outcome:?}"))?;
    let k = o.session(rec.id.clone());
    let want = as_stored(&rec);
    let got = c.must_get(&s, &k).await?;
    c.ensure(got.state.session_id == rec.id, || format!("state.session_id stored as {:?}", got.state.session_id))?;
    c.ensure(got == want, || format!("imported record reads back differently:\n{:?}\n{:?}", got.meta(), want.meta()))?;
    c.ensure(got.to_canonical_json() == want.to_canonical_json(), || "canonical JSON differs".into())?;
    c.ensure(got.revision() == rec.revision(), || {
        format!("revision {} is not the imported updated_at", got.revision())
    })?;
    let msgs = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(msgs == log, || format!("message log {:?}, imported {:?}", texts(&msgs), texts(&log)))?;
    // Listed, at its imported place: older than the session made just now.
    let page = c.ok("list_sessions", s.list_sessions(&o, &PageRequest::first(50)).await)?;
    let ids: Vec<&str> = page.sessions.iter().map(|x| x.id.as_str()).collect();
    c.ensure(ids == [newer.id.as_str(), rec.id.as_str()], || format!("listing {ids:?}, expected the import last"))?;
    let sum = &page.sessions[1];
    c.ensure(sum.created_at == rec.created_at && sum.updated_at == rec.updated_at, || {
        format!("summary timestamps {} / {}", sum.created_at, sum.updated_at)
    })?;
    c.ensure(sum.source == SessionSource::Schedule && sum.name == rec.config.name, || "summary differs".into())?;
    // A CAS write from the imported revision works and moves it forward.
    let rev =
        c.ok("update from the imported revision", s.update_session_state(&k, &rec.state, Some(&rec.revision())).await)?;
    c.ensure(ts(&rev) > Some(rec.updated_at), || format!("revision {rev} is not after the imported one"))?;
    let after = c.must_get(&s, &k).await?;
    c.ensure(after.created_at == rec.created_at && after.team_id == rec.team_id, || {
        "an update lost imported fields".into()
    })?;
    // And delete removes what the import wrote.
    c.ensure(c.ok("delete", s.delete_session(&k).await)?, || "delete of an imported session returned false".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&k, 0, 0).await)?.is_empty(), || {
        "imported log survives delete".into()
    })?;
    c.ensure(c.list_all(&s, &o, 50).await? == [newer.id.clone()], || "imported index entry survives delete".into())?;
    // A record without a schedule or team, with an empty log, is verbatim too.
    let mut plain = foreign_record(&o, "imported-2", "p").map_err(|e| c.fail(e))?;
    plain.source = SessionSource::User;
    plain.source_schedule_id = None;
    plain.team_id = None;
    try_import(&c, &s, &plain, &[], ImportMode::CreateOnly).await?;
    let k2 = o.session(plain.id.clone());
    c.ensure(c.must_get(&s, &k2).await? == as_stored(&plain), || "plain imported record differs".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&k2, 0, 0).await)?.is_empty(), || "empty log has messages".into())?;
    Ok(Outcome::Passed)
}

/// `CreateOnly` refuses an existing id and writes nothing; `Overwrite` replaces a session of the
/// same owner (record, listing entry and message log); neither takes an id from another agent.
pub async fn import_record_modes<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "import_record_modes" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let first = foreign_record(&o, "dup", "one").map_err(|e| c.fail(e))?;
    let log1 = vec![msg("a1", "one"), msg("a2", "two")];
    if try_import(&c, &s, &first, &log1, ImportMode::CreateOnly).await?.is_none() {
        return skipped(IMPORT_UNSUPPORTED);
    }
    let k = o.session("dup");
    let mut second = foreign_record(&o, "dup", "two").map_err(|e| c.fail(e))?;
    second.created_at = "2023-01-01T00:00:00".parse().map_err(|e| c.fail(format!("{e}")))?;
    second.updated_at = "2023-01-02T00:00:00".parse().map_err(|e| c.fail(format!("{e}")))?;
    second.source_schedule_id = Some("sched-other".into());
    second.team_id = None;
    let log2 = vec![msg("b1", "replaced")];
    c.kind(
        "CreateOnly import of an existing id",
        s.import_record(&second, &log2, ImportMode::CreateOnly).await,
        StorageErrorKind::AlreadyExists,
    )?;
    c.ensure(c.must_get(&s, &k).await? == as_stored(&first), || "a refused import changed the record".into())?;
    let msgs = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(msgs == log1, || format!("a refused import changed the log: {:?}", texts(&msgs)))?;
    let outcome = try_import(&c, &s, &second, &log2, ImportMode::Overwrite).await?;
    c.ensure(outcome == Some(ImportOutcome::Replaced), || format!("overwrite returned {outcome:?}"))?;
    c.ensure(c.must_get(&s, &k).await? == as_stored(&second), || "overwrite did not replace the record".into())?;
    let msgs = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(msgs == log2, || format!("overwrite left the log {:?}", texts(&msgs)))?;
    let page = c.ok("list_sessions", s.list_sessions(&o, &PageRequest::first(50)).await)?;
    c.ensure(page.sessions.len() == 1 && page.sessions[0].created_at == second.created_at, || {
        format!("listing after overwrite: {:?}", page.sessions)
    })?;
    // Overwrite of an id that does not exist creates it.
    let fresh = foreign_record(&o, "fresh", "f").map_err(|e| c.fail(e))?;
    let outcome = try_import(&c, &s, &fresh, &[], ImportMode::Overwrite).await?;
    c.ensure(outcome == Some(ImportOutcome::Created), || format!("overwrite of a new id returned {outcome:?}"))?;
    // Overwrite of a session made by upsert_session, with a message log, replaces both.
    let made = c.create(&s, req(&o, "made").with_session_id("made")).await?;
    c.ok("upsert_message", s.upsert_message(&o.session("made"), &msg("x", "old")).await)?;
    let over = foreign_record(&o, &made.id, "m").map_err(|e| c.fail(e))?;
    try_import(&c, &s, &over, &[], ImportMode::Overwrite).await?;
    c.ensure(c.must_get(&s, &o.session("made")).await? == as_stored(&over), || "upserted session not replaced".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&o.session("made"), 0, 0).await)?.is_empty(), || {
        "the old log of an overwritten session survived".into()
    })?;
    // Another agent of the same user can never take the id, in either mode.
    let thief = foreign_record(&owner("user-1", "agent-2"), "dup", "t").map_err(|e| c.fail(e))?;
    for mode in [ImportMode::CreateOnly, ImportMode::Overwrite] {
        c.kind(
            &format!("{mode:?} import of another agent's id"),
            s.import_record(&thief, &[], mode).await,
            StorageErrorKind::AlreadyExists,
        )?;
    }
    c.ensure(c.must_get(&s, &k).await? == as_stored(&second), || "another agent's import changed the record".into())?;
    c.ensure(c.get(&s, &owner("user-1", "agent-2").session("dup")).await?.is_none(), || "the thief sees it".into())?;
    // Another user has its own id space.
    let other = foreign_record(&owner("user-2", "agent-1"), "dup", "u2").map_err(|e| c.fail(e))?;
    let outcome = try_import(&c, &s, &other, &log1, ImportMode::CreateOnly).await?;
    c.ensure(outcome == Some(ImportOutcome::Created), || format!("another user's import returned {outcome:?}"))?;
    c.ensure(c.must_get(&s, &k).await? == as_stored(&second), || "another user's import changed this one".into())?;
    Ok(Outcome::Passed)
}

/// Bad ids are `InvalidKey` and a too large record or message is `TooLarge`; either way nothing
/// is written (no record, no listing entry, no message).
pub async fn import_record_validates<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "import_record_validates" };
    const MAX: usize = 8 * 1024;
    let (_g, s) = c.build(factory, &BuildOptions::default().with_max_record_bytes(MAX)).await?;
    let o = owner("user-1", "agent-1");
    let good = foreign_record(&o, "good", "g").map_err(|e| c.fail(e))?;
    if try_import(&c, &s, &good, &[], ImportMode::CreateOnly).await?.is_none() {
        return skipped(IMPORT_UNSUPPORTED);
    }
    for bad in ["a:b", "{x}", "*", "a b", "", "s]"] {
        for field in ["user_id", "agent_id", "session_id", "source_schedule_id"] {
            let mut r = foreign_record(&o, "bad-target", "b").map_err(|e| c.fail(e))?;
            match field {
                "user_id" => r.user_id = bad.into(),
                "agent_id" => r.agent_id = bad.into(),
                "session_id" => r.id = bad.into(),
                _ if bad.is_empty() => continue, // an empty schedule id means none (as in 2.0.4)
                _ => r.source_schedule_id = Some(bad.into()),
            }
            for mode in [ImportMode::CreateOnly, ImportMode::Overwrite] {
                c.kind(
                    &format!("{mode:?} import with {field} = {bad:?}"),
                    s.import_record(&r, &[msg("m", "t")], mode).await,
                    StorageErrorKind::InvalidKey,
                )?;
            }
        }
    }
    c.ensure(c.list_all(&s, &o, 50).await? == ["good"], || "a rejected import wrote a session".into())?;
    let mut big = foreign_record(&o, "big", "big").map_err(|e| c.fail(e))?;
    big.state.context.push(Msg::user("user", "z".repeat(MAX)));
    c.kind(
        "import of a too large record",
        s.import_record(&big, &[], ImportMode::CreateOnly).await,
        StorageErrorKind::TooLarge,
    )?;
    let small = foreign_record(&o, "big", "small").map_err(|e| c.fail(e))?;
    c.kind(
        "import with a too large message",
        s.import_record(&small, &[msg("m1", "ok"), msg("m2", &"q".repeat(MAX))], ImportMode::CreateOnly).await,
        StorageErrorKind::TooLarge,
    )?;
    c.ensure(c.get(&s, &o.session("big")).await?.is_none(), || "a rejected import left a record".into())?;
    c.ensure(c.ok("list_messages", s.list_messages(&o.session("big"), 0, 0).await)?.is_empty(), || {
        "a rejected import left messages".into()
    })?;
    // A rejected overwrite leaves the old session whole.
    let mut big_good = good.clone();
    big_good.state.context.push(Msg::user("user", "z".repeat(MAX)));
    c.kind(
        "overwrite with a too large record",
        s.import_record(&big_good, &[], ImportMode::Overwrite).await,
        StorageErrorKind::TooLarge,
    )?;
    c.ensure(c.must_get(&s, &o.session("good")).await? == as_stored(&good), || "a rejected overwrite wrote".into())?;
    c.ensure(c.list_all(&s, &o, 50).await? == ["good"], || "a rejected import left an index entry".into())?;
    Ok(Outcome::Passed)
}

/// A record whose `updated_at` is the last microsecond Python's `datetime` holds (imported: no
/// clock gets there) can be read, listed and deleted, but not written: the next revision would be
/// in year 10000, which no reader takes back, so every write is `InvalidInput` and writes nothing
/// (the record, its stored text and its message log stay as they were). An import of a record with
/// a timestamp outside years 1 to 9999 is `InvalidInput` too, in either mode, and writes nothing.
/// Needs `import_record`.
pub async fn timestamps_stay_in_python_range<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "timestamps_stay_in_python_range" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let o = owner("user-1", "agent-1");
    let at = |t: &str| t.parse::<Timestamp>().map_err(|e| c.fail(format!("timestamp {t}: {e}")));
    let mut rec = foreign_record(&o, "edge", "edge").map_err(|e| c.fail(e))?;
    rec.updated_at = at("9999-12-31T23:59:59.999999")?;
    let log = [msg("m1", "kept")];
    if try_import(&c, &s, &rec, &log, ImportMode::CreateOnly).await?.is_none() {
        return skipped(IMPORT_UNSUPPORTED);
    }
    let k = o.session(rec.id.clone());
    let before = c.must_get(&s, &k).await?;
    c.ensure(before == as_stored(&rec), || format!("the imported record reads back as {:?}", before.meta()))?;
    let raw = c.ok("get_session_raw", s.get_session_raw(&k).await)?;
    let state = conversation_state(1, "after-the-end");
    let invalid = StorageErrorKind::InvalidInput;
    c.kind("update_session_state", s.update_session_state(&k, &state, None).await, invalid)?;
    c.kind(
        "conditional update_session_state",
        s.update_session_state(&k, &state, Some(&rec.revision())).await,
        invalid,
    )?;
    c.kind("save_turn", s.save_turn(&k, &state, Some(&rec.revision()), &[msg("m2", "never")]).await, invalid)?;
    c.kind("unconditional save_turn", s.save_turn(&k, &state, None, &[msg("m2", "never")]).await, invalid)?;
    c.kind(
        "upsert_session (update)",
        s.upsert_session(req(&o, "renamed").with_session_id(rec.id.clone()).with_state(state.clone())).await,
        invalid,
    )?;
    c.kind(
        "upsert_session (update, no state)",
        s.upsert_session(req(&o, "renamed").with_session_id(rec.id.clone())).await,
        invalid,
    )?;
    let after = c.must_get(&s, &k).await?;
    c.ensure(after == before, || format!("a refused write changed the record: {:?}", after.meta()))?;
    c.ensure(c.ok("get_session_raw", s.get_session_raw(&k).await)? == raw, || {
        "a refused write changed the stored text of the record".into()
    })?;
    let msgs = c.ok("list_messages", s.list_messages(&k, 0, 0).await)?;
    c.ensure(texts(&msgs) == ["kept"], || format!("a refused write changed the log to {:?}", texts(&msgs)))?;
    let page = c.ok("list_sessions", s.list_sessions(&o, &PageRequest::first(50)).await)?;
    c.ensure(
        page.errors.is_empty() && page.sessions.iter().map(|x| (&x.id, x.updated_at)).eq([(&rec.id, rec.updated_at)]),
        || format!("listing {:?}, errors {:?}", page.sessions, page.errors),
    )?;
    c.ensure(c.ok("delete", s.delete_session(&k).await)?, || {
        "the record at the end of the range cannot be deleted".into()
    })?;
    c.ensure(c.get(&s, &k).await?.is_none(), || "the deleted record is still there".into())?;
    // Timestamps no reader takes back are not imported, in either mode.
    let kept = foreign_record(&o, "kept", "kept").map_err(|e| c.fail(e))?;
    try_import(&c, &s, &kept, &log, ImportMode::CreateOnly).await?;
    let year_10000 = rec.updated_at.next_micro();
    let year_0 = at("0001-01-01T00:00:00")?
        .sort_key()
        .checked_sub_signed(chrono::Duration::microseconds(1))
        .map(Timestamp::Naive)
        .ok_or_else(|| c.fail("no time before 0001-01-01"))?;
    for (field, t) in [
        ("updated_at", year_10000),
        ("created_at", year_10000),
        ("created_at", year_0),
        ("updated_at", Timestamp::Naive(chrono::NaiveDateTime::MAX)),
    ] {
        for (id, mode) in [("outside", ImportMode::CreateOnly), ("kept", ImportMode::Overwrite)] {
            let mut r = foreign_record(&o, id, "outside").map_err(|e| c.fail(e))?;
            if field == "updated_at" {
                r.updated_at = t;
            } else {
                r.created_at = t;
            }
            c.kind(
                &format!("{mode:?} import with {field} {t}"),
                s.import_record(&r, &[msg("x", "never")], mode).await,
                invalid,
            )?;
        }
    }
    c.ensure(c.get(&s, &o.session("outside")).await?.is_none(), || "a refused import left a record".into())?;
    c.ensure(c.must_get(&s, &o.session("kept")).await? == as_stored(&kept), || {
        "a refused overwrite changed the record".into()
    })?;
    let msgs = c.ok("list_messages", s.list_messages(&o.session("kept"), 0, 0).await)?;
    c.ensure(texts(&msgs) == ["kept"], || format!("a refused overwrite changed the log to {:?}", texts(&msgs)))?;
    c.ensure(c.list_all(&s, &o, 50).await? == ["kept"], || "a refused import left a listing entry".into())?;
    Ok(Outcome::Passed)
}

/// `list_agents` lists exactly the agents the user has sessions under, sorted, and forgets an
/// agent once its sessions are deleted.
pub async fn list_agents_is_scoped_and_sorted<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "list_agents_is_scoped_and_sorted" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    let agents = |user: &'static str| {
        let s = s.clone();
        async move { s.list_agents(user).await }
    };
    match agents("user-1").await {
        Err(e) if e.kind() == StorageErrorKind::Unsupported => {
            return skipped("list_agents reports Unsupported (optional method)");
        }
        r => {
            let got = c.ok("list_agents of an empty store", r)?;
            c.ensure(got.is_empty(), || format!("an empty store lists agents {got:?}"))?;
        }
    }
    let mut b_sessions = Vec::new();
    for (u, a) in [
        ("user-1", "b-agent"),
        ("user-1", "a-agent"),
        ("user-1", "a-agent"),
        ("user-1", "agent-10"),
        ("user-1", "b-agent"),
        ("user-2", "z-agent"),
        ("user-10", "y-agent"),
        ("user", "x-agent"),
    ] {
        let rec = c.create(&s, req(&owner(u, a), "la")).await?;
        if (u, a) == ("user-1", "b-agent") {
            b_sessions.push(owner(u, a).session(rec.id));
        }
    }
    let want = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
    let got = c.ok("list_agents", agents("user-1").await)?;
    c.ensure(got == want(&["a-agent", "agent-10", "b-agent"]), || format!("user-1 agents {got:?}"))?;
    let got = c.ok("list_agents", agents("user-2").await)?;
    c.ensure(got == want(&["z-agent"]), || format!("user-2 agents {got:?}"))?;
    let got = c.ok("list_agents", agents("user").await)?;
    c.ensure(got == want(&["x-agent"]), || format!("user agents {got:?}"))?;
    let got = c.ok("list_agents", agents("nobody").await)?;
    c.ensure(got.is_empty(), || format!("an unknown user has agents {got:?}"))?;
    c.ok("delete", s.delete_session(&b_sessions[0]).await)?;
    let got = c.ok("list_agents", agents("user-1").await)?;
    c.ensure(got == want(&["a-agent", "agent-10", "b-agent"]), || format!("after one delete: {got:?}"))?;
    c.ok("delete", s.delete_session(&b_sessions[1]).await)?;
    let got = c.ok("list_agents", agents("user-1").await)?;
    c.ensure(got == want(&["a-agent", "agent-10"]), || format!("an agent without sessions is listed: {got:?}"))?;
    for bad in ["", "a:b", "u*", "x y"] {
        c.kind(&format!("list_agents({bad:?})"), s.list_agents(bad).await, StorageErrorKind::InvalidKey)?;
    }
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Model-based property test

#[derive(Clone, Copy, Debug)]
enum Cas {
    Plain,
    Current,
    Stale,
}

#[derive(Clone, Debug)]
enum Op {
    Upsert {
        owner: usize,
        sid: Option<usize>,
        name: u8,
        tag: Option<u8>,
    },
    /// `turn`: `None` is `update_session_state`, `Some` a `save_turn` with these `(mid, text)` messages.
    Update {
        owner: usize,
        sid: usize,
        tag: u8,
        cas: Cas,
        turn: Option<Vec<(u8, u8)>>,
    },
    Get {
        owner: usize,
        sid: usize,
    },
    Delete {
        owner: usize,
        sid: usize,
    },
    PutMsg {
        owner: usize,
        sid: usize,
        mid: u8,
        text: u8,
    },
    GetMsg {
        owner: usize,
        sid: usize,
        mid: u8,
    },
    ListMsgs {
        owner: usize,
        sid: usize,
        offset: i64,
        limit: i64,
    },
    List {
        owner: usize,
        limit: usize,
    },
}

const OWNERS: [(&str, &str); 3] = [("user-1", "agent-1"), ("user-1", "agent-2"), ("user-2", "agent-1")];

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let o = 0..OWNERS.len();
    let sid = 0usize..6;
    let cas = prop_oneof![Just(Cas::Plain), Just(Cas::Current), Just(Cas::Stale)];
    prop_oneof![
        3 => (o.clone(), proptest::option::weighted(0.8, sid.clone()), 0u8..4, proptest::option::of(0u8..6))
            .prop_map(|(owner, sid, name, tag)| Op::Upsert { owner, sid, name, tag }),
        3 => (o.clone(), sid.clone(), 0u8..6, cas, proptest::option::of(proptest::collection::vec((0u8..3, 0u8..9), 0..4)))
            .prop_map(|(owner, sid, tag, cas, turn)| Op::Update { owner, sid, tag, cas, turn }),
        2 => (o.clone(), sid.clone()).prop_map(|(owner, sid)| Op::Get { owner, sid }),
        1 => (o.clone(), sid.clone()).prop_map(|(owner, sid)| Op::Delete { owner, sid }),
        3 => (o.clone(), sid.clone(), 0u8..3, 0u8..9).prop_map(|(owner, sid, mid, text)| Op::PutMsg { owner, sid, mid, text }),
        1 => (o.clone(), sid.clone(), 0u8..3).prop_map(|(owner, sid, mid)| Op::GetMsg { owner, sid, mid }),
        1 => (o.clone(), sid.clone(), -4i64..4, -2i64..4).prop_map(|(owner, sid, offset, limit)| Op::ListMsgs { owner, sid, offset, limit }),
        1 => (o, 1usize..4).prop_map(|(owner, limit)| Op::List { owner, limit }),
    ]
}

#[derive(Debug)]
struct ModelSession {
    agent: String,
    name: String,
    tag: Option<u8>,
    created_at: Timestamp,
    rev: Revision,
    msgs: Vec<(String, String)>,
}

fn tagged_state(tag: u8) -> AgentState {
    conversation_state(usize::from(tag % 3), &format!("m{tag}"))
}

fn check_record(rec: &SessionRecord, id: &str, m: &ModelSession) -> Result<(), String> {
    if rec.id != id || rec.state.session_id != id {
        return Err(format!("record id {} / state.session_id {} for session {id}", rec.id, rec.state.session_id));
    }
    if rec.agent_id != m.agent || rec.config.name != m.name {
        return Err(format!(
            "record agent/name {}/{} but model has {}/{}",
            rec.agent_id, rec.config.name, m.agent, m.name
        ));
    }
    let ok_state = match m.tag {
        Some(t) => rec.state.reply_id == format!("reply-m{t}") && rec.state.context.len() == usize::from(t % 3) * 2,
        None => rec.state.context.is_empty() && !rec.state.reply_id.starts_with("reply-"),
    };
    if !ok_state {
        return Err(format!(
            "state of {id} is reply_id {} with {} messages, model has tag {:?}",
            rec.state.reply_id,
            rec.state.context.len(),
            m.tag
        ));
    }
    if rec.revision() != m.rev {
        return Err(format!("revision of {id} is {}, the last write returned {}", rec.revision(), m.rev));
    }
    Ok(())
}

fn kind_of<T>(r: &Result<T, StorageError>) -> Option<StorageErrorKind> {
    r.as_ref().err().map(StorageError::kind)
}

/// Runs one op sequence against a fresh store and the model; `Err` describes the first divergence.
async fn run_model_case(s: &SharedStorage, ops: &[Op]) -> Result<(), String> {
    let mut model: BTreeMap<(String, String), ModelSession> = BTreeMap::new();
    let mut ids: Vec<String> = (0..4).map(|i| format!("s{i}")).collect();
    for (step, op) in ops.iter().enumerate() {
        let at = |e: String| format!("step {step} {op:?}: {e}");
        let pick = |i: usize, ids: &Vec<String>| ids[i % ids.len()].clone();
        match *op {
            Op::Upsert { owner: oi, sid, name, tag } => {
                let o = owner(OWNERS[oi].0, OWNERS[oi].1);
                let mut r = req(&o, &format!("n{name}"));
                let sid = sid.map(|i| pick(i, &ids));
                if let Some(sid) = &sid {
                    r = r.with_session_id(sid.clone());
                }
                if let Some(t) = tag {
                    r = r.with_state(tagged_state(t));
                }
                let got = s.upsert_session(r).await;
                let existing = sid.as_ref().and_then(|sid| model.get(&(o.user_id.clone(), sid.clone())));
                match existing {
                    Some(m) if m.agent != o.agent_id => {
                        if kind_of(&got) != Some(StorageErrorKind::AlreadyExists) {
                            return Err(at(format!("expected AlreadyExists, got {:?}", got.map(|r| r.id))));
                        }
                    }
                    Some(_) => {
                        let rec = got.map_err(|e| at(e.to_string()))?;
                        let key = (o.user_id.clone(), rec.id.clone());
                        let m = model.get_mut(&key).ok_or_else(|| at("model lost a session".into()))?;
                        m.name = format!("n{name}");
                        if tag.is_some() {
                            m.tag = tag;
                        }
                        if rec.created_at != m.created_at {
                            return Err(at("created_at changed on update".into()));
                        }
                        m.rev = rec.revision();
                        check_record(&rec, &key.1, m).map_err(at)?;
                    }
                    None => {
                        let rec = got.map_err(|e| at(e.to_string()))?;
                        if let Some(sid) = &sid
                            && rec.id != *sid
                        {
                            return Err(at(format!("created under {} instead of {sid}", rec.id)));
                        }
                        if rec.updated_at != rec.created_at {
                            return Err(at(format!(
                                "a create returned updated_at {} != created_at {}",
                                rec.updated_at, rec.created_at
                            )));
                        }
                        if sid.is_none() {
                            ids.push(rec.id.clone());
                        }
                        let m = ModelSession {
                            agent: o.agent_id.clone(),
                            name: format!("n{name}"),
                            tag,
                            created_at: rec.created_at,
                            rev: rec.revision(),
                            msgs: Vec::new(),
                        };
                        check_record(&rec, &rec.id, &m).map_err(at)?;
                        model.insert((o.user_id.clone(), rec.id.clone()), m);
                    }
                }
            }
            Op::Update { owner: oi, sid, tag, cas, ref turn } => {
                let sid = pick(sid, &ids);
                let k = SessionKey::new(OWNERS[oi].0, OWNERS[oi].1, sid.clone());
                let entry = model.get_mut(&(k.user_id.clone(), sid)).filter(|m| m.agent == k.agent_id);
                let stale = Revision("2001-01-01T00:00:00".into());
                let expected = match (cas, &entry) {
                    (Cas::Plain, _) => None,
                    (Cas::Current, Some(m)) => Some(m.rev.clone()),
                    (Cas::Current, None) | (Cas::Stale, _) => Some(stale),
                };
                let turn: Option<Vec<(String, String)>> = turn
                    .as_ref()
                    .map(|t| t.iter().map(|(mid, text)| (format!("msg{mid}"), format!("text{text}"))).collect());
                let got = match &turn {
                    None => s.update_session_state(&k, &tagged_state(tag), expected.as_ref()).await,
                    Some(t) => {
                        let msgs: Vec<Msg> = t.iter().map(|(id, text)| msg(id, text)).collect();
                        match s.save_turn(&k, &tagged_state(tag), expected.as_ref(), &msgs).await {
                            Ok(saved) if saved.log_error.is_some() => {
                                return Err(at(format!("save_turn's log failed: {:?}", saved.log_error)));
                            }
                            r => r.map(|saved| saved.revision),
                        }
                    }
                };
                match (entry, cas) {
                    (None, _) => {
                        if kind_of(&got) != Some(StorageErrorKind::NotFound) {
                            return Err(at(format!("expected NotFound, got {got:?}")));
                        }
                    }
                    (Some(_), Cas::Stale) => {
                        if kind_of(&got) != Some(StorageErrorKind::Conflict) {
                            return Err(at(format!("expected Conflict, got {got:?}")));
                        }
                    }
                    (Some(m), _) => {
                        let rev = got.map_err(|e| at(e.to_string()))?;
                        if rev.0.parse::<Timestamp>().ok() <= m.rev.0.parse::<Timestamp>().ok() {
                            return Err(at(format!("revision {rev} not after {}", m.rev)));
                        }
                        m.rev = rev;
                        m.tag = Some(tag);
                        for (id, text) in turn.into_iter().flatten() {
                            match m.msgs.last_mut() {
                                Some(last) if last.0 == id => last.1 = text,
                                _ => m.msgs.push((id, text)),
                            }
                        }
                    }
                }
            }
            Op::Get { owner: oi, sid } => {
                let sid = pick(sid, &ids);
                let k = SessionKey::new(OWNERS[oi].0, OWNERS[oi].1, sid.clone());
                let got = s.get_session(&k).await.map_err(|e| at(e.to_string()))?;
                match (got, model.get(&(k.user_id.clone(), sid.clone())).filter(|m| m.agent == k.agent_id)) {
                    (None, None) => {}
                    (Some(rec), Some(m)) => check_record(&rec, &sid, m).map_err(at)?,
                    (g, m) => {
                        return Err(at(format!(
                            "backend has {:?}, model has {:?}",
                            g.map(|r| r.id),
                            m.map(|m| &m.agent)
                        )));
                    }
                }
            }
            Op::Delete { owner: oi, sid } => {
                let sid = pick(sid, &ids);
                let k = SessionKey::new(OWNERS[oi].0, OWNERS[oi].1, sid.clone());
                let mk = (k.user_id.clone(), sid);
                let exists = model.get(&mk).is_some_and(|m| m.agent == k.agent_id);
                let got = s.delete_session(&k).await.map_err(|e| at(e.to_string()))?;
                if got != exists {
                    return Err(at(format!("delete returned {got}, model says {exists}")));
                }
                if exists {
                    model.remove(&mk);
                }
            }
            Op::PutMsg { owner: oi, sid, mid, text } => {
                let sid = pick(sid, &ids);
                let k = SessionKey::new(OWNERS[oi].0, OWNERS[oi].1, sid.clone());
                let (id, text) = (format!("msg{mid}"), format!("text{text}"));
                let got = s.upsert_message(&k, &msg(&id, &text)).await;
                match model.get_mut(&(k.user_id.clone(), sid)).filter(|m| m.agent == k.agent_id) {
                    None => {
                        if kind_of(&got) != Some(StorageErrorKind::NotFound) {
                            return Err(at(format!("expected NotFound, got {got:?}")));
                        }
                    }
                    Some(m) => {
                        got.map_err(|e| at(e.to_string()))?;
                        match m.msgs.last_mut() {
                            Some(last) if last.0 == id => last.1 = text,
                            _ => m.msgs.push((id, text)),
                        }
                    }
                }
            }
            Op::GetMsg { owner: oi, sid, mid } => {
                let sid = pick(sid, &ids);
                let k = SessionKey::new(OWNERS[oi].0, OWNERS[oi].1, sid.clone());
                let id = format!("msg{mid}");
                let got = s.get_message(&k, &id).await.map_err(|e| at(e.to_string()))?;
                let got = got.map(|m| (m.id.clone(), m.get_text_content("").unwrap_or_default()));
                let want = model
                    .get(&(k.user_id.clone(), sid))
                    .filter(|m| m.agent == k.agent_id)
                    .and_then(|m| m.msgs.iter().rev().find(|x| x.0 == id).cloned());
                if got != want {
                    return Err(at(format!("get_message gave {got:?}, model has {want:?}")));
                }
            }
            Op::ListMsgs { owner: oi, sid, offset, limit } => {
                let sid = pick(sid, &ids);
                let k = SessionKey::new(OWNERS[oi].0, OWNERS[oi].1, sid.clone());
                let got = s.list_messages(&k, offset, limit).await.map_err(|e| at(e.to_string()))?;
                let got: Vec<(String, String)> =
                    got.iter().map(|m| (m.id.clone(), m.get_text_content("").unwrap_or_default())).collect();
                let want = model
                    .get(&(k.user_id.clone(), sid))
                    .filter(|m| m.agent == k.agent_id)
                    .map(|m| m.msgs[message_range(m.msgs.len(), offset, limit)].to_vec())
                    .unwrap_or_default();
                if got != want {
                    return Err(at(format!("list_messages gave {got:?}, model has {want:?}")));
                }
            }
            Op::List { owner: oi, limit } => {
                let o = owner(OWNERS[oi].0, OWNERS[oi].1);
                let mut got = Vec::new();
                let mut page = PageRequest::first(limit);
                for _ in 0..100 {
                    let p = s.list_sessions(&o, &page).await.map_err(|e| at(e.to_string()))?;
                    for sum in &p.sessions {
                        let m = model.get(&(o.user_id.clone(), sum.id.clone()));
                        if let (Some(n), Some(m)) = (sum.message_count, m)
                            && n != u64::from(m.tag.map_or(0, |t| t % 3)) * 2
                        {
                            return Err(at(format!("{}: message_count {n}, model tag {:?}", sum.id, m.tag)));
                        }
                    }
                    got.extend(p.sessions.into_iter().map(|x| x.id));
                    match p.next_cursor {
                        Some(c) => page.cursor = Some(c),
                        None => break,
                    }
                }
                let mut want: Vec<(&Timestamp, &String)> = model
                    .iter()
                    .filter(|((u, _), m)| *u == o.user_id && m.agent == o.agent_id)
                    .map(|((_, id), m)| (&m.created_at, id))
                    .collect();
                want.sort_by(|a, b| b.cmp(a));
                let want: Vec<String> = want.into_iter().map(|(_, id)| id.clone()).collect();
                if got != want {
                    return Err(at(format!("listing {got:?}, model has {want:?}")));
                }
            }
        }
    }
    // At the end, every session the model has, whole: its record and its message log.
    for ((user, sid), m) in &model {
        let k = SessionKey::new(user.clone(), m.agent.clone(), sid.clone());
        let at = |e: String| format!("after the last step, session {k}: {e}");
        let rec = s.get_session(&k).await.map_err(|e| at(e.to_string()))?.ok_or_else(|| at("missing".into()))?;
        check_record(&rec, sid, m).map_err(at)?;
        let log = s.list_messages(&k, 0, 0).await.map_err(|e| at(e.to_string()))?;
        let got: Vec<(String, String)> =
            log.iter().map(|m| (m.id.clone(), m.get_text_content("").unwrap_or_default())).collect();
        if got != m.msgs {
            return Err(at(format!("message log {got:?}, model has {:?}", m.msgs)));
        }
    }
    Ok(())
}

/// Random operation sequences against the backend and a reference model agree (shrunk to a
/// minimal failing sequence on divergence). `AS_CONFORMANCE_CASES` sets the number of cases
/// (default 24). The cases are the same on every run (a fixed seed), so a result is reproducible;
/// `AS_CONFORMANCE_SEED` (any text) draws other ones, and `AS_CONFORMANCE_SEED=random` new ones each
/// run (printed, so a failure can be replayed).
pub async fn model_based_random_operations<F: StorageFactory>(factory: &F) -> Res {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let c = Ctx { name: "model_based_random_operations" };
    let cases: u32 = std::env::var("AS_CONFORMANCE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    let strategy = proptest::collection::vec(op_strategy(), 1..40);
    let seed = match std::env::var("AS_CONFORMANCE_SEED") {
        Ok(s) if s == "random" => {
            let s = as_message::generate_id();
            println!("model_based_random_operations: AS_CONFORMANCE_SEED={s}");
            s
        }
        Ok(s) => s,
        Err(_) => "agentscope-rs conformance".to_owned(),
    };
    // ChaCha takes a 32-byte seed: the text and a 0, repeated to fill it (a longer text is cut).
    let bytes: Vec<u8> = seed.bytes().chain(std::iter::once(0)).cycle().take(32).collect();
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config { cases, ..Config::default() }, rng);
    let run = |ops: Vec<Op>| async move {
        let (_g, s) = factory.build(&BuildOptions::default()).await.map_err(|e| format!("factory.build: {e}"))?;
        run_model_case(&s, &ops).await
    };
    for _ in 0..cases {
        let mut tree = strategy.new_tree(&mut runner).map_err(|e| c.fail(format!("cannot generate a case: {e}")))?;
        let Err(first) = run(tree.current()).await else { continue };
        let mut best = (tree.current(), first);
        // Shrink like proptest does: simplify while it still fails, complicate when it passes.
        let mut budget = 512;
        if tree.simplify() {
            while budget > 0 {
                budget -= 1;
                match run(tree.current()).await {
                    Err(e) => {
                        best = (tree.current(), e);
                        if !tree.simplify() {
                            break;
                        }
                    }
                    Ok(()) => {
                        if !tree.complicate() {
                            break;
                        }
                    }
                }
            }
        }
        let (ops, e) = best;
        let listing: Vec<String> = ops.iter().enumerate().map(|(i, op)| format!("  {i}: {op:?}")).collect();
        return Err(c.fail(format!("{e}\nminimal failing sequence:\n{}", listing.join("\n"))));
    }
    Ok(Outcome::Passed)
}

/// Test-only callback for `scenario_list_matches_macro`.
#[doc(hidden)]
#[macro_export]
macro_rules! __names_for_test {
    ([] $($name:ident)*) => { vec![$(stringify!($name)),*] };
}

/// `list_users` lists exactly the users with sessions, sorted, and forgets a user once their
/// sessions are deleted.
pub async fn list_users_is_complete_and_sorted<F: StorageFactory>(factory: &F) -> Res {
    let c = Ctx { name: "list_users_is_complete_and_sorted" };
    let (_g, s) = c.build(factory, &BuildOptions::default()).await?;
    match s.list_users().await {
        Err(e) if e.kind() == StorageErrorKind::Unsupported => {
            return skipped("list_users reports Unsupported (optional method)");
        }
        r => {
            let got = c.ok("list_users of an empty store", r)?;
            c.ensure(got.is_empty(), || format!("an empty store lists users {got:?}"))?;
        }
    }
    let mut b_sessions = Vec::new();
    for (u, a) in
        [("b-user", "agent-1"), ("a-user", "agent-1"), ("a-user", "agent-2"), ("user-10", "x"), ("b-user", "y")]
    {
        let rec = c.create(&s, req(&owner(u, a), "users")).await?;
        if u == "b-user" {
            b_sessions.push(owner(u, a).session(rec.id));
        }
    }
    let got = c.ok("list_users", s.list_users().await)?;
    c.ensure(got == ["a-user", "b-user", "user-10"], || format!("list_users gave {got:?}"))?;
    for k in &b_sessions {
        c.ok("delete_session", s.delete_session(k).await)?;
    }
    let got = c.ok("list_users", s.list_users().await)?;
    c.ensure(got == ["a-user", "user-10"], || format!("after deleting b-user's sessions, list_users gave {got:?}"))?;
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Capabilities, StorageBase};

    #[test]
    fn scenario_list_matches_macro() {
        let from_macro: Vec<&str> = crate::__storage_conformance_scenarios!(__names_for_test;);
        assert_eq!(from_macro, SCENARIOS);
    }

    /// A backend written before `import_record`/`list_agents`/`save_turn` existed: only the
    /// required methods (`.1`: the capabilities it declares; `.2`: faults counted on its writes).
    #[derive(Debug)]
    struct Legacy(crate::InMemoryStorage, Capabilities, Arc<CountingFaults>);

    /// Faults on a wrapper's writes: `Some(n)` fails the write after `n` more, before it writes.
    #[derive(Debug, Default)]
    struct CountingFaults(std::sync::Mutex<Option<usize>>);

    impl CountingFaults {
        fn hit(&self, op: &'static str) -> crate::Result<()> {
            let mut armed = self.0.lock().unwrap();
            match armed.as_mut() {
                Some(0) => Err(StorageError::new(StorageErrorKind::Backend, "test", op, "injected fault")),
                Some(n) => {
                    *n -= 1;
                    Ok(())
                }
                None => Ok(()),
            }
        }
    }

    #[async_trait::async_trait]
    impl Faults for CountingFaults {
        async fn arm(&self, n: usize) -> Result<(), StorageError> {
            *self.0.lock().unwrap() = Some(n);
            Ok(())
        }
        async fn disarm(&self) -> Result<(), StorageError> {
            *self.0.lock().unwrap() = None;
            Ok(())
        }
        fn is_injected(&self, error: &StorageError) -> bool {
            error.message() == "injected fault"
        }
    }

    #[async_trait::async_trait]
    impl StorageBase for Legacy {
        fn backend_name(&self) -> &'static str {
            "legacy"
        }
        fn capabilities(&self) -> Capabilities {
            self.1
        }
        async fn open(&self) -> crate::Result<()> {
            self.0.open().await
        }
        async fn close(&self) -> crate::Result<()> {
            self.0.close().await
        }
        async fn upsert_session(&self, req: UpsertSession) -> crate::Result<SessionRecord> {
            self.0.upsert_session(req).await
        }
        async fn update_session_state(
            &self,
            key: &SessionKey,
            state: &AgentState,
            expected: Option<&Revision>,
        ) -> crate::Result<Revision> {
            self.2.hit("update_session_state")?;
            self.0.update_session_state(key, state, expected).await
        }
        async fn get_session(&self, key: &SessionKey) -> crate::Result<Option<SessionRecord>> {
            self.0.get_session(key).await
        }
        async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> crate::Result<crate::SessionPage> {
            self.0.list_sessions(owner, page).await
        }
        async fn delete_session(&self, key: &SessionKey) -> crate::Result<bool> {
            self.0.delete_session(key).await
        }
        async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> crate::Result<()> {
            self.2.hit("upsert_message")?;
            self.0.upsert_message(key, msg).await
        }
        async fn get_message(&self, key: &SessionKey, message_id: &str) -> crate::Result<Option<Msg>> {
            self.0.get_message(key, message_id).await
        }
        async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> crate::Result<Vec<Msg>> {
            self.0.list_messages(key, offset, limit).await
        }
    }

    struct LegacyFactory;

    impl StorageFactory for LegacyFactory {
        type Guard = ();
        async fn build(&self, options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
            legacy(options, Capabilities::none()).await
        }
    }

    async fn legacy(options: &BuildOptions, caps: Capabilities) -> Result<((), SharedStorage), StorageError> {
        let (store, _) = faulty_legacy(options, caps).await?;
        Ok(((), store))
    }

    async fn faulty_legacy(
        options: &BuildOptions,
        caps: Capabilities,
    ) -> Result<(SharedStorage, Arc<CountingFaults>), StorageError> {
        let mut m = crate::InMemoryStorage::new();
        if let Some(max) = options.max_record_bytes {
            m = m.with_max_record_bytes(max);
        }
        m.open().await?;
        let faults = Arc::new(CountingFaults::default());
        Ok((Arc::new(Legacy(m, caps, faults.clone())), faults))
    }

    /// Declares `atomic_turns` but keeps the default, two-step `save_turn`. With `true`, its
    /// fault hook works; with `false`, it is wired to nothing.
    struct OverclaimingFactory(bool);

    impl StorageFactory for OverclaimingFactory {
        type Guard = ();
        async fn build(&self, options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
            legacy(options, Capabilities::none().with_atomic_turns(true)).await
        }
        async fn build_faulty(&self, options: &BuildOptions) -> Result<Option<Faulty<()>>, StorageError> {
            let (store, faults) = faulty_legacy(options, Capabilities::none().with_atomic_turns(true)).await?;
            let faults: Arc<dyn Faults> = if self.0 { faults } else { Arc::new(CountingFaults::default()) };
            Ok(Some(Faulty::new((), store, faults)))
        }
    }

    /// `InMemoryStorage` (whose `save_turn` is atomic) behind a fault hook that fails a turn
    /// before it writes when the armed write is one of the turn's (the state, then each message).
    #[derive(Debug)]
    struct AtomicFaulty(crate::InMemoryStorage, Arc<CountingFaults>);

    #[async_trait::async_trait]
    impl StorageBase for AtomicFaulty {
        fn backend_name(&self) -> &'static str {
            "atomic-faulty"
        }
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities()
        }
        async fn open(&self) -> crate::Result<()> {
            self.0.open().await
        }
        async fn close(&self) -> crate::Result<()> {
            self.0.close().await
        }
        async fn upsert_session(&self, req: UpsertSession) -> crate::Result<SessionRecord> {
            self.0.upsert_session(req).await
        }
        async fn update_session_state(
            &self,
            key: &SessionKey,
            state: &AgentState,
            expected: Option<&Revision>,
        ) -> crate::Result<Revision> {
            self.0.update_session_state(key, state, expected).await
        }
        async fn save_turn(
            &self,
            key: &SessionKey,
            state: &AgentState,
            expected: Option<&Revision>,
            messages: &[Msg],
        ) -> crate::Result<crate::SavedTurn> {
            for _ in 0..=messages.len() {
                self.1.hit("save_turn")?;
            }
            self.0.save_turn(key, state, expected, messages).await
        }
        async fn get_session(&self, key: &SessionKey) -> crate::Result<Option<SessionRecord>> {
            self.0.get_session(key).await
        }
        async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> crate::Result<crate::SessionPage> {
            self.0.list_sessions(owner, page).await
        }
        async fn delete_session(&self, key: &SessionKey) -> crate::Result<bool> {
            self.0.delete_session(key).await
        }
        async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> crate::Result<()> {
            self.0.upsert_message(key, msg).await
        }
        async fn get_message(&self, key: &SessionKey, message_id: &str) -> crate::Result<Option<Msg>> {
            self.0.get_message(key, message_id).await
        }
        async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> crate::Result<Vec<Msg>> {
            self.0.list_messages(key, offset, limit).await
        }
    }

    struct AtomicFaultyFactory;

    impl StorageFactory for AtomicFaultyFactory {
        type Guard = ();
        async fn build(&self, _options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
            Err(StorageError::new(StorageErrorKind::Unsupported, "atomic-faulty", "build", "only build_faulty"))
        }
        async fn build_faulty(&self, _options: &BuildOptions) -> Result<Option<Faulty<()>>, StorageError> {
            let m = crate::InMemoryStorage::new();
            m.open().await?;
            let faults = Arc::new(CountingFaults::default());
            Ok(Some(Faulty::new((), Arc::new(AtomicFaulty(m, faults.clone())), faults)))
        }
    }

    #[tokio::test]
    async fn a_failure_at_any_write_of_a_turn_is_checked() {
        // Without a fault hook (the default), or without `atomic_turns`, the scenario skips.
        let r = save_turn_failure_at_any_write_leaves_nothing(&LegacyFactory).await;
        assert!(matches!(&r, Ok(Outcome::Skipped(why)) if why.contains("build_faulty")), "{r:?}");
        // An atomic turn passes.
        assert_eq!(save_turn_failure_at_any_write_leaves_nothing(&AtomicFaultyFactory).await.unwrap(), Outcome::Passed);
        // The two-step default declared atomic is caught: a failed message write after the saved
        // state is reported beside it, so the turn "succeeds" half written.
        let e = save_turn_failure_at_any_write_leaves_nothing(&OverclaimingFactory(true)).await.unwrap_err();
        assert!(e.details().contains("(write 1 armed) reported a log error"), "{e}");
        // A hook that injects nothing does not pass for one that found nothing.
        let e = save_turn_failure_at_any_write_leaves_nothing(&OverclaimingFactory(false)).await.unwrap_err();
        assert!(e.details().contains("the fault hook injects nothing"), "{e}");
    }

    #[tokio::test]
    async fn the_default_save_turn_is_update_then_messages_and_conditional() {
        assert_eq!(save_turn_is_update_then_messages(&LegacyFactory).await.unwrap(), Outcome::Passed);
        assert_eq!(save_turn_is_conditional(&LegacyFactory).await.unwrap(), Outcome::Passed);
        assert!(matches!(save_turn_is_all_or_nothing(&LegacyFactory).await, Ok(Outcome::Skipped(_))));
        // Declaring atomicity it does not have is caught: the state is written before the message
        // that is too large fails.
        let e = save_turn_is_all_or_nothing(&OverclaimingFactory(true)).await.unwrap_err();
        assert!(e.details().contains("too large message"), "{e}");
        // And the default reports that failure beside the revision, with the state saved.
        let (_, s) = LegacyFactory.build(&BuildOptions::default().with_max_record_bytes(4096)).await.unwrap();
        let o = owner("u", "a");
        let rec = s.upsert_session(req(&o, "x")).await.unwrap();
        let k = o.session(rec.id.clone());
        let turn = [msg("m1", "fits"), msg("m2", &"q".repeat(5000)), msg("m3", "never")];
        let saved = s.save_turn(&k, &conversation_state(1, "d"), Some(&rec.revision()), &turn).await.unwrap();
        assert_eq!(saved.log_error.map(|e| e.kind()), Some(StorageErrorKind::TooLarge));
        assert_eq!(s.get_session(&k).await.unwrap().unwrap().revision(), saved.revision);
        assert_eq!(texts(&s.list_messages(&k, 0, 0).await.unwrap()), ["fits"]);
    }

    #[tokio::test]
    async fn optional_methods_default_to_unsupported_and_their_scenarios_skip() {
        let (_, s) = LegacyFactory.build(&BuildOptions::default()).await.unwrap();
        let rec = foreign_record(&owner("u", "a"), "s", "t").unwrap();
        let e = s.import_record(&rec, &[], ImportMode::CreateOnly).await.unwrap_err();
        assert_eq!((e.kind(), e.backend(), e.operation()), (StorageErrorKind::Unsupported, "legacy", "import_record"));
        let e = s.list_agents("u").await.unwrap_err();
        assert_eq!((e.kind(), e.operation()), (StorageErrorKind::Unsupported, "list_agents"));
        for r in [
            import_record_is_verbatim(&LegacyFactory).await,
            import_record_modes(&LegacyFactory).await,
            import_record_validates(&LegacyFactory).await,
            list_agents_is_scoped_and_sorted(&LegacyFactory).await,
        ] {
            assert!(matches!(r, Ok(Outcome::Skipped(_))), "{r:?}");
        }
        // The other scenarios still run against it.
        assert_eq!(create_and_get_roundtrip(&LegacyFactory).await.unwrap(), Outcome::Passed);
    }

    /// The generated tests fail on a skip that is not listed, and on a listed skip that ran.
    #[test]
    fn run_test_holds_skips_to_the_expected_list() {
        let run = |name: &'static str, expected: &[&str]| {
            __private::run_test(name, &LegacyFactory, expected, |f| match name {
                "ttl_expires_idle_sessions" => Box::pin(ttl_expires_idle_sessions(f)),
                _ => Box::pin(create_and_get_roundtrip(f)),
            })
        };
        let e = run("ttl_expires_idle_sessions", &[]).unwrap_err();
        assert!(e.details().contains("capability `ttl` not declared") && e.details().contains("not listed"), "{e}");
        run("ttl_expires_idle_sessions", &["durable_survives_reopen", "ttl_expires_idle_sessions"]).unwrap();
        run("create_and_get_roundtrip", &[]).unwrap();
        let e = run("create_and_get_roundtrip", &["create_and_get_roundtrip"]).unwrap_err();
        assert!(e.details().contains("ran and passed"), "{e}");
        let e = run("create_and_get_roundtrip", &["ttl_expires_idle_session"]).unwrap_err();
        assert!(e.details().contains("`ttl_expires_idle_session` in `skipped = [...]` is not"), "{e}");
    }

    #[test]
    fn capabilities_are_read() {
        assert_eq!(Capabilities::none().with_atomic_turns(true), crate::InMemoryStorage::new().capabilities());
    }
}
