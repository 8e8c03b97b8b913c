//! The conformance suite against `InMemoryStorage`, and proof that the suite catches broken
//! backends: wrappers that each break one clause must fail the scenarios of that clause.

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

as_storage::storage_conformance_tests!(MemoryFactory);

#[tokio::test]
async fn run_all_passes_and_reports_skips() {
    let report = conformance::run_all(&MemoryFactory).await;
    assert!(report.is_success(), "{report}");
    assert_eq!(report.results.len(), conformance::SCENARIOS.len());
    // The memory store declares no optional capability: exactly the gated scenarios skip, and say why.
    let skipped: Vec<&str> = report.skipped().map(|(n, _)| n).collect();
    assert_eq!(skipped, ["durable_survives_reopen", "cross_process_instances_agree", "ttl_expires_idle_sessions"]);
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
}

#[derive(Debug)]
struct Broken {
    inner: InMemoryStorage,
    defect: Defect,
}

impl Broken {
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
        self.inner.capabilities()
    }
    async fn open(&self) -> Result<()> {
        self.inner.open().await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
    async fn upsert_session(&self, mut req: UpsertSession) -> Result<SessionRecord> {
        req.owner = self.owner(&req.owner);
        self.inner.upsert_session(req).await
    }
    async fn update_session_state(
        &self,
        key: &SessionKey,
        state: &AgentState,
        expected: Option<&Revision>,
    ) -> Result<Revision> {
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
        self.inner.get_session(&self.key(key)).await
    }
    async fn list_sessions(&self, owner: &Owner, page: &PageRequest) -> Result<SessionPage> {
        self.inner.list_sessions(&self.owner(owner), page).await
    }
    async fn delete_session(&self, key: &SessionKey) -> Result<bool> {
        self.inner.delete_session(&self.key(key)).await
    }
    async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> Result<()> {
        self.inner.upsert_message(&self.key(key), msg).await
    }
    async fn get_message(&self, key: &SessionKey, message_id: &str) -> Result<Option<Msg>> {
        self.inner.get_message(&self.key(key), message_id).await
    }
    async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> Result<Vec<Msg>> {
        self.inner.list_messages(&self.key(key), offset, limit).await
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
        let store = Broken { inner: InMemoryStorage::new(), defect: self.0 };
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
