//! `agentscope demo`: the seed's session lifecycle, offline, each turn in a separate process.
//!
//! The parent runs `agentscope demo-step STEP …` (a hidden command) as a child process per step,
//! against one store. A child is the real chat code path ([`crate::cmd::chat::run_turn`]) with a
//! [`ScriptedModel`] playing that step's answer; it reports what the model received (the messages
//! of every request) as a JSON line on stdout and renders the reply on stderr. The parent checks
//! the report, the child's exit code and the stored session, then prints what the step proved and
//! a pass/fail line.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use as_agent::{AgentEvent, ReplyInput, ReplyStatus};
use as_message::{ContentBlock, JsonValue, Msg, PermissionMode, Role, ToolCallState, json};
use as_model::{ScriptedModel, ScriptedTurn};
use as_state::AgentState;
use as_storage::{SessionKey, SharedStorage};
use as_tools::Toolkit;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::GlobalArgs;
use crate::cmd::chat::{self, Answer, EventSink, SessionHandle};
use crate::cmd::outln;
use crate::exit::{CliError, CliResult, ExitKind};
use crate::render::{Note, Renderer, use_colour};

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  agentscope demo
  agentscope --storage redis://127.0.0.1:6379/0 demo

Runs offline with a scripted model (no key, no network) against a temporary SQLite file, or the --storage
you give on its command line (an exported AGENTSCOPE_STORAGE is not used: the demo leaves a demo-user
session behind in the store it runs on). Each step starts a new `agentscope` process, so everything a later step sees came through the
store. Steps: a turn, then a new process that remembers it; a reply interrupted mid-stream by a real SIGINT
and resumed; a tool confirmation parked, then answered from a new process; a reply stopped at its iteration
bound. Exit code 1 when any step fails.")]
pub(crate) struct DemoArgs {
    /// Keep the temporary directory (store and working files) and print its path.
    #[arg(long)]
    pub(crate) keep: bool,
}

/// The scripted steps a child process can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Step {
    /// "My name is Ada." in a new session.
    Remember1,
    /// "What is my name?" in the same session.
    Remember2,
    /// A story interrupted mid-stream (the model stalls until the process gets SIGINT).
    Interrupt1,
    /// "Please go on." after the interruption.
    Interrupt2,
    /// A Write call that needs permission: parks.
    Confirm1,
    /// The parked call answered yes.
    Confirm2,
    /// A reply bounded to 2 iterations by a model that keeps calling tools.
    MaxIters,
}

/// Arguments of the hidden `demo-step` command.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoStepArgs {
    /// Which step.
    #[arg(value_enum)]
    pub(crate) step: Step,
    /// The session (absent: a new one).
    #[arg(long)]
    pub(crate) session: Option<String>,
    /// The working directory of the tools.
    #[arg(long)]
    pub(crate) workdir: PathBuf,
}

const USER: &str = "demo-user";
const AGENT: &str = "friday";
const STORY_PARTIAL: &str = "Once upon a time, a small robot ";

/// The user input, the model's scripted turns and the settings of a step.
struct Script {
    input: Option<&'static str>,
    confirm: Option<Answer>,
    turns: Vec<ScriptedTurn>,
    max_iters: u32,
    mode: Option<PermissionMode>,
}

fn note_path(workdir: &Path) -> PathBuf {
    workdir.join("note.txt")
}

fn script(step: Step, workdir: &Path) -> Script {
    let note = note_path(workdir).to_string_lossy().into_owned();
    let base = Script { input: None, confirm: None, turns: Vec::new(), max_iters: 10, mode: None };
    match step {
        Step::Remember1 => Script {
            input: Some("My name is Ada."),
            turns: vec![
                ScriptedTurn::new()
                    .thinking("The user introduced herself.")
                    .text_chunks(["Nice to meet you, ", "Ada!"]),
            ],
            ..base
        },
        Step::Remember2 => Script {
            input: Some("What is my name?"),
            turns: vec![ScriptedTurn::new().text_chunks(["Your name is ", "Ada."])],
            ..base
        },
        Step::Interrupt1 => Script {
            input: Some("Tell me a long story."),
            turns: vec![
                ScriptedTurn::new()
                    .text_chunks(["Once upon a time, ", "a small robot "])
                    .pause()
                    .text("(this part is never streamed)"),
            ],
            ..base
        },
        Step::Interrupt2 => Script {
            input: Some("Please go on."),
            turns: vec![ScriptedTurn::new().text("…learned to dream, and the story ends there.")],
            ..base
        },
        Step::Confirm1 => Script {
            input: Some("Write my name into note.txt."),
            turns: vec![ScriptedTurn::new().text("I'll save it.").tool_call(
                "call_note",
                "Write",
                json!({"file_path": note, "content": "Ada\n"}).to_string(),
            )],
            mode: Some(PermissionMode::Default),
            ..base
        },
        Step::Confirm2 => Script {
            confirm: Some(Answer::Yes),
            turns: vec![ScriptedTurn::new().text("Saved your name to note.txt.")],
            ..base
        },
        Step::MaxIters => Script {
            input: Some("Keep re-reading note.txt until it changes."),
            turns: (0..2)
                .map(|i| {
                    ScriptedTurn::new().tool_call(
                        format!("call_read_{i}"),
                        "Read",
                        json!({"file_path": note}).to_string(),
                    )
                })
                .collect(),
            max_iters: 2,
            // Read-only tools run without asking in explore mode.
            mode: Some(PermissionMode::Explore),
            ..base
        },
    }
}

/// What a child reports on its last stdout line.
fn report(session: &str, status: Option<ReplyStatus>, model: &ScriptedModel, events: &[String]) -> JsonValue {
    let inputs: Vec<Vec<String>> =
        model.requests().iter().map(|r| r.messages.iter().map(describe_msg).collect()).collect();
    let status = match status {
        Some(ReplyStatus::Completed) => "completed",
        Some(ReplyStatus::Parked) => "parked",
        Some(ReplyStatus::Interrupted) => "interrupted",
        Some(ReplyStatus::ExceedMaxIters) => "exceed_max_iters",
        Some(ReplyStatus::NoOp) => "noop",
        None => "failed",
    };
    json!({"report": {"session": session, "status": status, "model_inputs": inputs, "events": events, "pid": std::process::id()}})
}

/// `role: text` of a message, with tool calls and results summarised.
fn describe_msg(m: &Msg) -> String {
    let parts: Vec<String> = m
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ToolCall(c) => format!("[call {}]", c.name),
            ContentBlock::ToolResult(r) => format!("[result {}: {}]", r.name, r.output.text().trim()),
            ContentBlock::Thinking(_) => String::new(),
            other => format!("[{}]", other.block_type().as_str()),
        })
        .filter(|s| !s.is_empty())
        .collect();
    format!("{}: {}", m.role.as_str(), parts.join(" "))
}

/// Renders on stderr and remembers each event's type.
struct StepSink {
    renderer: Renderer,
    types: Vec<String>,
}

impl EventSink for StepSink {
    fn event(&mut self, event: &AgentEvent) {
        self.types.push(as_message::to_json(&event.event_type()).trim_matches('"').to_owned());
        let _ = self.renderer.event(&mut std::io::stderr().lock(), event);
    }

    fn note(&mut self, note: Note, text: &str) {
        let _ = self.renderer.note(&mut std::io::stderr().lock(), note, text);
    }
}

/// The tools of the demo agent: the built-in file tools.
fn demo_toolkit() -> Toolkit {
    crate::cmd::chat::default_toolkit()
}

/// `demo-step`: one step in this process.
pub(crate) async fn run_step(global: &GlobalArgs, args: DemoStepArgs) -> CliResult {
    let (storage, lock) = crate::storage_url::open_for_turns(global.storage.as_deref()).await?;
    let s = script(args.step, &args.workdir);
    let model = Arc::new(ScriptedModel::new("scripted-demo", s.turns));
    let (handle, mut state, _) =
        SessionHandle::open(storage.clone(), lock, USER, AGENT, args.session.as_deref(), s.mode).await?;
    let agent = chat::build_agent(
        AGENT,
        "You are Friday, a helpful assistant.",
        model.clone(),
        s.max_iters,
        args.workdir.clone(),
        demo_toolkit(),
    )?;
    // Tell the parent when the model stalls mid-stream, so it can send a real SIGINT.
    let gate = model.pause_gate();
    let watcher = tokio::spawn(async move {
        gate.wait_paused().await;
        // The parent reads this line; with it gone there is nobody to tell.
        let _ = outln!("{}", json!({"paused": true}));
    });
    let input = match (s.input, s.confirm) {
        (_, Some(answer)) => {
            let calls = chat::asking_calls(&state, AGENT);
            let answers = vec![answer; calls.len()];
            chat::confirm_input(&state, &calls, &answers)
        }
        (Some(text), None) => ReplyInput::user_text(text),
        (None, None) => ReplyInput::none(),
    };
    let mut sink = StepSink { renderer: Renderer::new(use_colour(false)), types: Vec::new() };
    if let Some(answer) = s.confirm {
        let _ = sink.renderer.note(&mut std::io::stderr().lock(), Note::Info, &format!("(answering {answer:?})"));
    }
    let end = chat::run_turn(&agent, &handle, &mut state, input, &mut sink).await;
    let _ = storage.close().await;
    let end = end?;
    for call in chat::asking_calls(&state, AGENT) {
        sink.note(
            Note::Warn,
            &format!(
                "waiting for confirmation: {} (the process exits; the session stays parked)",
                chat::describe_call(&call)
            ),
        );
    }
    watcher.abort();
    outln!("{}", report(&handle.key.session_id, end.status, &model, &sink.types))?;
    if let Some(e) = end.error {
        return Err(e);
    }
    if end.interrupted_by_user {
        return Err(CliError::silent(ExitKind::Interrupted));
    }
    Ok(())
}

/// What a finished child gave back.
#[derive(Debug, Default)]
struct ChildRun {
    pid: u32,
    code: Option<i32>,
    report: Option<JsonValue>,
    stderr: String,
}

impl ChildRun {
    fn field(&self, name: &str) -> JsonValue {
        self.report.as_ref().and_then(|r| r.get(name)).cloned().unwrap_or(JsonValue::Null)
    }

    fn status(&self) -> String {
        self.field("status").as_str().unwrap_or("none").to_owned()
    }

    fn session(&self) -> Option<String> {
        self.field("session").as_str().map(str::to_owned)
    }

    /// The messages of the model's `i`-th request.
    fn model_input(&self, i: usize) -> Vec<String> {
        self.field("model_inputs")
            .get(i)
            .and_then(JsonValue::as_array)
            .map(|a| a.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }

    fn events(&self) -> Vec<String> {
        self.field("events")
            .as_array()
            .map(|a| a.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}

/// Runs `demo-step STEP` as a child; when `interrupt_when_paused`, sends it SIGINT once its model stalls.
async fn run_child(
    storage_url: &str,
    step: Step,
    session: Option<&str>,
    workdir: &Path,
    interrupt_when_paused: bool,
) -> CliResult<ChildRun> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot find the agentscope executable: {e}")))?;
    let mut cmd = tokio::process::Command::new(exe);
    // The URL may hold a password: the environment, not the command line (which `ps` shows).
    cmd.env("AGENTSCOPE_STORAGE", storage_url).arg("demo-step");
    cmd.arg(step_name(step)).arg("--workdir").arg(workdir);
    if let Some(s) = session {
        cmd.arg("--session").arg(s);
    }
    cmd.env("NO_COLOR", "1").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        cmd.spawn().map_err(|e| CliError::new(ExitKind::Failed, format!("cannot start a demo process: {e}")))?;
    let pid = child.id().unwrap_or_default();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let err_task = tokio::spawn(async move {
        let mut text = String::new();
        if let Some(e) = stderr {
            let mut lines = BufReader::new(e).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                text.push_str(&l);
                text.push('\n');
            }
        }
        text
    });
    let mut run = ChildRun { pid, ..ChildRun::default() };
    if let Some(out) = stdout {
        let mut lines = BufReader::new(out).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(value) = serde_json::from_str::<JsonValue>(&line) else { continue };
            if value.get("paused").is_some() && interrupt_when_paused {
                send_sigint(pid)?;
            }
            if let Some(r) = value.get("report") {
                run.report = Some(r.clone());
            }
        }
    }
    let status = child.wait().await.map_err(|e| CliError::new(ExitKind::Failed, format!("demo process: {e}")))?;
    run.code = status.code();
    run.stderr = err_task.await.unwrap_or_default();
    Ok(run)
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::Remember1 => "remember1",
        Step::Remember2 => "remember2",
        Step::Interrupt1 => "interrupt1",
        Step::Interrupt2 => "interrupt2",
        Step::Confirm1 => "confirm1",
        Step::Confirm2 => "confirm2",
        Step::MaxIters => "max-iters",
    }
}

#[cfg(unix)]
fn send_sigint(pid: u32) -> CliResult {
    let pid = i32::try_from(pid).map_err(|_| CliError::new(ExitKind::Failed, "bad pid"))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT)
        .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot send SIGINT: {e}")))
}

#[cfg(not(unix))]
fn send_sigint(_pid: u32) -> CliResult {
    Err(CliError::new(ExitKind::Failed, "the interrupt step needs a Unix system"))
}

fn code(c: Option<i32>) -> String {
    c.map_or_else(|| "by a signal".to_owned(), |c| c.to_string())
}

/// One check's verdict.
struct Check {
    ok: bool,
    detail: String,
}

fn check(ok: bool, detail: impl Into<String>) -> Check {
    Check { ok, detail: detail.into() }
}

/// The stored state of the demo session.
async fn stored(storage: &SharedStorage, session: &str) -> CliResult<AgentState> {
    let key = SessionKey::new(USER, AGENT, session);
    match storage.get_session(&key).await? {
        Some(r) => Ok(r.state),
        None => Err(CliError::new(ExitKind::NotFound, format!("session {session} is not in the store"))),
    }
}

fn last_assistant_text(state: &AgentState) -> String {
    state
        .context
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .and_then(|m| m.get_text_content(""))
        .unwrap_or_default()
}

/// The demo's output: steps, what each proves, and verdicts.
struct Printer {
    colour: bool,
    passed: usize,
    failed: usize,
}

impl Printer {
    fn step(&self, n: usize, title: &str) -> CliResult {
        let bold = if self.colour { "\x1b[1m" } else { "" };
        let reset = if self.colour { "\x1b[0m" } else { "" };
        outln!("\n{bold}[{n}/7] {title}{reset}")
    }

    fn child_output(&self, run: &ChildRun) -> CliResult {
        for line in run.stderr.lines().filter(|l| !l.trim().is_empty()) {
            outln!("      | {line}")?;
        }
        Ok(())
    }

    fn verdict(&mut self, proves: &str, checks: &[Check]) -> CliResult {
        outln!("      proves: {proves}")?;
        let ok = checks.iter().all(|c| c.ok);
        let (good, bad, reset) = if self.colour { ("\x1b[32m", "\x1b[31m", "\x1b[0m") } else { ("", "", "") };
        for c in checks {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            outln!("      {mark} {}", c.detail)?;
        }
        if ok {
            self.passed += 1;
            outln!("      {good}PASS{reset}")
        } else {
            self.failed += 1;
            outln!("      {bad}FAIL{reset}")
        }
    }
}

/// The `--storage` help of `demo`, which never uses the default store or `AGENTSCOPE_STORAGE` (see [`run`]).
const DEMO_STORAGE_HELP: &str = "The store the demo runs on: `sqlite:PATH` or `redis://…` (not `memory`: each \
     step is a new process) [default: a temporary SQLite file; AGENTSCOPE_STORAGE is ignored]";

/// `command` with the demo's own `--storage` help. The global `--storage`, which clap copies into
/// every subcommand, names the default store and `[env: AGENTSCOPE_STORAGE]`, neither of which the
/// demo uses; clap copies a global argument only into subcommands without one of that id, so the
/// demo's copy (the same argument, parsed the same way, another help) takes its place.
pub(crate) fn with_storage_help(command: clap::Command) -> clap::Command {
    let Some(global) = command.get_arguments().find(|a| a.get_id() == "storage").cloned() else { return command };
    let demo_storage = global.help(DEMO_STORAGE_HELP).hide_env(true);
    command.mut_subcommands(|sub| if sub.get_name() == "demo" { sub.arg(demo_storage.clone()) } else { sub })
}

/// `demo`.
pub(crate) async fn run(global: &GlobalArgs, args: DemoArgs) -> CliResult {
    let temp = tempfile::Builder::new()
        .prefix("agentscope-demo-")
        .tempdir()
        .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot create a temporary directory: {e}")))?;
    let workdir = temp.path().join("work");
    std::fs::create_dir_all(&workdir)
        .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot create {}: {e}", workdir.display())))?;
    // Only a --storage typed for the demo: an exported AGENTSCOPE_STORAGE may be a real store, and
    // the demo would leave its demo-user session there.
    let given = match &global.storage {
        Some(_) if global.storage_from_env => {
            eprintln!(
                "note: the demo does not use AGENTSCOPE_STORAGE; it runs on a temporary SQLite file (give --storage \
                 to run it on a store)"
            );
            None
        }
        given => given.as_ref(),
    };
    let url = match given {
        Some(u) if u.trim().starts_with("memory") => {
            return Err(CliError::new(
                ExitKind::Usage,
                "the demo runs every turn in a new process, so it needs a store they share: use sqlite:PATH or \
                 redis://…, or leave out --storage for a temporary SQLite file",
            ));
        }
        Some(u) => u.clone(),
        None => format!("sqlite:{}", temp.path().join("demo.db").display()),
    };
    let storage = crate::storage_url::open(Some(&url)).await?;
    let colour = use_colour(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let mut p = Printer { colour, passed: 0, failed: 0 };
    let header = outln!("agentscope demo: a session's lifecycle, offline (scripted model), every turn a new process")
        .and_then(|()| outln!("storage: {}", as_storage_redis::redact_url(&url)));
    let result = match header {
        Ok(()) => steps(&mut p, &storage, &url, &workdir).await,
        Err(e) => Err(e),
    };
    let _ = storage.close().await;
    // A step that failed is one more failed step; stdout that cannot be written ends the demo
    // here (exit 1), when this line cannot be written either.
    if let Err(e) = &result {
        p.failed += 1;
        outln!("      FAIL {e}")?;
    }
    outln!("\n{} passed, {} failed", p.passed, p.failed)?;
    if args.keep {
        let kept = temp.keep();
        outln!("kept {}", kept.display())?;
    }
    if p.failed > 0 { Err(CliError::silent(ExitKind::Failed)) } else { Ok(()) }
}

async fn steps(p: &mut Printer, storage: &SharedStorage, url: &str, workdir: &Path) -> CliResult {
    // 1. Turn 1 in a new session.
    p.step(1, "turn 1 in a new process: \"My name is Ada.\"")?;
    let r1 = run_child(url, Step::Remember1, None, workdir, false).await?;
    p.child_output(&r1)?;
    let Some(session) = r1.session() else {
        p.verdict("a turn is saved", &[check(false, format!("no report from the process (exit {})", code(r1.code)))])?;
        return Ok(());
    };
    let st = stored(storage, &session).await?;
    p.verdict(
        "a turn is written to the store before the process exits",
        &[
            check(r1.code == Some(0), format!("process {} exited {}", r1.pid, code(r1.code))),
            check(r1.status() == "completed", format!("reply {}", r1.status())),
            check(st.context.len() == 2, format!("session {session} stores {} messages", st.context.len())),
        ],
    )?;

    // 2. Turn 2 in another process remembers.
    p.step(2, "turn 2 in another process: \"What is my name?\"")?;
    let r2 = run_child(url, Step::Remember2, Some(&session), workdir, false).await?;
    p.child_output(&r2)?;
    let input = r2.model_input(0);
    let saw_name = input.iter().any(|m| m == "user: My name is Ada.");
    let saw_reply = input.iter().any(|m| m == "assistant: Nice to meet you, Ada!");
    p.verdict(
        "a new process resumes the session from the store: the model's input holds turn 1",
        &[
            check(r2.pid != r1.pid && r2.code == Some(0), format!("process {} exited {}", r2.pid, code(r2.code))),
            check(saw_name, format!("the model received \"My name is Ada.\" (written by process {})", r1.pid)),
            check(saw_reply, "the model received its own turn-1 answer \"Nice to meet you, Ada!\""),
        ],
    )?;

    // 3. A reply interrupted mid-stream by SIGINT.
    p.step(3, "a reply interrupted mid-stream (the model stalls; the demo sends the process SIGINT)")?;
    let r3 = run_child(url, Step::Interrupt1, Some(&session), workdir, true).await?;
    p.child_output(&r3)?;
    let st = stored(storage, &session).await?;
    let partial = last_assistant_text(&st);
    p.verdict(
        "Ctrl-C interrupts a running reply and the partial answer is saved (exit code 130)",
        &[
            check(r3.code == Some(130), format!("process {} exited {} after SIGINT", r3.pid, code(r3.code))),
            check(
                r3.events().iter().any(|e| e == "REPLY_END") && r3.status() == "interrupted",
                format!("reply {}", r3.status()),
            ),
            check(partial == STORY_PARTIAL, format!("stored partial answer {partial:?}")),
        ],
    )?;

    // 4. Resumed in another process.
    p.step(4, "the interrupted conversation continues in another process: \"Please go on.\"")?;
    let r4 = run_child(url, Step::Interrupt2, Some(&session), workdir, false).await?;
    p.child_output(&r4)?;
    let input = r4.model_input(0);
    let wanted = format!("assistant: {STORY_PARTIAL}");
    p.verdict(
        "the interrupted partial answer is part of the context the model sees next",
        &[
            check(
                r4.code == Some(0) && r4.status() == "completed",
                format!("reply {}, process {} exited {}", r4.status(), r4.pid, code(r4.code)),
            ),
            check(input.contains(&wanted), format!("the model received {wanted:?}")),
        ],
    )?;

    // 5. A tool confirmation parks the session.
    p.step(5, "a tool call that needs permission: \"Write my name into note.txt.\"")?;
    let r5 = run_child(url, Step::Confirm1, Some(&session), workdir, false).await?;
    p.child_output(&r5)?;
    let st = stored(storage, &session).await?;
    let asking = chat::asking_calls(&st, AGENT);
    p.verdict(
        "the reply parks on the confirmation and the process exits; the store keeps the asking call",
        &[
            check(
                r5.code == Some(0) && r5.status() == "parked",
                format!("reply {}, process {} exited {}", r5.status(), r5.pid, code(r5.code)),
            ),
            check(
                asking.len() == 1 && asking[0].name == "Write" && asking[0].state == ToolCallState::Asking,
                format!(
                    "stored: {} call(s) waiting: {:?}",
                    asking.len(),
                    asking.iter().map(|c| c.name.as_str()).collect::<Vec<_>>()
                ),
            ),
            check(!note_path(workdir).exists(), "note.txt not written yet"),
        ],
    )?;

    // 6. Answered from another process.
    p.step(6, "the confirmation answered \"yes\" from another process")?;
    let r6 = run_child(url, Step::Confirm2, Some(&session), workdir, false).await?;
    p.child_output(&r6)?;
    let note = std::fs::read_to_string(note_path(workdir)).unwrap_or_default();
    let input = r6.model_input(0);
    let st = stored(storage, &session).await?;
    p.verdict(
        "a parked reply resumes in a new process: the tool runs and the model sees its result",
        &[
            check(
                r6.code == Some(0) && r6.status() == "completed",
                format!("reply {}, process {} exited {}", r6.status(), r6.pid, code(r6.code)),
            ),
            check(note == "Ada\n", format!("note.txt holds {note:?}")),
            check(input.iter().any(|m| m.contains("[result Write")), "the model received the Write result"),
            check(chat::asking_calls(&st, AGENT).is_empty(), "nothing is waiting any more"),
        ],
    )?;

    // 7. The iteration bound.
    p.step(7, "a model that keeps calling tools, bounded to 2 iterations")?;
    let r7 = run_child(url, Step::MaxIters, Some(&session), workdir, false).await?;
    p.child_output(&r7)?;
    let st = stored(storage, &session).await?;
    p.verdict(
        "the reply stops at --max-iters with EXCEED_MAX_ITERS, and that state is saved too",
        &[
            check(
                r7.code == Some(0) && r7.status() == "exceed_max_iters",
                format!("reply {}, process {} exited {}", r7.status(), r7.pid, code(r7.code)),
            ),
            check(r7.events().iter().any(|e| e == "EXCEED_MAX_ITERS"), "EXCEED_MAX_ITERS was streamed"),
            check(st.cur_iter == 2, format!("stored cur_iter = {}", st.cur_iter)),
        ],
    )?;
    Ok(())
}
