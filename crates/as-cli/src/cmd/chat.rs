//! `agentscope chat`: a conversation with a persistent session.
//!
//! One turn is: load the session (or create it) → build a fresh [`Agent`] → stream the reply →
//! write the state back, whatever way the reply ended (completed, parked on a confirmation,
//! interrupted by Ctrl-C, stopped at the iteration bound, or failed). The pieces here are shared
//! with `agentscope demo`, whose steps run this same code in separate processes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use as_agent::{
    Agent, AgentError, AgentErrorKind, AgentEvent, ConfirmResult, ReActConfig, ReplyInput, ReplyStatus, SessionRunner,
};
use as_message::{
    ContentBlock, PermissionBehavior, PermissionMode, PermissionRule, Role, ToolCallBlock, ToolCallState,
};
use as_model::SharedChatModel;
use as_state::AgentState;
use as_storage::{Owner, SessionConfig, SessionKey, SharedStorage, StorageErrorKind, UpsertSession};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cmd::outln;
use crate::exit::{CliError, CliResult, ExitKind};
use crate::render::{Note, Renderer, use_colour};

/// The default system prompt.
pub(crate) const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful assistant.";

/// `--permission-mode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ModeArg {
    /// Ask before any tool runs unless a rule allows it.
    Default,
    /// Allow file edits inside the working directory without asking.
    #[value(alias = "accept_edits")]
    AcceptEdits,
    /// Read-only: allow reading tools, deny the rest.
    Explore,
    /// Allow everything that no rule denies.
    Bypass,
    /// Never ask: deny whatever would ask.
    #[value(alias = "dont_ask")]
    DontAsk,
}

impl From<ModeArg> for PermissionMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Default => Self::Default,
            ModeArg::AcceptEdits => Self::AcceptEdits,
            ModeArg::Explore => Self::Explore,
            ModeArg::Bypass => Self::Bypass,
            ModeArg::DontAsk => Self::DontAsk,
        }
    }
}

/// `--confirm` values: the answer to parked tool confirmations without a prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Answer {
    /// Run the call.
    Yes,
    /// Refuse it (the model is told the user denied it).
    No,
    /// Run it and add the suggested rule, so the same call is not asked again in this session.
    Always,
}

/// Arguments of `chat`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  export OPENAI_API_KEY=sk-…
  agentscope chat --user alice --agent friday --model openai:gpt-4o-mini
  agentscope chat --user alice --agent friday --session 3f2a… --model openai:gpt-4o-mini
  agentscope chat --user alice --agent friday --model ollama:qwen2.5 --message 'Summarise README.md' --json
  agentscope chat --user alice --agent friday --session 3f2a… --model openai:gpt-4o-mini --confirm yes

Providers and keys: openai: (OPENAI_API_KEY, OPENAI_BASE_URL), dashscope: (DASHSCOPE_API_KEY),
deepseek: (DEEPSEEK_API_KEY), ollama: (no key, http://localhost:11434/v1); --base-url overrides the endpoint.

Keys: Ctrl-C while a reply streams interrupts it (the partial reply is saved; with --message the
exit code is 130); at a prompt Ctrl-C quits with exit 130, Ctrl-D (the end of input) with exit 0,
or with the exit code of the last turn when that turn failed. A turn that fails prints its error
on stderr, and the chat goes on.
A tool that needs permission asks [y/n/a]: yes, no, or always (a also adds the suggested rule,
named in the prompt, to the session). Quitting at that prompt leaves the session parked: the next
`chat` on it asks again before anything else. With --message, a reply that parks prints the
pending call and exits 0; answer it later with --confirm.

Two processes never run turns of one session at once: on Redis a turn takes AgentScope's chat-run lock
(agentscope:session:lock:SESSION, shared with AgentScope Python 2.0.4), on SQLite an OS file lock in
DB.locks/ next to the database. A turn waits up to AGENTSCOPE_LOCK_WAIT seconds (default 10) for a
session busy elsewhere.

Exit codes of chat: 2 bad --model or a missing key (the message names the variable); 3 unknown --session;
4 another process changed the session during the turn, or kept it busy (its lock) past the wait; 5 the session waits for a tool confirmation and got
a plain message (answer it first); 6 the model or the store cannot be reached (or the SQLite file is locked);
130 Ctrl-C (a reply interrupted, its partial output saved, or Ctrl-C at a prompt).")]
pub(crate) struct ChatArgs {
    /// The user id.
    #[arg(long)]
    pub(crate) user: String,
    /// The agent id (also the agent's name in messages).
    #[arg(long)]
    pub(crate) agent: String,
    /// Continue this session; without it a new session is created and its id printed.
    #[arg(long)]
    pub(crate) session: Option<String>,
    /// The model: `openai:MODEL`, `dashscope:MODEL`, `deepseek:MODEL` or `ollama:MODEL`.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub(crate) model: String,
    /// The provider's endpoint (an OpenAI-compatible `/v1` URL).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// The system prompt.
    #[arg(long, default_value = DEFAULT_SYSTEM_PROMPT)]
    pub(crate) system_prompt: String,
    /// The session's permission mode (kept in the session once set).
    #[arg(long, value_enum)]
    pub(crate) permission_mode: Option<ModeArg>,
    /// Reasoning-acting rounds per reply before it stops.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_iters: u32,
    /// The directory the file and shell tools work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) workdir: Option<PathBuf>,
    /// Run one turn with this text, print the answer and exit.
    #[arg(long, value_name = "TEXT")]
    pub(crate) message: Option<String>,
    /// With --message or --confirm: print the event stream as JSON lines instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Answer the parked tool confirmations of the --session given, without a prompt; run that turn and exit.
    // `requires`: a new session has nothing parked, so without --session this fails at parse time,
    // before a session is created.
    #[arg(long, value_enum, value_name = "ANSWER", requires = "session")]
    pub(crate) confirm: Option<Answer>,
}

/// An opened session: its store, its key and the runner that takes turns on it.
#[derive(Debug)]
pub(crate) struct SessionHandle {
    pub(crate) runner: SessionRunner,
    pub(crate) key: SessionKey,
}

impl SessionHandle {
    /// Loads `session` of `(user, agent)`, or creates a new session when `session` is `None`, and
    /// applies `mode` to it (stored at once). Returns the handle, the state and whether it was created.
    pub(crate) async fn open(
        storage: SharedStorage,
        lock: Option<Arc<dyn as_agent::SessionLock>>,
        user: &str,
        agent: &str,
        session: Option<&str>,
        mode: Option<PermissionMode>,
    ) -> CliResult<(Self, AgentState, bool)> {
        let owner = Owner::new(user, agent);
        owner.validate()?;
        let config = SessionConfig::new(format!("cli-{user}"));
        let (record, created) = match session {
            Some(id) => {
                let key = owner.session(id);
                key.validate()?;
                let Some(record) = storage.get_session(&key).await.map_err(storage_error)? else {
                    return Err(CliError::new(
                        ExitKind::NotFound,
                        format!(
                            "unknown session {id} for user {user} and agent {agent}: list them with \
                             `agentscope sessions list --user {user} --agent {agent}`, or leave out --session to \
                             start a new one"
                        ),
                    ));
                };
                (record, false)
            }
            None => {
                let req = UpsertSession::new(owner.clone(), config.clone());
                (storage.upsert_session(req).await.map_err(storage_error)?, true)
            }
        };
        let key = owner.session(record.id.as_str());
        let mut state = record.state;
        let mut runner = SessionRunner::new(storage, config);
        if let Some(lock) = lock {
            runner = runner.with_lock(lock);
        }
        if let Some(mode) = mode
            && state.permission_context.mode != mode
        {
            // Under the session lock, like a turn: a mode written while another process runs a
            // turn would make that turn's final write conflict after its tools ran.
            state = runner
                .update_state(&key, |s| s.permission_context.mode = mode)
                .await
                .map_err(|e| agent_error(e, &key))?;
        }
        Ok((Self { runner, key }, state, created))
    }

    /// The stored state (after a failed turn).
    pub(crate) async fn reload(&self) -> CliResult<AgentState> {
        match self.runner.storage().get_session(&self.key).await.map_err(storage_error)? {
            Some(r) => Ok(r.state),
            None => Err(CliError::new(
                ExitKind::NotFound,
                format!("session {} was deleted meanwhile; start a new one", self.key.session_id),
            )),
        }
    }
}

/// A storage error as a person reads it (cause and fix), with its exit code.
pub(crate) fn storage_error(e: as_storage::StorageError) -> CliError {
    let fix = match e.kind() {
        StorageErrorKind::Unavailable if e.backend() == "redis" => {
            " (is redis-server running and reachable at the --storage URL?)"
        }
        StorageErrorKind::Unavailable if e.backend() == "sqlite" => {
            " (another process holds the SQLite file locked; close it or use another --storage path)"
        }
        _ => "",
    };
    let kind = CliError::from(e);
    CliError::new(kind.kind(), format!("{kind}{fix}"))
}

/// How a turn ended, for the caller.
#[derive(Debug)]
pub(crate) struct TurnEnd {
    /// How the reply ended (`None`: it failed).
    pub(crate) status: Option<ReplyStatus>,
    /// Whether Ctrl-C interrupted it.
    pub(crate) interrupted_by_user: bool,
    /// The error that stopped it (reported by the caller: the exit with `--message`, a line on stderr
    /// in the interactive chat).
    pub(crate) error: Option<CliError>,
}

/// Where a turn's events go.
pub(crate) trait EventSink: Send {
    /// One event.
    fn event(&mut self, event: &AgentEvent);
    /// A status line (not an event).
    fn note(&mut self, note: Note, text: &str);
    /// The first write to stdout that failed (closed or full) since the last call, taken. A sink
    /// never fails a turn (the turn goes on and is saved); the command ends with this error after
    /// the turn instead (exit 1, as any command whose stdout fails). A sink that does not write
    /// to stdout has none.
    fn take_write_error(&mut self) -> Option<std::io::Error> {
        None
    }
    /// A failed turn's error line, on stderr (a diagnostic, not part of the reply).
    fn error(&mut self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }
}

/// The first failed write of a sink on stdout; once set, the sink writes nothing more.
#[derive(Debug, Default)]
struct StdoutWrites {
    failed: Option<std::io::Error>,
}

impl StdoutWrites {
    /// Runs `write` on a locked stdout and flushes it, unless an earlier write failed.
    fn write(&mut self, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        if self.failed.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        if let Err(e) = write(&mut out).and_then(|()| out.flush()) {
            self.failed = Some(e);
        }
    }
}

/// Events rendered for a person on stdout.
pub(crate) struct HumanSink {
    renderer: Renderer,
    stdout: StdoutWrites,
}

impl HumanSink {
    /// Colours when stdout is a terminal.
    pub(crate) fn stdout() -> Self {
        Self { renderer: Renderer::new(use_colour(std::io::stdout().is_terminal())), stdout: StdoutWrites::default() }
    }
}

impl EventSink for HumanSink {
    fn event(&mut self, event: &AgentEvent) {
        let renderer = &mut self.renderer;
        self.stdout.write(|out| renderer.event(out, event));
    }

    fn note(&mut self, note: Note, text: &str) {
        let renderer = &mut self.renderer;
        self.stdout.write(|out| renderer.note(out, note, text));
    }

    fn take_write_error(&mut self) -> Option<std::io::Error> {
        self.stdout.failed.take()
    }

    /// Ends the reply's open line on stdout first, so that on a terminal the error is a line of its own.
    fn error(&mut self, text: &str) {
        let renderer = &mut self.renderer;
        self.stdout.write(|out| renderer.close(out));
        let stderr = std::io::stderr();
        let mut err = stderr.lock();
        let _ = Renderer::new(use_colour(stderr.is_terminal())).note(&mut err, Note::Error, text);
    }
}

/// Events as JSON lines on stdout (the wire form of AgentScope 2.0.4's events); notes go to stderr.
#[derive(Debug, Default)]
pub(crate) struct JsonSink {
    stdout: StdoutWrites,
}

impl EventSink for JsonSink {
    fn event(&mut self, event: &AgentEvent) {
        self.stdout.write(|out| writeln!(out, "{}", as_message::to_json(event)));
    }

    fn note(&mut self, _note: Note, text: &str) {
        eprintln!("{text}");
    }

    fn take_write_error(&mut self) -> Option<std::io::Error> {
        self.stdout.failed.take()
    }
}

/// Maps an agent error to a one-line message naming the cause and the fix, and an exit code.
pub(crate) fn agent_error(e: AgentError, key: &SessionKey) -> CliError {
    match e.kind() {
        AgentErrorKind::Awaiting => CliError::new(
            ExitKind::Invalid,
            format!(
                "session {} is waiting for a tool confirmation, so it cannot take a new message: answer it with \
                 `agentscope chat --user {} --agent {} --session {} --model …` (it asks first) or add \
                 `--confirm yes|no|always`",
                key.session_id, key.user_id, key.agent_id, key.session_id
            ),
        ),
        AgentErrorKind::Model => {
            let fix = match &e {
                AgentError::Model(m) => match m.kind() {
                    as_model::ModelErrorKind::Auth => " (check the provider's API key variable, e.g. OPENAI_API_KEY)",
                    as_model::ModelErrorKind::Transport | as_model::ModelErrorKind::Timeout => {
                        " (is the model server reachable at --base-url?)"
                    }
                    as_model::ModelErrorKind::RateLimited { .. } => " (wait a moment and run the turn again)",
                    _ => "",
                },
                _ => "",
            };
            CliError::new(ExitKind::Unavailable, format!("the model failed: {e}{fix}"))
        }
        // A concurrent writer won, or another process holds the session's lock.
        AgentErrorKind::Conflict | AgentErrorKind::Lock => CliError::new(ExitKind::Conflict, e.to_string()),
        // Ctrl-C while waiting for the session's lock: nothing ran, nothing was written.
        AgentErrorKind::Interrupted => CliError::new(ExitKind::Interrupted, e.to_string()),
        AgentErrorKind::Storage => match e {
            AgentError::Storage(s) => storage_error(s),
            // The turn ran (its tool calls did happen) but was not saved: say so.
            AgentError::Unsaved(u) => {
                let c = storage_error(u.error);
                CliError::new(c.kind(), format!("the turn ran but was not saved: {c}"))
            }
            _ => CliError::new(ExitKind::Unavailable, "storage failed"),
        },
        AgentErrorKind::InvalidInput | AgentErrorKind::UnexpectedEvent | AgentErrorKind::ReplyIdMismatch => {
            CliError::new(ExitKind::Invalid, e.to_string())
        }
        _ => CliError::new(ExitKind::Failed, e.to_string()),
    }
}

/// Listens for Ctrl-C (SIGINT). Armed on creation: a signal that arrives after [`CtrlC::arm`]
/// is seen, and from the first arm on SIGINT no longer kills the process.
pub(crate) struct CtrlC {
    #[cfg(unix)]
    inner: tokio::signal::unix::Signal,
}

impl CtrlC {
    /// Starts listening.
    pub(crate) fn arm() -> CliResult<Self> {
        #[cfg(unix)]
        {
            let inner = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot listen for Ctrl-C: {e}")))?;
            Ok(Self { inner })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves at the next Ctrl-C.
    pub(crate) async fn recv(&mut self) {
        #[cfg(unix)]
        {
            if self.inner.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Runs one turn through the [`SessionRunner`] (load, reply, persist whatever way it ends). The first
/// Ctrl-C while it runs interrupts it (the partial reply is kept and saved). `state` is updated to
/// the stored state.
pub(crate) async fn run_turn(
    agent: &Agent,
    handle: &SessionHandle,
    state: &mut AgentState,
    input: ReplyInput,
    sink: &mut dyn EventSink,
) -> CliResult<TurnEnd> {
    let cancel = CancellationToken::new();
    let mut ctrl_c = CtrlC::arm()?;
    let watcher = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            ctrl_c.recv().await;
            cancel.cancel();
        })
    };
    let result =
        handle.runner.run_turn_with_cancel(agent, &handle.key, input, &mut |e| sink.event(e), cancel.clone()).await;
    watcher.abort();
    let interrupted_by_user = cancel.is_cancelled();
    match result {
        Ok(turn) => {
            if let Some(why) = &turn.log_error {
                // The turn happened and its state is saved; only the message log lacks it.
                eprintln!("warning: the session was saved, but its message log was not: {why}");
            }
            *state = turn.state;
            Ok(TurnEnd { status: Some(turn.status), interrupted_by_user, error: None })
        }
        Err(e) => {
            // Storage trouble (unreachable, a concurrent writer, a deleted session, the lock): the turn
            // could not be saved, so it ends the command.
            if matches!(
                e.kind(),
                AgentErrorKind::Storage | AgentErrorKind::Conflict | AgentErrorKind::Lock | AgentErrorKind::Interrupted
            ) {
                return Err(agent_error(e, &handle.key));
            }
            // Anything else (the model failed, a bad input): the runner saved what the reply did.
            let err = agent_error(e, &handle.key);
            *state = handle.reload().await?;
            Ok(TurnEnd { status: None, interrupted_by_user, error: Some(err) })
        }
    }
}

/// The tool calls of the agent's last message that wait for the user's confirmation.
pub(crate) fn asking_calls(state: &AgentState, agent: &str) -> Vec<ToolCallBlock> {
    let Some(last) = state.context.last() else { return Vec::new() };
    if last.role != Role::Assistant || last.name != agent {
        return Vec::new();
    }
    last.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) if c.state == ToolCallState::Asking => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// The rules "always" adds: the call's suggested rules, or (when it has none) a rule allowing the tool.
pub(crate) fn always_rules(call: &ToolCallBlock) -> Vec<PermissionRule> {
    if call.suggested_rules.is_empty() {
        vec![PermissionRule::new(call.name.as_str(), None, PermissionBehavior::Allow, "session")]
    } else {
        call.suggested_rules.clone()
    }
}

/// The confirm event answering `calls` with `answer`.
pub(crate) fn confirm_input(state: &AgentState, calls: &[ToolCallBlock], answers: &[Answer]) -> ReplyInput {
    let results: Vec<ConfirmResult> = calls
        .iter()
        .zip(answers)
        .map(|(call, answer)| match answer {
            Answer::Yes => ConfirmResult::approve(call.clone()),
            Answer::No => ConfirmResult::deny(call.clone()),
            Answer::Always => {
                ConfirmResult { confirmed: true, tool_call: call.clone(), rules: Some(always_rules(call)) }
            }
        })
        .collect();
    ReplyInput::Confirm(as_agent::UserConfirmResultEvent::new(state.reply_id.clone(), results))
}

/// One line describing a call: `Write {"file_path": …}`.
pub(crate) fn describe_call(call: &ToolCallBlock) -> String {
    let input: String = call.input.chars().take(200).collect();
    format!("{} {}", call.name, input)
}

/// Lines typed by the user, read on a thread (blocking stdin) and handed over a channel.
/// `None` means end of input (Ctrl-D).
pub(crate) fn stdin_lines() -> mpsc::UnboundedReceiver<Option<String>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        loop {
            let mut line = String::new();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(None);
                    return;
                }
                Ok(_) => {
                    let text = line.trim_end_matches(['\n', '\r']).to_owned();
                    if tx.send(Some(text)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// What the user did at a prompt.
enum Typed {
    Line(String),
    /// Ctrl-D.
    Eof,
    /// Ctrl-C.
    CtrlC,
}

/// Shows `text` as a prompt and waits for a line. A prompt that cannot be written (stdout closed
/// or full) is an error, like any other output.
async fn prompt(lines: &mut mpsc::UnboundedReceiver<Option<String>>, text: &str, colour: bool) -> CliResult<Typed> {
    let Ok(mut ctrl_c) = CtrlC::arm() else { return Ok(Typed::Eof) };
    if colour {
        crate::cmd::out(format_args!("\x1b[1m{text}\x1b[0m"))?;
    } else {
        crate::cmd::out(format_args!("{text}"))?;
    }
    Ok(tokio::select! {
        line = lines.recv() => match line {
            Some(Some(l)) => Typed::Line(l),
            _ => Typed::Eof,
        },
        () = ctrl_c.recv() => Typed::CtrlC,
    })
}

/// Asks about each parked call; `Ok(Err)` with how the user quit at the prompt (`Typed::Eof` or
/// `Typed::CtrlC`; the session stays parked), `Err` when stdout cannot be written.
async fn ask_confirmations(
    lines: &mut mpsc::UnboundedReceiver<Option<String>>,
    calls: &[ToolCallBlock],
    colour: bool,
) -> CliResult<Result<Vec<Answer>, Typed>> {
    let mut answers = Vec::new();
    for call in calls {
        let rules: Vec<String> = always_rules(call)
            .iter()
            .map(|r| format!("{} {}", r.tool_name, r.rule_content.as_deref().unwrap_or("(any input)")))
            .collect();
        outln!("The agent wants to run: {}", describe_call(call))?;
        loop {
            let q = format!("Allow? [y/n/a] (a = always, adds rule: {}) > ", rules.join(", "));
            match prompt(lines, &q, colour).await? {
                Typed::Line(l) => match l.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => break answers.push(Answer::Yes),
                    "n" | "no" => break answers.push(Answer::No),
                    "a" | "always" => break answers.push(Answer::Always),
                    _ => outln!("Please answer y, n or a.")?,
                },
                quit @ (Typed::Eof | Typed::CtrlC) => {
                    outln!("")?;
                    return Ok(Err(quit));
                }
            }
        }
    }
    Ok(Ok(answers))
}

/// `--workdir` (default: the current directory) as an absolute path with symlinks resolved: the
/// permission checks ("inside the working directory") compare real paths, and a directory that does
/// not exist is a usage error rather than a working directory nobody can be inside of.
fn working_dir(arg: Option<&std::path::Path>) -> Result<PathBuf, CliError> {
    let usage = |msg: String| CliError::new(ExitKind::Usage, msg);
    let Some(dir) = arg else {
        return std::env::current_dir().map_err(|e| usage(format!("no working directory: {e}")));
    };
    let real = std::fs::canonicalize(dir).map_err(|e| usage(format!("--workdir {}: {e}", dir.display())))?;
    if !real.is_dir() {
        return Err(usage(format!("--workdir {}: not a directory", dir.display())));
    }
    Ok(real)
}

/// Builds the agent for a session.
pub(crate) fn build_agent(
    name: &str,
    system_prompt: &str,
    model: SharedChatModel,
    max_iters: u32,
    workdir: PathBuf,
    toolkit: as_tools::Toolkit,
) -> CliResult<Agent> {
    Agent::builder(name, system_prompt, model)
        .toolkit(toolkit)
        .react_config(ReActConfig::default().with_max_iters(max_iters))
        .working_dir(workdir)
        .build()
        .map_err(|e| CliError::new(ExitKind::Usage, e.to_string()))
}

/// One line recalling where a resumed session stands (`None` for an empty one).
fn recap(state: &AgentState) -> Option<String> {
    let last = state.context.iter().rev().find_map(|m| m.get_text_content(" ").map(|t| (m.role, t)))?;
    let text: String = last.1.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = text.chars().take(100).collect();
    let more = if short.len() < text.len() { "…" } else { "" };
    Some(format!("({} messages so far; last, {}: {short}{more})", state.context.len(), last.0.as_str()))
}

/// The turn's outcome as an exit: failed → its code; else its output could not be written → 1 (the
/// turn is saved all the same); else interrupted by Ctrl-C → 130.
fn turn_exit(end: TurnEnd, sink: &mut dyn EventSink) -> CliResult {
    if let Some(e) = end.error {
        return Err(e);
    }
    if let Some(e) = sink.take_write_error() {
        return Err(crate::cmd::stdout_error(e));
    }
    if end.interrupted_by_user {
        return Err(CliError::silent(ExitKind::Interrupted));
    }
    Ok(())
}

/// Prints what a parked reply waits for (non-interactive modes).
fn report_parked(sink: &mut dyn EventSink, state: &AgentState, key: &SessionKey) {
    for call in asking_calls(state, &key.agent_id) {
        sink.note(
            Note::Warn,
            &format!(
                "waiting for confirmation: {} — answer with `agentscope chat --user {} --agent {} --session {} \
                 --model … --confirm yes|no|always`",
                describe_call(&call),
                key.user_id,
                key.agent_id,
                key.session_id
            ),
        );
    }
}

/// `chat` once the model and storage are ready (shared by the real command and the demo steps).
pub(crate) async fn chat_with(
    storage: SharedStorage,
    lock: Option<Arc<dyn as_agent::SessionLock>>,
    args: &ChatArgs,
    model: SharedChatModel,
    toolkit: as_tools::Toolkit,
    sink: &mut dyn EventSink,
) -> CliResult {
    // Checked before the session is opened: a bad --workdir creates nothing.
    let workdir = working_dir(args.workdir.as_deref())?;
    let (handle, mut state, created) = SessionHandle::open(
        storage,
        lock,
        &args.user,
        &args.agent,
        args.session.as_deref(),
        args.permission_mode.map(Into::into),
    )
    .await?;
    if created {
        eprintln!("new session {} (continue it with --session {})", handle.key.session_id, handle.key.session_id);
    }
    let agent = build_agent(&args.agent, &args.system_prompt, model, args.max_iters, workdir, toolkit)?;
    // From here on Ctrl-C is handled (interrupt or quit), never the default kill.
    let _armed = CtrlC::arm()?;
    drive(&agent, &handle, &mut state, args, sink).await
}

async fn drive(
    agent: &Agent,
    handle: &SessionHandle,
    state: &mut AgentState,
    args: &ChatArgs,
    sink: &mut dyn EventSink,
) -> CliResult {
    // Non-interactive: answer the parked calls.
    if let Some(answer) = args.confirm {
        let calls = asking_calls(state, &args.agent);
        if calls.is_empty() {
            return Err(CliError::new(
                ExitKind::Invalid,
                format!("session {} has no tool call waiting for confirmation; drop --confirm", handle.key.session_id),
            ));
        }
        let answers = vec![answer; calls.len()];
        let input = confirm_input(state, &calls, &answers);
        // A confirmation another process answered meanwhile ends as a conflict (the runner says so).
        let end = run_turn(agent, handle, state, input, sink).await?;
        if end.status == Some(ReplyStatus::Parked) {
            report_parked(sink, state, &handle.key);
        }
        turn_exit(end, sink)?;
        if args.message.is_none() {
            return Ok(());
        }
    }
    // Non-interactive: one turn.
    if let Some(text) = &args.message {
        let end = run_turn(agent, handle, state, ReplyInput::user_text(text.as_str()), sink).await?;
        if end.status == Some(ReplyStatus::Parked) {
            report_parked(sink, state, &handle.key);
        }
        return turn_exit(end, sink);
    }
    interactive(agent, handle, state, args, sink).await
}

async fn interactive(
    agent: &Agent,
    handle: &SessionHandle,
    state: &mut AgentState,
    args: &ChatArgs,
    sink: &mut dyn EventSink,
) -> CliResult {
    let colour = use_colour(std::io::stdout().is_terminal());
    let mut lines = stdin_lines();
    // The exit of the last turn when it failed: the exit status at the end of input.
    let mut last_failure: Option<ExitKind> = None;
    outln!("session {} — Ctrl-C interrupts a reply; Ctrl-C or Ctrl-D at the prompt quits", handle.key.session_id)?;
    if let Some(recap) = recap(state) {
        sink.note(Note::Info, &recap);
    }
    loop {
        // A parked reply is answered before anything else.
        let calls = asking_calls(state, &args.agent);
        let input = if !calls.is_empty() {
            let answers = match ask_confirmations(&mut lines, &calls, colour).await? {
                Ok(answers) => answers,
                Err(quit) => {
                    outln!("The session stays parked; the next chat on it asks again.")?;
                    // Ctrl-C is exit 130 wherever it is pressed (Ctrl-D is the end of input).
                    return if matches!(quit, Typed::CtrlC) {
                        Err(CliError::silent(ExitKind::Interrupted))
                    } else {
                        end_of_input(last_failure)
                    };
                }
            };
            confirm_input(state, &calls, &answers)
        } else {
            match prompt(&mut lines, "you> ", colour).await? {
                Typed::Line(l) if l.trim().is_empty() => continue,
                Typed::Line(l) => ReplyInput::user_text(l),
                Typed::Eof => {
                    outln!("")?;
                    return end_of_input(last_failure);
                }
                Typed::CtrlC => {
                    outln!("")?;
                    return Err(CliError::silent(ExitKind::Interrupted));
                }
            }
        };
        let end = run_turn(agent, handle, state, input, sink).await?;
        // The turn is saved; a reply that could not be shown ends the chat (exit 1).
        if let Some(e) = sink.take_write_error() {
            return Err(crate::cmd::stdout_error(e));
        }
        // A turn that failed saved what it did; a person can try again or quit.
        last_failure = end.error.map(|e| {
            sink.error(&format!("error: {e}"));
            e.kind()
        });
    }
}

/// The exit at the end of input (Ctrl-D): the last turn's when it failed (its error is already on
/// stderr), else 0. cli.md gives the codes, not this rule; `chat --help` states it.
fn end_of_input(last_failure: Option<ExitKind>) -> CliResult {
    last_failure.map_or(Ok(()), |kind| Err(CliError::silent(kind)))
}

/// The tools of `chat` (and the demo): the built-in Read, Write, Edit, Glob, Grep and Bash.
pub(crate) fn default_toolkit() -> as_tools::Toolkit {
    let mut toolkit = as_tools::Toolkit::new();
    for tool in as_tools::builtin::builtin_tools() {
        toolkit.register(tool);
    }
    toolkit
}

/// `chat`.
pub(crate) async fn run(global: &crate::GlobalArgs, args: ChatArgs) -> CliResult {
    if args.json && args.message.is_none() && args.confirm.is_none() {
        return Err(CliError::new(
            ExitKind::Usage,
            "--json prints the event stream of one turn: add --message TEXT (or --confirm ANSWER)",
        ));
    }
    let spec = crate::provider::resolve(&args.model, args.base_url.as_deref(), &|v| std::env::var(v).ok())?;
    let model = crate::provider::build(&spec)?;
    let (storage, lock) = crate::storage_url::open_for_turns(global.storage.as_deref()).await?;
    let mut human = HumanSink::stdout();
    let mut json = JsonSink::default();
    let sink: &mut dyn EventSink = if args.json { &mut json } else { &mut human };
    let result = chat_with(storage.clone(), lock, &args, model, default_toolkit(), sink).await;
    let _ = storage.close().await;
    result
}

#[cfg(test)]
mod tests {
    use as_model::{ScriptedModel, ScriptedTurn};

    use super::*;

    struct Quiet;

    impl EventSink for Quiet {
        fn event(&mut self, _event: &AgentEvent) {}
        fn note(&mut self, _note: Note, _text: &str) {}
    }

    /// Two `chat --confirm yes` on one parked session: the one that takes the session second finds
    /// the call answered by the first. A concurrent writer won: exit 4, not 5 ("invalid input").
    #[tokio::test]
    async fn a_confirmation_answered_by_another_process_meanwhile_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let storage: SharedStorage = Arc::new(as_storage::InMemoryStorage::new());
        storage.open().await.unwrap();
        let input = as_message::json!({"file_path": dir.path().join("n.txt"), "content": "x"}).to_string();
        let model = Arc::new(ScriptedModel::new(
            "scripted",
            vec![ScriptedTurn::new().tool_call("c1", "Write", input), ScriptedTurn::new().text("Saved.")],
        ));
        let workdir = dir.path().to_path_buf();
        let agent = build_agent("friday", "sys", model, 5, workdir.clone(), default_toolkit()).unwrap();
        let (handle, mut state, _) =
            SessionHandle::open(storage, None, "alice", "friday", None, Some(PermissionMode::Default)).await.unwrap();
        let end = run_turn(&agent, &handle, &mut state, ReplyInput::user_text("Write it."), &mut Quiet).await.unwrap();
        assert_eq!(end.status, Some(ReplyStatus::Parked));
        // The second process loaded the parked session; then the first answered it.
        let mut loaded_by_second = state.clone();
        let calls = asking_calls(&state, "friday");
        let input = confirm_input(&state, &calls, &[Answer::Yes]);
        let end = run_turn(&agent, &handle, &mut state, input, &mut Quiet).await.unwrap();
        assert_eq!(end.status, Some(ReplyStatus::Completed));

        let args = ChatArgs {
            user: "alice".into(),
            agent: "friday".into(),
            session: Some(handle.key.session_id.clone()),
            model: "openai:m".into(),
            base_url: None,
            system_prompt: "sys".into(),
            permission_mode: None,
            max_iters: 5,
            workdir: Some(workdir),
            message: None,
            json: false,
            confirm: Some(Answer::Yes),
        };
        let err = drive(&agent, &handle, &mut loaded_by_second, &args, &mut Quiet).await.unwrap_err();
        assert_eq!(err.kind(), ExitKind::Conflict, "{err}");
        assert!(err.to_string().contains("another process answered"), "{err}");
    }
}
