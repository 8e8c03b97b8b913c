//! The conformance suite against `InMemoryStorage`, and proof that the suite catches broken
//! backends: wrappers that each break one clause must fail the scenarios of that clause.

// Test helpers outside #[test] fns are test code too (clippy.toml only covers `#[test]` items).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use as_message::Msg;
use as_state::AgentState;
use as_storage::conformance::{self, BuildOptions, Outcome, StorageFactory};
use as_storage::{
    Capabilities, ImportMode, ImportOutcome, InMemoryStorage, Owner, PageRequest, Result, Revision, SessionKey,
    SessionPage, SessionRecord, SharedStorage, StorageBase, StorageError, UpsertSession,
};
use async_trait::async_trait;

/// A fresh opened `InMemoryStorage` per scenario.
struct MemoryFactory;

impl StorageFactory for MemoryFactory {
    type Guard = ();

    async fn build(&self, options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
        let mut store = InMemoryStorage::new();
        if let Some(max) = options.max_record_bytes {
            store = store.with_max_record_bytes(max);
        }
        store.open().await?;
        Ok(((), Arc::new(store)))
    }
}

// The memory store declares no optional capability and the factory has no `reopen` or
// `build_faulty`: exactly these scenarios skip (the same list as `run_all_passes_and_reports_skips`).
as_storage::storage_conformance_tests!(
    MemoryFactory,
    skipped = [
        save_turn_failure_at_any_write_leaves_nothing,
        durable_survives_reopen,
        cross_process_instances_agree,
        ttl_expires_idle_sessions,
        ttl_restarts_on_writes,
    ]
);

#[tokio::test]
async fn run_all_passes_and_reports_skips() {
    let report = conformance::run_all(&MemoryFactory).await;
    assert!(report.is_success(), "{report}");
    assert_eq!(report.results.len(), conformance::SCENARIOS.len());
    // The memory store declares no optional capability: exactly the gated scenarios skip, and say why.
    let skipped: Vec<&str> = report.skipped().map(|(n, _)| n).collect();
    assert_eq!(
        skipped,
        [
            "save_turn_failure_at_any_write_leaves_nothing",
            "durable_survives_reopen",
            "cross_process_instances_agree",
            "ttl_expires_idle_sessions",
            "ttl_restarts_on_writes"
        ]
    );
    assert!(report.to_string().contains("skipped  ttl_expires_idle_sessions: capability `ttl` not declared"));
}

/// How a broken wrapper misbehaves.
#[derive(Clone, Copy, Debug)]
enum Defect {
    /// Drops `expected`: every conditional update silently becomes last-writer-wins.
    IgnoresExpected,
    /// Ignores `agent_id`: every agent of a user shares one namespace (2.0.4's behaviour).
    IgnoresAgentId,
    /// Never bumps the revision on `update_session_state` reads: returns a made-up revision.
    StaleRevision,
    /// `import_record` through `upsert_session` + `upsert_message`: the store sets the timestamps
    /// and `team_id` is lost (what `sessions import` did before `import_record` existed).
    LossyImport,
    /// `import_record` always overwrites, whatever the mode.
    ImportAlwaysOverwrites,
    /// `list_agents` in reverse order.
    AgentsUnsorted,
    /// 2.0.4's message write (R4): read the last message's id, then, later, overwrite the last
    /// message or append: an append that lands in between is overwritten.
    RacyMessageReplace,
    /// 2.0.4's `EXISTS` then `RPUSH`: a message write that checked before a delete lands after
    /// it, and the log outlives the session.
    MessageWriteRacesDelete,
    /// Ignores `agent_id` on create only: every agent creating one id "creates" it.
    CreateIgnoresOtherAgents,
    /// An unconditional update as `GET` then `SET` without a compare-and-set: it reads the record,
    /// and writes it back (verbatim, with `import_record`) one microsecond after the revision it
    /// read, whatever was written in between.
    PlainWriteWithoutCas,
}

#[derive(Debug)]
struct Broken {
    inner: InMemoryStorage,
    defect: Defect,
    /// The message logs, for the message defects (kept here so the wrapper can race on them).
    logs: std::sync::Mutex<std::collections::HashMap<String, Vec<Msg>>>,
}

/// Gives the other tasks a chance to run between a check and the write that depends on it.
async fn window() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

impl Broken {
    fn own_logs(&self) -> bool {
        matches!(self.defect, Defect::RacyMessageReplace | Defect::MessageWriteRacesDelete)
    }

    fn key(&self, k: &SessionKey) -> SessionKey {
        match self.defect {
            Defect::IgnoresAgentId => SessionKey::new(k.user_id.clone(), "shared", k.session_id.clone()),
            _ => k.clone(),
        }
    }

    fn owner(&self, o: &Owner) -> Owner {
        match self.defect {
            Defect::IgnoresAgentId => Owner::new(o.user_id.clone(), "shared"),
            _ => o.clone(),
        }
    }
}

#[async_trait]
impl StorageBase for Broken {
    fn backend_name(&self) -> &'static str {
        "broken"
    }
    fn capabilities(&self) -> Capabilities {
        // Its save_turn is the trait's two steps through the (possibly broken) methods below.
        self.inner.capabilities().with_atomic_turns(false)
    }
    async fn open(&self) -> Result<()> {
        self.inner.open().await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
    async fn upsert_session(&self, mut req: UpsertSession) -> Result<SessionRecord> {
        req.owner = self.owner(&req.owner);
        if let (Defect::CreateIgnoresOtherAgents, Some(id)) = (self.defect, req.session_id.clone()) {
            // Each agent gets its own store namespace for the id: nobody ever collides.
            req.session_id = Some(format!("{}~{id}", req.owner.agent_id));
            let mut rec = self.inner.upsert_session(req).await?;
            rec.id = id;
            return Ok(rec);
        }
        self.inner.upsert_session(req).await
    }
    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision> {
        if let (Defect::PlainWriteWithoutCas, None) = (self.defect, expected) {
            let Some(rec) = self.inner.get_session(key).await? else {
                return Err(StorageError::new(
                    as_storage::StorageErrorKind::NotFound,
                    "broken",
                    "update_session_state",
                    "no session",
                ));
            };
            let log = self.inner.list_messages(key, 0, 0).await?;
            window().await;
            let mut next = SessionRecord::from_parts(rec.meta(), state.clone());
            next.updated_at = as_storage::Timestamp::now_after(&rec.updated_at);
            self.inner.import_record(&next, &log, ImportMode::Overwrite).await?;
            return Ok(next.revision());
        }
        let expected = match self.defect {
            Defect::IgnoresExpected => None,
            _ => expected,
        };
        let rev = self.inner.update_session_state(&self.key(key), state, expected).await?;
        match self.defect {
            Defect::StaleRevision => Ok(Revision("2000-01-01T00:00:00".into())),
            _ => Ok(rev),
        }
    }
    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>> {
        if let Defect::CreateIgnoresOtherAgents = self.defect {
            let k = SessionKey::new(
                key.user_id.clone(),
                key.agent_id.clone(),
                format!("{}~{}", key.agent_id, key.session_id),
            );
            if let Some(mut rec) = self.inner.get_session(&k).await? {
                rec.id.clone_from(&key.session_id);
                rec.state.session_id.clone_from(&key.session_id);
                return Ok(Some(rec));
            }
        }
        self.inner.get_session(&self.key(key)).await
    }
    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage> {
        self.inner.list_sessions(&self.owner(owner), page).await
    }
    async fn delete_session(&self, key: &SessionKey) -> Result<bool> {
        let existed = self.inner.delete_session(&self.key(key)).await?;
        if existed && self.own_logs() {
            self.logs.lock().unwrap().remove(&key.to_string());
        }
        Ok(existed)
    }
    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()> {
        if !self.own_logs() {
            return self.inner.upsert_message(&self.key(key), msg).await;
        }
        if self.inner.get_session(key).await?.is_none() {
            return Err(StorageError::new(
                as_storage::StorageErrorKind::NotFound,
                "broken",
                "upsert_message",
                "no session",
            ));
        }
        let name = key.to_string();
        let replace = match self.defect {
            Defect::RacyMessageReplace => {
                let last_is_mine =
                    self.logs.lock().unwrap().get(&name).and_then(|l| l.last()).is_some_and(|m| m.id == msg.id);
                window().await;
                Some(last_is_mine)
            }
            _ => {
                window().await;
                None
            }
        };
        let mut logs = self.logs.lock().unwrap();
        let log = logs.entry(name).or_default();
        let replace = replace.unwrap_or_else(|| log.last().is_some_and(|m| m.id == msg.id));
        match log.last_mut() {
            Some(last) if replace => *last = msg.clone(),
            _ => log.push(msg.clone()),
        }
        Ok(())
    }
    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>> {
        if !self.own_logs() {
            return self.inner.get_message(&self.key(key), message_id).await;
        }
        let logs = self.logs.lock().unwrap();
        Ok(logs.get(&key.to_string()).and_then(|l| l.iter().rev().find(|m| m.id == message_id).cloned()))
    }
    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>> {
        if !self.own_logs() {
            return self.inner.list_messages(&self.key(key), offset, limit).await;
        }
        let logs = self.logs.lock().unwrap();
        let log = logs.get(&key.to_string()).cloned().unwrap_or_default();
        Ok(log[as_storage::message_range(log.len(), offset, limit)].to_vec())
    }
    async fn import_record(&self, record: &SessionRecord, messages: &[Msg], mode: ImportMode) -> Result<ImportOutcome> {
        match self.defect {
            Defect::LossyImport => {
                let owner = Owner::new(record.user_id.clone(), record.agent_id.clone());
                let req = UpsertSession::new(owner.clone(), record.config.clone())
                    .with_session_id(record.id.clone())
                    .with_state(record.state.clone());
                self.inner.upsert_session(req).await?;
                for m in messages {
                    self.inner.upsert_message(&owner.session(record.id.clone()), m).await?;
                }
                Ok(ImportOutcome::Created)
            }
            Defect::ImportAlwaysOverwrites => self.inner.import_record(record, messages, ImportMode::Overwrite).await,
            _ => self.inner.import_record(record, messages, mode).await,
        }
    }
    async fn list_agents(&self, user_id: &str) -> Result<Vec<String>> {
        let mut agents = self.inner.list_agents(user_id).await?;
        if let Defect::AgentsUnsorted = self.defect {
            agents.reverse();
        }
        Ok(agents)
    }
}

struct BrokenFactory(Defect);

impl StorageFactory for BrokenFactory {
    type Guard = ();

    async fn build(&self, _options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
        let store = Broken { inner: InMemoryStorage::new(), defect: self.0, logs: Default::default() };
        store.open().await?;
        Ok(((), Arc::new(store)))
    }
}

fn assert_fails(name: &str, r: std::result::Result<Outcome, conformance::ConformanceError>) {
    assert!(r.is_err(), "scenario {name} did not catch the defect: {r:?}");
    if let Err(e) = r {
        assert_eq!(e.scenario(), name);
        println!("as expected: {e}");
    }
}

#[tokio::test]
async fn ignoring_expected_is_caught() {
    let f = BrokenFactory(Defect::IgnoresExpected);
    assert_fails("cas_rejects_stale_revision", conformance::cas_rejects_stale_revision(&f).await);
    assert_fails("concurrent_cas_writers_lose_no_update", conformance::concurrent_cas_writers_lose_no_update(&f).await);
    assert_fails("model_based_random_operations", conformance::model_based_random_operations(&f).await);
    // Clauses it does not break still pass: the scenarios are specific.
    assert_eq!(conformance::ownership_is_exact(&f).await.unwrap(), Outcome::Passed);
}

#[tokio::test]
async fn ignoring_agent_id_is_caught() {
    let f = BrokenFactory(Defect::IgnoresAgentId);
    assert_fails("ownership_is_exact", conformance::ownership_is_exact(&f).await);
    assert_fails("list_is_scoped_to_owner", conformance::list_is_scoped_to_owner(&f).await);
    assert_fails(
        "id_taken_by_other_agent_already_exists",
        conformance::id_taken_by_other_agent_already_exists(&f).await,
    );
    assert_fails("model_based_random_operations", conformance::model_based_random_operations(&f).await);
    assert_eq!(conformance::cas_rejects_stale_revision(&f).await.unwrap(), Outcome::Passed);
}

#[tokio::test]
async fn a_wrong_returned_revision_is_caught() {
    let f = BrokenFactory(Defect::StaleRevision);
    assert_fails("update_replaces_state_only", conformance::update_replaces_state_only(&f).await);
    assert_fails("revisions_strictly_increase", conformance::revisions_strictly_increase(&f).await);
    let e = conformance::model_based_random_operations(&f).await.unwrap_err();
    // The shrinker reports a short sequence, not the whole random one.
    assert!(e.details().contains("minimal failing sequence"), "{e}");
    let steps = e.details().lines().filter(|l| l.starts_with("  ")).count();
    assert!(steps <= 4, "not shrunk: {e}");
}

#[tokio::test]
async fn a_lossy_or_careless_import_is_caught() {
    let f = BrokenFactory(Defect::LossyImport);
    assert_fails("import_record_is_verbatim", conformance::import_record_is_verbatim(&f).await);
    let f = BrokenFactory(Defect::ImportAlwaysOverwrites);
    assert_fails("import_record_modes", conformance::import_record_modes(&f).await);
    assert_eq!(conformance::import_record_is_verbatim(&f).await.unwrap(), Outcome::Passed);
}

#[tokio::test]
async fn an_unsorted_agent_listing_is_caught() {
    let f = BrokenFactory(Defect::AgentsUnsorted);
    assert_fails("list_agents_is_scoped_and_sorted", conformance::list_agents_is_scoped_and_sorted(&f).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racy_message_writes_are_caught() {
    let f = BrokenFactory(Defect::RacyMessageReplace);
    assert_fails(
        "concurrent_message_writers_overwrite_nothing",
        conformance::concurrent_message_writers_overwrite_nothing(&f).await,
    );
    // Sequential message writes are right, so the sequential scenario passes.
    assert_eq!(conformance::messages_upsert_replaces_last_or_appends(&f).await.unwrap(), Outcome::Passed);
    let f = BrokenFactory(Defect::MessageWriteRacesDelete);
    assert_fails("message_racing_delete_leaves_no_log", conformance::message_racing_delete_leaves_no_log(&f).await);
    assert_eq!(conformance::delete_cascades(&f).await.unwrap(), Outcome::Passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_creates_are_caught() {
    let f = BrokenFactory(Defect::CreateIgnoresOtherAgents);
    assert_fails(
        "concurrent_creates_of_one_id_have_one_winner",
        conformance::concurrent_creates_of_one_id_have_one_winner(&f).await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_writes_without_compare_and_set_are_caught() {
    let f = BrokenFactory(Defect::PlainWriteWithoutCas);
    // Racing from a revision ahead of the clock, every writer writes "one microsecond after it".
    assert_fails(
        "concurrent_plain_writes_get_distinct_revisions",
        conformance::concurrent_plain_writes_get_distinct_revisions(&f).await,
    );
    // Sequential writes are right, so the sequential scenario passes.
    assert_eq!(conformance::revisions_strictly_increase(&f).await.unwrap(), Outcome::Passed);
}

/// How [`Expiring`] gets a sliding TTL wrong.
#[derive(Clone, Copy, Debug)]
enum TtlDefect {
    /// The TTL runs from the creation: writes do not restart it.
    WritesDoNotRestart,
    /// A state write restarts the record's TTL but not its message log's (2.0.4's
    /// `update_session_state` refreshes only the record key).
    StateWritesLeaveTheLog,
}

/// `InMemoryStorage` with a sliding TTL: a session not written for `ttl` is deleted (its log with
/// it), and a log not written for `ttl` is emptied; checked lazily, at the start of every call.
#[derive(Debug)]
struct Expiring {
    inner: InMemoryStorage,
    ttl: Option<std::time::Duration>,
    defect: Option<TtlDefect>,
    /// Per session: when its record expires, and its message log (`None`: nothing to expire).
    deadlines:
        std::sync::Mutex<std::collections::HashMap<SessionKey, (std::time::Instant, Option<std::time::Instant>)>>,
}

impl Expiring {
    async fn expire(&self) -> Result<()> {
        let now = std::time::Instant::now();
        let due: Vec<(SessionKey, bool)> = {
            let mut d = self.deadlines.lock().unwrap();
            let due = d
                .iter_mut()
                .filter(|(_, (r, l))| *r <= now || l.is_some_and(|l| l <= now))
                .map(|(k, (r, l))| {
                    *l = None;
                    (k.clone(), *r <= now)
                })
                .collect();
            d.retain(|_, (r, _)| *r > now);
            due
        };
        for (k, record) in due {
            if record {
                self.inner.delete_session(&k).await?;
            } else if let Some(rec) = self.inner.get_session(&k).await? {
                // The log alone expired: the record written back verbatim, without it.
                self.inner.import_record(&rec, &[], ImportMode::Overwrite).await?;
            }
        }
        Ok(())
    }

    /// A write of `k`: restarts the record's TTL and, when `log`, the log's.
    fn touch(&self, k: &SessionKey, log: bool, created: bool) {
        let Some(ttl) = self.ttl else { return };
        let at = std::time::Instant::now() + ttl;
        let mut d = self.deadlines.lock().unwrap();
        if created {
            d.insert(k.clone(), (at, None));
            return;
        }
        let Some((r, l)) = d.get_mut(k) else { return };
        match self.defect {
            Some(TtlDefect::WritesDoNotRestart) => {}
            Some(TtlDefect::StateWritesLeaveTheLog) if !log => *r = at,
            _ => (*r, *l) = (at, Some(at)),
        }
    }
}

#[async_trait]
impl StorageBase for Expiring {
    fn backend_name(&self) -> &'static str {
        "expiring"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().with_ttl(true)
    }
    async fn open(&self) -> Result<()> {
        self.inner.open().await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
    async fn upsert_session(&self, req: UpsertSession) -> Result<SessionRecord> {
        self.expire().await?;
        let owner = req.owner.clone();
        let rec = self.inner.upsert_session(req).await?;
        self.touch(&owner.session(rec.id.clone()), false, rec.updated_at == rec.created_at);
        Ok(rec)
    }
    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision> {
        self.expire().await?;
        let rev = self.inner.update_session_state(key, state, expected).await?;
        self.touch(key, false, false);
        Ok(rev)
    }
    async fn get_session(&self, key: &SessionKey) -> Result<Option<SessionRecord>> {
        self.expire().await?;
        self.inner.get_session(key).await
    }
    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage> {
        self.expire().await?;
        self.inner.list_sessions(owner, page).await
    }
    async fn delete_session(&self, key: &SessionKey) -> Result<bool> {
        self.expire().await?;
        self.deadlines.lock().unwrap().remove(key);
        self.inner.delete_session(key).await
    }
    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()> {
        self.expire().await?;
        self.inner.upsert_message(key, msg).await?;
        self.touch(key, true, false);
        Ok(())
    }
    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>> {
        self.expire().await?;
        self.inner.get_message(key, message_id).await
    }
    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>> {
        self.expire().await?;
        self.inner.list_messages(key, offset, limit).await
    }
}

struct ExpiringFactory(Option<TtlDefect>);

impl StorageFactory for ExpiringFactory {
    type Guard = ();

    async fn build(&self, options: &BuildOptions) -> Result<((), SharedStorage), StorageError> {
        let store =
            Expiring { inner: InMemoryStorage::new(), ttl: options.ttl, defect: self.0, deadlines: Default::default() };
        store.open().await?;
        Ok(((), Arc::new(store)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_that_writes_do_not_restart_is_caught() {
    // The three stores side by side: the scenarios wait for the clock, not for the CPU.
    let (right, from_creation, log_left) = tokio::join!(
        conformance::ttl_restarts_on_writes(&ExpiringFactory(None)),
        conformance::ttl_restarts_on_writes(&ExpiringFactory(Some(TtlDefect::WritesDoNotRestart))),
        conformance::ttl_restarts_on_writes(&ExpiringFactory(Some(TtlDefect::StateWritesLeaveTheLog))),
    );
    assert_eq!(right.unwrap(), Outcome::Passed);
    assert_fails("ttl_restarts_on_writes", from_creation);
    assert_fails("ttl_restarts_on_writes", log_left);
    // Expiry itself is right in both: the scenario for idle sessions passes them.
    let (a, b) = tokio::join!(
        conformance::ttl_expires_idle_sessions(&ExpiringFactory(Some(TtlDefect::WritesDoNotRestart))),
        conformance::ttl_expires_idle_sessions(&ExpiringFactory(Some(TtlDefect::StateWritesLeaveTheLog))),
    );
    assert_eq!((a.unwrap(), b.unwrap()), (Outcome::Passed, Outcome::Passed));
}
