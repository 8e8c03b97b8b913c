//! `agentscope state fmt|check`: drive the wire format from outside.

use super::outln;
use std::io::Write;
use std::path::PathBuf;

use as_message::{JsonValue, Msg};
use as_state::AgentState;
use as_storage::SessionRecord;

use crate::GlobalArgs;
use crate::exit::{CliError, CliResult, ExitKind};

/// `state` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum StateCommand {
    /// Write canonical compact JSON (byte-identical to AgentScope Python's) to stdout.
    Fmt(FmtArgs),
    /// Validate files; one `ok  <file>  <kind> <n> messages` line each on stdout, or an error naming the JSON
    /// path on stderr.
    Check(CheckArgs),
}

/// What a JSON document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// An `AgentState`.
    State,
    /// A `SessionRecord` (config and state).
    Record,
    /// A single `Msg`.
    Msg,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::State => "state",
            Self::Record => "record",
            Self::Msg => "msg",
        }
    }
}

/// Arguments of `state fmt`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  agentscope state fmt state.pretty.json > state.json\n  cat record.json | agentscope state fmt --kind record"
)]
pub(crate) struct FmtArgs {
    /// The file to read; `-` or nothing reads stdin.
    file: Option<PathBuf>,
    /// The document kind; detected from its keys when omitted.
    #[arg(long, value_enum)]
    kind: Option<Kind>,
}

/// Arguments of `state check`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  agentscope state check sessions/*.json")]
pub(crate) struct CheckArgs {
    /// Files to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The document kind; detected per file when omitted.
    #[arg(long, value_enum)]
    kind: Option<Kind>,
}

/// Runs a `state` subcommand.
pub(crate) fn run(_global: &GlobalArgs, cmd: StateCommand) -> CliResult {
    match cmd {
        StateCommand::Fmt(args) => fmt(args),
        StateCommand::Check(args) => check(args),
    }
}

/// A parsed document.
#[derive(Debug)]
pub(crate) enum Doc {
    /// An agent state.
    State(Box<AgentState>),
    /// A session record.
    Record(Box<SessionRecord>),
    /// A message.
    Msg(Box<Msg>),
}

impl Doc {
    fn kind(&self) -> Kind {
        match self {
            Self::State(_) => Kind::State,
            Self::Record(_) => Kind::Record,
            Self::Msg(_) => Kind::Msg,
        }
    }

    fn messages(&self) -> usize {
        match self {
            Self::State(s) => s.context.len(),
            Self::Record(r) => r.state.context.len(),
            Self::Msg(_) => 1,
        }
    }

    fn to_json(&self) -> String {
        match self {
            Self::State(s) => as_message::to_json(s),
            Self::Record(r) => as_message::to_json(r),
            Self::Msg(m) => as_message::to_json(m),
        }
    }
}

/// Guesses the kind from the top-level keys: records have `user_id`/`agent_id`/`config`,
/// messages `role`, anything else is read as a state.
pub(crate) fn detect(bytes: &[u8]) -> Result<Kind, as_message::MessageError> {
    let value: JsonValue = as_message::from_json_slice(bytes)?;
    let JsonValue::Object(map) = value else {
        return Err(as_message::MessageError::new(
            as_message::MessageErrorKind::InvalidJson,
            "",
            "expected a JSON object at the top level",
        ));
    };
    Ok(if map.contains_key("user_id") || map.contains_key("agent_id") || map.contains_key("config") {
        Kind::Record
    } else if map.contains_key("role") {
        Kind::Msg
    } else {
        Kind::State
    })
}

/// Keys of a session record that an [`AgentState`] does not have.
const RECORD_KEYS: [&str; 4] = ["state", "user_id", "agent_id", "config"];

/// Why `bytes`, which pydantic's `AgentState` would still read, is not a state: pydantic ignores
/// unknown keys and defaults the missing ones, so a session record, part of one (`{"id":…,
/// "state":{…}}`) or a message given by mistake would silently become an empty state, its messages
/// dropped. `None` when it may be a state (whatever is not JSON or not an object is left to the
/// parser to report). Shared by `state check|fmt` and `sessions create --state|set-state`.
pub(crate) fn not_a_state(bytes: &[u8]) -> Option<as_message::MessageError> {
    let keys: std::collections::BTreeMap<String, serde::de::IgnoredAny> = serde_json::from_slice(bytes).ok()?;
    let invalid = |path: &str, why: String| {
        Some(as_message::MessageError::new(as_message::MessageErrorKind::InvalidValue, path, why))
    };
    if keys.contains_key("state") {
        let why = "not an AgentState but a session record or part of one, whose state is the value of \"state\" (an \
                   AgentState has no such key): read as a state it would be empty";
        return invalid("state", why.to_owned());
    }
    if let Some(key) = RECORD_KEYS.iter().find(|k| keys.contains_key(**k)) {
        let why = format!("not an AgentState: {key:?} is a key of a session record: read as a state it would be empty");
        return invalid(key, why);
    }
    if keys.contains_key("role") && keys.contains_key("content") {
        return invalid("", "not an AgentState: this is a message (it has \"role\" and \"content\")".to_owned());
    }
    None
}

/// Parses `bytes` as `kind` (detected when `None`); a state must pass [`not_a_state`].
pub(crate) fn parse(bytes: &[u8], kind: Option<Kind>) -> Result<Doc, as_message::MessageError> {
    let kind = match kind {
        Some(k) => k,
        None => detect(bytes)?,
    };
    if kind == Kind::State
        && let Some(e) = not_a_state(bytes)
    {
        return Err(e);
    }
    Ok(match kind {
        Kind::State => Doc::State(Box::new(as_message::from_json_slice(bytes)?)),
        Kind::Record => Doc::Record(Box::new(as_message::from_json_slice(bytes)?)),
        Kind::Msg => Doc::Msg(Box::new(as_message::from_json_slice(bytes)?)),
    })
}

fn fmt(args: FmtArgs) -> CliResult {
    let bytes = crate::cmd::read_input(args.file.as_deref())?;
    let doc = parse(&bytes, args.kind)?;
    let mut out = std::io::stdout().lock();
    out.write_all(doc.to_json().as_bytes()).and_then(|()| out.flush()).map_err(crate::cmd::stdout_error)
}

fn check(args: CheckArgs) -> CliResult {
    let mut failed = 0usize;
    for file in &args.files {
        let shown = file.display();
        let result = std::fs::read(file)
            .map_err(|e| format!("cannot read: {e}"))
            .and_then(|bytes| parse(&bytes, args.kind).map_err(|e| e.to_string()));
        match result {
            Ok(doc) => outln!("ok  {shown}  {} {} messages", doc.kind().as_str(), doc.messages())?,
            // A diagnostic (cli.md: on stderr), in the column layout of the `ok` lines.
            Err(msg) => {
                failed += 1;
                eprintln!("error  {shown}  {msg}");
            }
        }
    }
    if failed == 0 {
        Ok(())
    } else {
        eprintln!("{failed} of {} files failed", args.files.len());
        Err(CliError::silent(ExitKind::Failed))
    }
}
