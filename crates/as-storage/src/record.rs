//! Session records and configuration (`agentscope.app.storage._model`), wire-exact.

use std::cell::Cell;

use as_message::{JsonMap, generate_id};
use as_state::AgentState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::timestamp::Timestamp;

/// Where a session came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionSource {
    /// Started by a user.
    #[default]
    User,
    /// Started by a schedule.
    Schedule,
}

impl SessionSource {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Schedule => "schedule",
        }
    }
}

/// A chat model choice stored with a session (no secrets: a credential id only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "ChatModelConfig")]
pub struct ChatModelConfig {
    /// Credential type (`"openai_credential"`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Id of the stored credential.
    pub credential_id: String,
    /// Model name.
    pub model: String,
    /// Free-form generation parameters (required on the wire).
    #[serde(deserialize_with = "as_message::free_form::deserialize")]
    pub parameters: JsonMap,
}

as_message::map_only!(ChatModelConfig, "a ChatModelConfig object", Serialize);

/// A TTS model choice (same shape as [`ChatModelConfig`]).
pub type TTSModelConfig = ChatModelConfig;

/// Knowledge bases attached to a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "SessionKnowledgeConfig")]
pub struct SessionKnowledgeConfig {
    /// Knowledge base ids.
    #[serde(default)]
    pub knowledge_base_ids: Vec<String>,
    /// Free-form retrieval parameters.
    #[serde(default, deserialize_with = "as_message::free_form::deserialize")]
    pub parameters: JsonMap,
}

as_message::map_only!(SessionKnowledgeConfig, "a SessionKnowledgeConfig object", Serialize);

/// The session's configuration. `workspace_id` is required by Python 2.0.4, so
/// [`SessionConfig::default`] fills it with a fresh id (as the 2.0.4 HTTP router does).
///
/// ```
/// let c = as_storage::SessionConfig::new("ws-1").with_name("chat");
/// assert_eq!(as_message::to_json(&c), r#"{"workspace_id":"ws-1","name":"chat","chat_model_config":null,"fallback_chat_model_config":null,"tts_model_config":null,"knowledge_config":null}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "SessionConfig")]
pub struct SessionConfig {
    /// Workspace id (required).
    pub workspace_id: String,
    /// Display name; defaults to the creation time `%Y-%m-%d %H:%M:%S`.
    #[serde(default = "default_name")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub name: String,
    /// Primary chat model.
    #[serde(default)]
    pub chat_model_config: Option<ChatModelConfig>,
    /// Fallback chat model.
    #[serde(default)]
    pub fallback_chat_model_config: Option<ChatModelConfig>,
    /// Text-to-speech model.
    #[serde(default)]
    pub tts_model_config: Option<TTSModelConfig>,
    /// Knowledge bases.
    #[serde(default)]
    pub knowledge_config: Option<SessionKnowledgeConfig>,
}

as_message::map_only!(SessionConfig, "a SessionConfig object", Serialize);

fn default_name() -> String {
    as_message::now_naive().format("%Y-%m-%d %H:%M:%S").to_string()
}

impl SessionConfig {
    /// A config for `workspace_id` with the default name and no models.
    pub fn new(workspace_id: impl Into<String>) -> Self {
        Self {
            workspace_id: workspace_id.into(),
            name: default_name(),
            chat_model_config: None,
            fallback_chat_model_config: None,
            tts_model_config: None,
            knowledge_config: None,
        }
    }

    /// Sets the display name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self::new(generate_id())
    }
}

/// A stored session: identity, ownership, timestamps, config and the agent's state.
///
/// JSON field order is `_RecordBase`'s (`id, updated_at, created_at`) then the session fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "SessionRecord")]
pub struct SessionRecord {
    /// Session id.
    #[serde(default = "generate_id")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub id: String,
    /// Last write time; also the record's revision token.
    #[serde(default = "Timestamp::now")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub updated_at: Timestamp,
    /// Creation time.
    #[serde(default = "Timestamp::now")]
    #[schemars(transform = as_message::schema::generated_default)]
    pub created_at: Timestamp,
    /// Owning user.
    pub user_id: String,
    /// Owning agent.
    pub agent_id: String,
    /// Origin.
    #[serde(default)]
    pub source: SessionSource,
    /// The schedule that created it, if any.
    #[serde(default)]
    pub source_schedule_id: Option<String>,
    /// Team, if any.
    #[serde(default)]
    pub team_id: Option<String>,
    /// Configuration (required).
    pub config: SessionConfig,
    /// The agent's state.
    #[serde(default)]
    #[schemars(transform = as_message::schema::generated_default)]
    pub state: AgentState,
}

as_message::map_only!(SessionRecord, "a SessionRecord object", Serialize);

impl SessionRecord {
    /// The revision token of this record (its `updated_at` as written).
    pub fn revision(&self) -> Revision {
        Revision(self.updated_at.to_string())
    }

    /// The canonical JSON of this record, with `state.session_id` forced to `id`.
    pub fn to_canonical_json(&self) -> String {
        encode_record(&self.meta(), &self.state)
    }

    /// Everything but the state.
    pub fn meta(&self) -> SessionMeta {
        SessionMeta {
            id: self.id.clone(),
            updated_at: self.updated_at,
            created_at: self.created_at,
            user_id: self.user_id.clone(),
            agent_id: self.agent_id.clone(),
            source: self.source,
            source_schedule_id: self.source_schedule_id.clone(),
            team_id: self.team_id.clone(),
            config: self.config.clone(),
        }
    }

    /// Joins an envelope and a state (forcing `state.session_id = meta.id`).
    pub fn from_parts(meta: SessionMeta, mut state: AgentState) -> Self {
        state.session_id.clone_from(&meta.id);
        Self {
            id: meta.id,
            updated_at: meta.updated_at,
            created_at: meta.created_at,
            user_id: meta.user_id,
            agent_id: meta.agent_id,
            source: meta.source,
            source_schedule_id: meta.source_schedule_id,
            team_id: meta.team_id,
            config: meta.config,
            state,
        }
    }
}

/// A session record without its state: what listings and state updates need.
/// Reading it from a full record's JSON skips the state without building it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct SessionMeta {
    /// Session id.
    #[serde(default = "generate_id")]
    pub id: String,
    /// Last write time (the revision).
    #[serde(default = "Timestamp::now")]
    pub updated_at: Timestamp,
    /// Creation time.
    #[serde(default = "Timestamp::now")]
    pub created_at: Timestamp,
    /// Owning user.
    pub user_id: String,
    /// Owning agent.
    pub agent_id: String,
    /// Origin.
    #[serde(default)]
    pub source: SessionSource,
    /// The schedule that created it, if any.
    #[serde(default)]
    pub source_schedule_id: Option<String>,
    /// Team, if any.
    #[serde(default)]
    pub team_id: Option<String>,
    /// Configuration.
    pub config: SessionConfig,
}

as_message::map_only!(SessionMeta, "a SessionMeta object");

impl SessionMeta {
    /// The envelope of a session `req` creates under `id`, now: its owner, config, source and
    /// schedule as given, `updated_at == created_at` (how a caller tells a create from an update),
    /// no team.
    pub fn created(id: impl Into<String>, req: &crate::UpsertSession) -> Self {
        let now = Timestamp::now();
        Self {
            id: id.into(),
            updated_at: now,
            created_at: now,
            user_id: req.owner.user_id.clone(),
            agent_id: req.owner.agent_id.clone(),
            source: req.source,
            source_schedule_id: req.source_schedule_id.clone(),
            team_id: None,
            config: req.config.clone(),
        }
    }

    /// The revision token (the `updated_at` text).
    pub fn revision(&self) -> Revision {
        Revision(self.updated_at.to_string())
    }
}

/// A record's revision token: the stored `updated_at` text. Writers of this crate make it
/// strictly increase; Python writers change it on every write too.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Revision(pub String);

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Serialize)]
struct StateView<'a> {
    session_id: &'a str,
    summary: &'a as_message::TextOrBlocks,
    context: &'a [as_message::Msg],
    reply_id: &'a str,
    cur_iter: i64,
    permission_context: &'a as_message::PermissionContext,
    tool_context: &'a as_state::ToolContext,
    tasks_context: &'a as_state::TaskContext,
    middle_context: &'a JsonMap,
}

/// A state written with another session id: hand-written bytes under `to_json`, [`StateView`] elsewhere.
struct StateAs<'a> {
    state: &'a AgentState,
    session_id: &'a str,
    /// Where the hand-written state began in the output (the length of the record's envelope).
    start: Cell<usize>,
}

impl as_message::WriteJson for StateAs<'_> {
    fn write_json(&self, out: &mut String) {
        self.start.set(out.len());
        self.state.write_json_with_session_id(out, self.session_id);
    }
}

impl as_message::DerivedSerialize for StateAs<'_> {
    fn derived_serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let state = self.state;
        StateView {
            session_id: self.session_id,
            summary: &state.summary,
            context: &state.context,
            reply_id: &state.reply_id,
            cur_iter: state.cur_iter,
            permission_context: &state.permission_context,
            tool_context: &state.tool_context,
            tasks_context: &state.tasks_context,
            middle_context: &state.middle_context,
        }
        .serialize(s)
    }
}

impl Serialize for StateAs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        as_message::serialize_fast(self, s)
    }
}

/// A record's wire form; `state` is its last field (the envelope is everything before it).
#[derive(Serialize)]
struct RecordView<'a, St> {
    id: &'a str,
    updated_at: &'a Timestamp,
    created_at: &'a Timestamp,
    user_id: &'a str,
    agent_id: &'a str,
    source: SessionSource,
    source_schedule_id: &'a Option<String>,
    team_id: &'a Option<String>,
    config: &'a SessionConfig,
    state: St,
}

impl<'a, St> RecordView<'a, St> {
    fn new(record: &'a SessionMeta, state: St) -> Self {
        Self {
            id: &record.id,
            updated_at: &record.updated_at,
            created_at: &record.created_at,
            user_id: &record.user_id,
            agent_id: &record.agent_id,
            source: record.source,
            source_schedule_id: &record.source_schedule_id,
            team_id: &record.team_id,
            config: &record.config,
            state,
        }
    }
}

thread_local! {
    /// The size of this thread's last encoded record: the next one starts with that capacity
    /// (`to_json`'s own hint follows every small value written in between).
    static RECORD_LEN: Cell<usize> = const { Cell::new(0) };
}

/// Serializes the envelope `record` around `state`, with `state.session_id` written as `record.id`
/// (without cloning the state). This is how every backend keeps the one-session-id invariant.
pub fn encode_record(record: &SessionMeta, state: &AgentState) -> String {
    encode_record_split(record, state).0
}

/// [`encode_record`], and the length of the record's envelope: its first bytes, up to and
/// including `"state":`, which are [`encode_envelope`]`(record)` (found while writing, not encoded
/// twice). A backend that compares-and-sets on the envelope takes its token from here.
///
/// ```
/// use as_storage::{SessionRecord, encode_envelope, encode_record_split};
/// # let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
/// let rec: SessionRecord = as_message::from_json(text)?;
/// let (json, head) = encode_record_split(&rec.meta(), &rec.state);
/// assert_eq!(json[..head], encode_envelope(&rec.meta()));
/// assert!(json[..head].ends_with(r#","state":"#));
/// # Ok::<(), as_message::MessageError>(())
/// ```
pub fn encode_record_split(record: &SessionMeta, state: &AgentState) -> (String, usize) {
    let view = RecordView::new(record, StateAs { state, session_id: &record.id, start: Cell::new(0) });
    let mut out = String::with_capacity(RECORD_LEN.with(Cell::get));
    as_message::write_json_value(&mut out, &view);
    RECORD_LEN.with(|c| c.set(out.len()));
    if out.capacity() > 2 * out.len() + 4096 {
        out.shrink_to_fit();
    }
    (out, view.state.start.get())
}

/// The canonical bytes of a record up to and including `"state":` (the record's last field).
/// Every record [`encode_record`] writes for `record` begins with them.
pub fn encode_envelope(record: &SessionMeta) -> String {
    // With a unit state the record ends `"state":null}`: cut the value and the closing brace.
    let mut out = as_message::to_json(&RecordView::new(record, ()));
    out.truncate(out.len().saturating_sub("null}".len()));
    out
}
