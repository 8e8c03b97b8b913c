//! `agentscope sessions create|show|list|set-state|delete`: the session store from the shell.
//!
//! Failures print one line on stderr and exit with a distinct code (see `--help`): 3 the session
//! does not exist, 4 a concurrent writer won (`set-state --expect`) or the id belongs to another
//! agent, 5 an invalid id or input, 6 the storage backend is unavailable.

use std::io::Write;
use std::path::{Path, PathBuf};

use as_message::{JsonValue, json};
use as_state::AgentState;
use as_storage::{
    Owner, PageRequest, Revision, SessionConfig, SessionKey, SharedStorage, StorageErrorKind, UpsertSession,
};

use crate::GlobalArgs;
use crate::exit::{CliError, CliResult, ExitKind};

/// `sessions` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SessionsCommand {
    /// Create a session (or update it when --session names an existing one); prints its id.
    Create(CreateArgs),
    /// Print the stored record as compact JSON (the stored bytes), or a summary.
    Show(ShowArgs),
    /// List the owner's sessions, newest first, one page at a time.
    List(ListArgs),
    /// Replace a session's state (the per-turn write); prints the new revision.
    SetState(SetStateArgs),
    /// Delete a session and its messages.
    Delete(DeleteArgs),
    /// Write the sessions of a user's agents as JSON lines (lossless; read back with `sessions import`).
    Export(crate::cmd::admin::ExportArgs),
    /// Read `sessions export` lines into this store (from any backend to any backend).
    Import(crate::cmd::admin::ImportArgs),
    /// Check every stored session (of every user, or of --user's agents) against the wire model; exit 1 if any is bad.
    Validate(crate::cmd::admin::ValidateArgs),
}

/// The owner of the sessions.
#[derive(Debug, clap::Args)]
pub(crate) struct OwnerArgs {
    /// User id.
    #[arg(long = "user", value_name = "U")]
    user: String,
    /// Agent id.
    #[arg(long = "agent", value_name = "A")]
    agent: String,
}

impl OwnerArgs {
    fn owner(&self) -> Owner {
        Owner::new(self.user.clone(), self.agent.clone())
    }
}

/// Arguments of `sessions create`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  agentscope sessions create --user alice --agent friday --name \"support chat\"")]
pub(crate) struct CreateArgs {
    #[command(flatten)]
    owner: OwnerArgs,
    /// Session id; a fresh one when omitted.
    #[arg(long = "session", value_name = "S")]
    session: Option<String>,
    /// Workspace id of the config; a fresh one when omitted.
    #[arg(long = "workspace", value_name = "W")]
    workspace: Option<String>,
    /// Display name; the creation time when omitted.
    #[arg(long = "name", value_name = "N")]
    name: Option<String>,
    /// Initial AgentState JSON file (`-` reads stdin); a fresh state when omitted.
    #[arg(long = "state", value_name = "FILE")]
    state: Option<PathBuf>,
}

/// One session.
#[derive(Debug, clap::Args)]
pub(crate) struct KeyArgs {
    #[command(flatten)]
    owner: OwnerArgs,
    /// Session id.
    #[arg(long = "session", value_name = "S")]
    session: String,
}

impl KeyArgs {
    fn key(&self) -> SessionKey {
        self.owner.owner().session(self.session.clone())
    }
}

/// Arguments of `sessions show`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  agentscope sessions show --user alice --agent friday --session 3f2a… --summary")]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// A readable summary instead of the JSON record.
    #[arg(long)]
    summary: bool,
}

/// Arguments of `sessions list`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  agentscope sessions list --user alice --agent friday --limit 20 --json")]
pub(crate) struct ListArgs {
    #[command(flatten)]
    owner: OwnerArgs,
    /// Sessions per page.
    #[arg(long, default_value_t = 50, value_name = "N")]
    limit: usize,
    /// Continue after this cursor (printed by the previous page).
    #[arg(long, value_name = "C")]
    cursor: Option<String>,
    /// One JSON object: `{"sessions": [...], "next_cursor": ..., "errors": [...]}`.
    #[arg(long)]
    json: bool,
}

/// Arguments of `sessions set-state`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  agentscope sessions set-state --user alice --agent friday --session 3f2a… state.json"
)]
pub(crate) struct SetStateArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// Only write if the stored revision (`updated_at`) is still this one; exit 4 otherwise.
    #[arg(long, value_name = "REV")]
    expect: Option<String>,
    /// AgentState JSON file, or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    file: PathBuf,
}

/// Arguments of `sessions delete`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  agentscope sessions delete --user alice --agent friday --session 3f2a…")]
pub(crate) struct DeleteArgs {
    #[command(flatten)]
    key: KeyArgs,
}

/// Runs a `sessions` subcommand.
pub(crate) async fn run(global: &GlobalArgs, cmd: SessionsCommand) -> CliResult {
    let reads_only = matches!(
        cmd,
        SessionsCommand::Show(_) | SessionsCommand::List(_) | SessionsCommand::Export(_) | SessionsCommand::Validate(_)
    );
    let in_memory = matches!(
        crate::storage_url::StorageUrl::parse(global.storage.as_deref()),
        Ok(crate::storage_url::StorageUrl::Memory)
    );
    let store = if reads_only {
        crate::storage_url::open_for_reading(global.storage.as_deref()).await?
    } else {
        crate::storage_url::open(global.storage.as_deref()).await?
    };
    let result = match cmd {
        SessionsCommand::Create(a) => create(&store, a).await,
        SessionsCommand::Show(a) => show(&store, a).await,
        SessionsCommand::List(a) => list(&store, a).await,
        SessionsCommand::SetState(a) => set_state(&store, a).await,
        SessionsCommand::Delete(a) => delete(&store, a).await,
        SessionsCommand::Export(a) => crate::cmd::admin::run_export(&store, a).await,
        SessionsCommand::Import(a) => crate::cmd::admin::run_import(&store, a).await,
        SessionsCommand::Validate(a) => crate::cmd::admin::run_validate(&store, a).await,
    };
    let closed = store.close().await.map_err(storage);
    if in_memory && !reads_only && result.is_ok() {
        eprintln!("note: --storage memory keeps nothing once this command ends");
    }
    result.and(closed)
}

fn storage(e: as_storage::StorageError) -> CliError {
    crate::cmd::chat::storage_error(e)
}

fn not_found(key: &SessionKey) -> CliError {
    CliError::new(
        ExitKind::NotFound,
        format!("session {:?} not found for user {:?} and agent {:?}", key.session_id, key.user_id, key.agent_id),
    )
}

fn read_state(file: &Path) -> CliResult<AgentState> {
    let bytes = crate::cmd::read_input(Some(file))?;
    // pydantic reads any object as a state (unknown keys dropped, the rest defaulted): a session
    // record or a message given by mistake would silently become an empty state.
    if let Some(e) = crate::cmd::state::not_a_state(&bytes) {
        return Err(CliError::new(ExitKind::Invalid, format!("{}: {e}", file.display())));
    }
    as_message::from_json_slice(&bytes)
        .map_err(|e| CliError::new(ExitKind::Invalid, format!("{} is not an AgentState: {e}", file.display())))
}

fn print(text: &str) -> CliResult {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(crate::cmd::stdout_error)
}

async fn create(store: &SharedStorage, a: CreateArgs) -> CliResult {
    // An existing session keeps its config except what is given here (its workspace, name and
    // model configs are not reset); a new one gets a fresh config.
    let existing = match &a.session {
        Some(id) => {
            let key = a.owner.owner().session(id.clone());
            key.validate().map_err(storage)?;
            store.get_session(&key).await.map_err(storage)?.map(|r| r.config)
        }
        None => None,
    };
    let mut config = match (existing, a.workspace) {
        (Some(mut c), ws) => {
            if let Some(ws) = ws {
                c.workspace_id = ws;
            }
            c
        }
        (None, Some(ws)) => SessionConfig::new(ws),
        (None, None) => SessionConfig::default(),
    };
    if let Some(n) = a.name {
        config.name = n;
    }
    let mut req = UpsertSession::new(a.owner.owner(), config);
    if let Some(id) = a.session {
        req = req.with_session_id(id);
    }
    if let Some(file) = &a.state {
        req = req.with_state(read_state(file)?);
    }
    let rec = store.upsert_session(req).await.map_err(|e| match e.kind() {
        StorageErrorKind::AlreadyExists => CliError::new(
            ExitKind::Conflict,
            format!("session id is taken by another agent of user {:?}", a.owner.user),
        ),
        _ => storage(e),
    })?;
    print(&rec.id)
}

async fn show(store: &SharedStorage, a: ShowArgs) -> CliResult {
    let key = a.key.key();
    if !a.summary {
        // Exactly the stored bytes (another writer's key order and unknown fields included).
        let raw = store.get_session_raw(&key).await.map_err(storage)?.ok_or_else(|| not_found(&key))?;
        print(&raw)?;
        // Shown as stored, but a record no reader can load is a failed check on every backend (a
        // Redis store cannot even show it: it cannot tell its owner).
        return match as_storage::decode_record(&raw) {
            Ok(_) => Ok(()),
            Err(e) => Err(CliError::new(ExitKind::Failed, format!("the stored record of {key} is not readable: {e}"))),
        };
    }
    let rec = store.get_session(&key).await.map_err(storage)?.ok_or_else(|| not_found(&key))?;
    // The readable view: message count, last messages, parked tool calls, tasks, permission rules.
    let log = store.list_messages(&key, 0, 0).await.map_err(storage)?;
    print(crate::cmd::admin::summary(&rec, Some(log.len())).trim_end())
}

/// `text` for a terminal: as it is, or quoted with escapes when it holds control characters or
/// bidirectional-text controls (a stored name must not start a line of its own, send terminal
/// escape sequences, or display reversed).
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(needs_escape) {
        text.chars()
            .flat_map(|c| if needs_escape(c) { c.escape_unicode().collect() } else { vec![c] })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

async fn list(store: &SharedStorage, a: ListArgs) -> CliResult {
    if a.limit == 0 {
        return Err(CliError::new(ExitKind::Usage, "--limit must be at least 1"));
    }
    let page = PageRequest { limit: a.limit, cursor: a.cursor };
    let page = store.list_sessions(&a.owner.owner(), &page).await.map_err(storage)?;
    if a.json {
        let sessions: Vec<JsonValue> = page
            .sessions
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "name": s.name,
                    "created_at": s.created_at.to_string(),
                    "updated_at": s.updated_at.to_string(),
                    "source": s.source.as_str(),
                    "message_count": s.message_count,
                    "size_bytes": s.size_bytes,
                })
            })
            .collect();
        let errors: Vec<JsonValue> =
            page.errors.iter().map(|e| json!({"session_id": e.session_id, "error": e.error.to_string()})).collect();
        return print(&as_message::to_json(
            &json!({"sessions": sessions, "next_cursor": page.next_cursor, "errors": errors}),
        ));
    }
    let mut lines = Vec::with_capacity(page.sessions.len() + 2);
    for s in &page.sessions {
        let count = s.message_count.map_or_else(|| "?".to_owned(), |n| n.to_string());
        lines.push(format!(
            "{}  {}  {:>5} msgs  {:>9} B  {}",
            s.id,
            s.updated_at,
            count,
            s.size_bytes,
            printable(&s.name)
        ));
    }
    for e in &page.errors {
        eprintln!("warning: session {:?} cannot be read: {}", e.session_id, e.error);
    }
    // The hint is for a person: on stderr (stdout is one line per session), the cursor quoted
    // for a shell (SQLite cursors hold a `|`).
    if let Some(c) = &page.next_cursor {
        eprintln!("more: --cursor '{}'", c.replace('\'', r"'\''"));
    }
    if lines.is_empty() {
        return Ok(());
    }
    print(&lines.join("\n"))
}

async fn set_state(store: &SharedStorage, a: SetStateArgs) -> CliResult {
    let key = a.key.key();
    let state = read_state(&a.file)?;
    let expected = a.expect.map(Revision);
    let rev = store.update_session_state(&key, &state, expected.as_ref()).await.map_err(|e| match e.kind() {
        StorageErrorKind::NotFound => not_found(&key),
        StorageErrorKind::Conflict => CliError::new(
            ExitKind::Conflict,
            format!(
                "session {:?} changed since revision {}: re-read it and retry",
                key.session_id,
                expected.as_ref().map(|r| r.0.as_str()).unwrap_or("?")
            ),
        ),
        _ => storage(e),
    })?;
    print(&rev.0)
}

async fn delete(store: &SharedStorage, a: DeleteArgs) -> CliResult {
    let key = a.key.key();
    if store.delete_session(&key).await.map_err(storage)? { Ok(()) } else { Err(not_found(&key)) }
}
