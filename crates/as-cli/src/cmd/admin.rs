//! Session administration: `sessions export | import | validate` and the `show --summary` view.
//!
//! The export format is JSON lines, one session per line:
//!
//! ```text
//! {"kind":"session","record":{…the stored SessionRecord…},"messages":[…the session's message log…]}
//! ```
//!
//! `record` is the record exactly as stored (the bytes AgentScope Python or our writer wrote, line
//! breaks between tokens turned into spaces); `messages` the session's message log in order. `import` also accepts a bare `SessionRecord` per line (a dump
//! made by other tools).
//!
//! **Lossless.** `import` writes each record with [`as_storage::StorageBase::import_record`],
//! which stores it verbatim (`created_at`, `updated_at`, `source`, `source_schedule_id`,
//! `team_id`, config and state as exported) together with its index entries and its message log,
//! in one atomic write. So export → import into any backend → export gives the same bytes
//! (the e2e tests check SQLite → Redis and SQLite → SQLite byte for byte) for every record our
//! writer made. One field differs for a record AgentScope 2.0.4 wrote: like every write of ours,
//! the import sets `state.session_id` to the record id (2.0.4 leaves a fresh, unrelated id there
//! until its chat service overwrites it on the first load); an unknown field of a newer writer is
//! dropped too. A third-party backend
//! that does not implement `import_record` (it reports `Unsupported`) is still imported through
//! `upsert_session` + `upsert_message`, with a warning that the store then sets the timestamps and
//! drops `team_id`.
//!
//! **Scope.** `export` takes `--user` (`validate` optionally: without it every user,
//! [`as_storage::StorageBase::list_users`]) and optionally one or more `--agent`; without `--agent`
//! they cover every agent of the user ([`as_storage::StorageBase::list_agents`]; a backend that
//! cannot list agents asks for `--agent`, one that cannot list users asks for `--user`). Lines come out per agent (sorted), then
//! newest session first, so two exports of equal stores are byte-identical.

use super::outln;
use crate::cmd::sessions::printable;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use as_message::{ContentBlock, JsonValue, Msg, Role, ToolCallState};
use as_storage::{
    ImportMode, Owner, PageRequest, SessionKey, SessionRecord, SharedStorage, StorageErrorKind, UpsertSession,
    validate_id,
};

use crate::exit::{CliError, CliResult, ExitKind};

/// The `kind` tag of an export line.
pub(crate) const EXPORT_KIND: &str = "session";

/// Sessions fetched per `list_sessions` page.
const PAGE: usize = 100;

/// Arguments of `sessions export`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  agentscope sessions export --user alice > alice.jsonl
  agentscope sessions export --user alice --agent friday --agent helper > some.jsonl
  agentscope --storage redis://127.0.0.1:6379 sessions import alice.jsonl

Each line is {\"kind\":\"session\",\"record\":{…},\"messages\":[…]}: the stored record (exact JSON,
timestamps and team included) and the session's message log. Without --agent, every agent of the
user is exported. Lines are ordered by agent, then newest session first; prints `exported N sessions
(M messages)` on stderr. A session that cannot be read is left out and named on stderr (exit 1); an
unreachable store is exit 6.")]
pub(crate) struct ExportArgs {
    /// The user whose sessions to export.
    #[arg(long)]
    pub(crate) user: String,
    /// Only these agents' sessions (repeatable; default: every agent of the user).
    #[arg(long = "agent", value_name = "AGENT")]
    pub(crate) agents: Vec<String>,
}

/// Arguments of `sessions import`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  agentscope --storage sqlite:old.db sessions export --user alice > alice.jsonl
  agentscope --storage redis://127.0.0.1:6379/0 sessions import alice.jsonl
  agentscope --storage redis://127.0.0.1:6379/0 sessions import --overwrite alice.jsonl
  cat *.jsonl | agentscope sessions import -

Prints one summary line: `imported N sessions (M messages), skipped K existing, F failed`.
A progress bar is drawn on stderr when stderr is a terminal. Each session is written verbatim
(created_at, updated_at, source, schedule, team_id, config, state) with its message log, in one
atomic write per session, so exporting the target afterwards gives the same bytes. Sessions that
already exist in the target are skipped unless --overwrite is given; an id owned by another agent
of the user is never taken over (counted as failed). Exit 1 when any line failed; an unreachable
store stops the import (exit 6).")]
pub(crate) struct ImportArgs {
    /// The JSON-lines file written by `sessions export` (`-` reads stdin).
    pub(crate) file: PathBuf,
    /// Replace sessions that already exist in the target (the record and its whole message log).
    #[arg(long)]
    pub(crate) overwrite: bool,
}

/// Arguments of `sessions validate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  agentscope sessions validate
  agentscope sessions validate --user alice
  agentscope sessions validate --user alice --agent friday --agent helper

Reads every session of every user (or of one user, or of the named agents only) and its message log, parses them
against the wire model
(reporting the JSON path of the first error), validates them against the published JSON Schemas
(`agentscope schema session-record`, `msg`) and checks the invariants (ids, owner, tool call
bookkeeping). Prints `bad  <user>/<agent>/<session>  <why>` per bad record and a final count; exit 1
when any record is bad.")]
pub(crate) struct ValidateArgs {
    /// The user whose sessions to check (default: every user in the store).
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// Only these agents' sessions (repeatable; needs --user; default: every agent of the user).
    #[arg(long = "agent", value_name = "AGENT", requires = "user")]
    pub(crate) agents: Vec<String>,
}

/// The users to cover: the one named, or every user in the store.
pub(crate) async fn users_of(storage: &SharedStorage, named: Option<&str>) -> CliResult<Vec<String>> {
    if let Some(user) = named {
        return Ok(vec![user.to_owned()]);
    }
    match storage.list_users().await {
        Ok(users) => Ok(users),
        Err(e) if e.kind() == StorageErrorKind::Unsupported => Err(CliError::new(
            ExitKind::Usage,
            format!("the {} store cannot list its users; name one with --user", storage.backend_name()),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The agents to cover: the ones named, or (none named) every agent of `user` in the store.
pub(crate) async fn agents_of(storage: &SharedStorage, user: &str, named: &[String]) -> CliResult<Vec<String>> {
    validate_id("user_id", user)?;
    if !named.is_empty() {
        // Each agent once, in the order given (`--agent a --agent a` exports its sessions once).
        let mut seen = std::collections::HashSet::new();
        return Ok(named.iter().filter(|a| seen.insert(a.as_str())).cloned().collect());
    }
    match storage.list_agents(user).await {
        Ok(agents) => Ok(agents),
        Err(e) if e.kind() == StorageErrorKind::Unsupported => Err(CliError::new(
            ExitKind::Usage,
            format!("the {} store cannot list the agents of a user; name them with --agent", storage.backend_name()),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Every session id of `owner`, newest first, following the pagination to the end.
/// Records the backend could not read come back in the second list.
/// Each unreadable record is reported once, though a backend may report it on every page.
async fn all_sessions(storage: &SharedStorage, owner: &Owner) -> CliResult<(Vec<String>, Vec<(String, String)>)> {
    let mut ids = Vec::new();
    let mut bad = std::collections::BTreeMap::new();
    let mut page = PageRequest::first(PAGE);
    loop {
        let got = storage.list_sessions(owner, &page).await?;
        ids.extend(got.sessions.into_iter().map(|s| s.id));
        for e in got.errors {
            bad.entry(e.session_id).or_insert_with(|| e.error.to_string());
        }
        match got.next_cursor {
            Some(c) => page.cursor = Some(c),
            None => break,
        }
    }
    Ok((ids, bad.into_iter().collect()))
}

/// One export line for `record` and its message log.
#[cfg(test)]
pub(crate) fn export_line(record: &SessionRecord, messages: &[Msg]) -> String {
    export_line_raw(&record.to_canonical_json(), messages)
}

/// One export line for a record given as its stored JSON text (valid JSON: a raw line break in it can
/// only be whitespace between tokens, and becomes a space so the line stays one line).
pub(crate) fn export_line_raw(record: &str, messages: &[Msg]) -> String {
    let record = record.trim();
    let record: std::borrow::Cow<'_, str> =
        if record.contains(['\n', '\r']) { record.replace(['\n', '\r'], " ").into() } else { record.into() };
    let mut line = String::with_capacity(256 + record.len());
    line.push_str("{\"kind\":\"");
    line.push_str(EXPORT_KIND);
    line.push_str("\",\"record\":");
    line.push_str(&record);
    line.push_str(",\"messages\":[");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&as_message::to_json(m));
    }
    line.push_str("]}");
    line
}

/// What `export` wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ExportStats {
    /// Sessions written.
    pub(crate) sessions: usize,
    /// Messages written.
    pub(crate) messages: usize,
    /// Sessions left out because their record or message log could not be read (each warned about).
    pub(crate) unreadable: usize,
}

/// Writes every session of `user`'s `agents` (none: all of the user's agents) to `out`, one line each.
/// With `progress`, a bar on stderr counts the sessions (its length grows as each agent is listed).
pub(crate) async fn export(
    storage: &SharedStorage,
    user: &str,
    agents: &[String],
    out: &mut dyn Write,
    progress: bool,
) -> CliResult<ExportStats> {
    let mut stats = ExportStats::default();
    let bar = session_bar(progress, 0);
    let warn = |text: String| note(bar.as_ref(), text);
    for agent in &agents_of(storage, user, agents).await? {
        let owner = Owner::new(user, agent.as_str());
        owner.validate()?;
        let (ids, bad) = all_sessions(storage, &owner).await?;
        for (id, why) in &bad {
            warn(format!("warning: skipped {user}/{agent}/{id}: unreadable record: {why}"));
        }
        stats.unreadable += bad.len();
        if let Some(b) = &bar {
            b.inc_length(ids.len() as u64);
        }
        for id in ids {
            if let Some(b) = &bar {
                b.inc(1);
            }
            let key = owner.session(id.as_str());
            // An unreadable record or log is skipped (and counted), not the end of the export;
            // any other failure (the store is down) ends it.
            let read = async {
                // Deleted between the listing and now: nothing to export.
                let Some(raw) = storage.get_session_raw(&key).await? else { return Ok(None) };
                // The record as stored (checked to be one), not re-encoded: our writer sets
                // `state.session_id` to the record id, which 2.0.4 does not keep equal.
                as_storage::decode_record(&raw).map_err(|e| {
                    as_storage::StorageError::new(
                        as_storage::StorageErrorKind::Serialization,
                        storage.backend_name(),
                        "export",
                        format!("the stored record is not a session record: {e}"),
                    )
                })?;
                let messages = storage.list_messages(&key, 0, 0).await?;
                Ok::<_, as_storage::StorageError>(Some((raw, messages)))
            };
            let (raw, messages) = match read.await {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                Err(e) if e.kind() == as_storage::StorageErrorKind::Serialization => {
                    warn(format!("warning: skipped {user}/{agent}/{id}: unreadable: {e}"));
                    stats.unreadable += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let line = export_line_raw(&raw, &messages);
            writeln!(out, "{line}").map_err(write_error)?;
            stats.sessions += 1;
            stats.messages += messages.len();
        }
    }
    out.flush().map_err(write_error)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(stats)
}

fn write_error(e: std::io::Error) -> CliError {
    crate::cmd::stdout_error(e)
}

/// One parsed import line.
#[derive(Debug)]
pub(crate) struct ImportItem {
    /// The record.
    pub(crate) record: SessionRecord,
    /// Its message log.
    pub(crate) messages: Vec<Msg>,
}

/// Parses one export line (or a bare `SessionRecord`).
///
/// The line's envelope is split without parsing its payload, and the record and each message are
/// then read on their own, each at the nesting depth it has in the store: parsing the whole line
/// would reach serde_json's recursion limit one level (a message two) earlier than the store's own
/// reader, and a record that `export` wrote could not be imported.
pub(crate) fn parse_line(line: &str) -> Result<ImportItem, String> {
    // Checked whole first (without a depth limit: `IgnoredAny` is skipped iteratively), for the
    // error's position; the splitting below then only sees valid JSON.
    serde_json::from_str::<serde::de::IgnoredAny>(line).map_err(|e| format!("not JSON: {e}"))?;
    let members = json_members(line, b'{').ok_or("not a JSON object")?;
    // A repeated key: the last one counts, as when the line is read into a map.
    let member = |name: &str| members.iter().rev().find(|(k, _)| k == name).map(|(_, v)| *v);
    let Some(record) = member("record") else {
        let record = as_storage::decode_record(line).map_err(|e| format!("record: {e}"))?;
        return Ok(ImportItem { record, messages: Vec::new() });
    };
    let kind = member("kind").and_then(|k| serde_json::from_str::<String>(k).ok());
    match kind.as_deref() {
        Some(EXPORT_KIND) => {}
        Some(other) => return Err(format!("unknown line kind {other:?} (expected \"{EXPORT_KIND}\")")),
        None => return Err(format!("a line with a record needs \"kind\":\"{EXPORT_KIND}\"")),
    }
    let record = as_storage::decode_record(record).map_err(|e| format!("record: {e}"))?;
    let messages = match member("messages") {
        None | Some("null") => Vec::new(),
        Some(raw) => json_members(raw, b'[')
            .ok_or("messages: expected an array")?
            .into_iter()
            .enumerate()
            .map(|(i, (_, m))| as_message::from_json::<Msg>(m).map_err(|e| format!("messages[{i}]: {e}")))
            .collect::<Result<_, _>>()?,
    };
    Ok(ImportItem { record, messages })
}

/// The members of the JSON object (`open` is `{`: key and value text) or array (`[`: empty key and
/// item text) that `text` holds, each value as its text, unparsed (serde_json's `RawValue`, which
/// needs a feature this workspace does not enable). `None` when `text` is not valid JSON of that shape.
fn json_members(text: &str, open: u8) -> Option<Vec<(String, &str)>> {
    let bytes = text.as_bytes();
    let ws = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    // The end of the JSON value starting at `i` (values are skipped without recursion).
    let value = |i: usize| -> Option<(&str, usize)> {
        let mut stream = serde_json::Deserializer::from_str(text.get(i..)?).into_iter::<serde::de::IgnoredAny>();
        stream.next()?.ok()?;
        let end = i + stream.byte_offset();
        Some((text.get(i..end)?.trim(), end))
    };
    let close = if open == b'{' { b'}' } else { b']' };
    let mut i = ws(0);
    if bytes.get(i) != Some(&open) {
        return None;
    }
    i = ws(i + 1);
    let mut members = Vec::new();
    if bytes.get(i) == Some(&close) {
        return (ws(i + 1) == bytes.len()).then_some(members);
    }
    loop {
        let mut key = String::new();
        if open == b'{' {
            let (k, end) = value(i)?;
            key = serde_json::from_str(k).ok()?;
            i = ws(end);
            if bytes.get(i) != Some(&b':') {
                return None;
            }
            i = ws(i + 1);
        }
        let (v, end) = value(i)?;
        members.push((key, v));
        i = ws(end);
        match bytes.get(i) {
            Some(b',') => i = ws(i + 1),
            Some(c) if *c == close => return (ws(i + 1) == bytes.len()).then_some(members),
            _ => return None,
        }
    }
}

/// What `import` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ImportStats {
    /// Sessions created.
    pub(crate) imported: usize,
    /// Messages written.
    pub(crate) messages: usize,
    /// Sessions left alone because they exist.
    pub(crate) skipped: usize,
    /// Lines that failed (parse or write).
    pub(crate) failed: usize,
    /// Set when the store became unavailable: the import stopped there (the lines after it were
    /// not tried), instead of waiting out the timeout once per remaining line.
    pub(crate) stopped: bool,
}

impl ImportStats {
    /// The summary line.
    pub(crate) fn summary(&self) -> String {
        format!(
            "imported {} sessions ({} messages), skipped {} existing, {} failed",
            self.imported, self.messages, self.skipped, self.failed
        )
    }
}

/// How one import line ended (when it did not fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Imported {
    /// Written verbatim.
    Written,
    /// Written through `upsert_session` (the store cannot import verbatim).
    WrittenLossy,
    /// It existed and was left alone.
    Skipped,
}

/// Writes one item into `storage` verbatim (see the module docs), falling back to the lossy
/// path when the store does not support `import_record`.
async fn import_one(storage: &SharedStorage, item: ImportItem, overwrite: bool) -> CliResult<Imported> {
    let key = SessionKey::new(item.record.user_id.as_str(), item.record.agent_id.as_str(), item.record.id.as_str());
    key.validate()?;
    let mode = if overwrite { ImportMode::Overwrite } else { ImportMode::CreateOnly };
    match storage.import_record(&item.record, &item.messages, mode).await {
        Ok(_) => Ok(Imported::Written),
        Err(e) if e.kind() == StorageErrorKind::AlreadyExists => {
            // Either this owner has it (skip, unless overwriting) or another agent of the user does.
            if !overwrite && storage.get_session(&key).await?.is_some() {
                return Ok(Imported::Skipped);
            }
            Err(CliError::new(
                ExitKind::Conflict,
                format!(
                    "session {} of user {} belongs to another agent in the target; not imported",
                    key.session_id, key.user_id
                ),
            ))
        }
        Err(e) if e.kind() == StorageErrorKind::Unsupported => {
            Ok(if import_one_lossy(storage, item, overwrite).await? {
                Imported::WrittenLossy
            } else {
                Imported::Skipped
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// The fallback for stores without `import_record`: `upsert_session` + `upsert_message`. The
/// store sets `created_at`/`updated_at` and `team_id` is lost. `Ok(false)`: it existed and was skipped.
async fn import_one_lossy(storage: &SharedStorage, item: ImportItem, overwrite: bool) -> CliResult<bool> {
    let r = item.record;
    let key = SessionKey::new(r.user_id.as_str(), r.agent_id.as_str(), r.id.as_str());
    if storage.get_session(&key).await?.is_some() {
        if !overwrite {
            return Ok(false);
        }
        storage.delete_session(&key).await?;
    }
    let req = UpsertSession {
        owner: key.owner(),
        session_id: Some(r.id.clone()),
        config: r.config,
        state: Some(r.state),
        source: r.source,
        source_schedule_id: r.source_schedule_id,
    };
    storage.upsert_session(req).await?;
    for m in &item.messages {
        storage.upsert_message(&key, m).await?;
    }
    Ok(true)
}

/// With `progress`, a bar on stderr counting `len` sessions (export and import).
fn session_bar(progress: bool, len: u64) -> Option<indicatif::ProgressBar> {
    progress.then(|| {
        let bar = indicatif::ProgressBar::with_draw_target(Some(len), indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} sessions {msg}") {
            bar.set_style(style);
        }
        bar
    })
}

/// A line on stderr, above the progress bar when there is one.
fn note(bar: Option<&indicatif::ProgressBar>, text: String) {
    match bar {
        Some(b) => b.println(text),
        None => eprintln!("{text}"),
    }
}

/// Imports every line of `text`; bad lines are reported on stderr (with their line number) and counted.
pub(crate) async fn import(storage: &SharedStorage, text: &str, overwrite: bool, progress: bool) -> ImportStats {
    let lines: Vec<(usize, &str)> =
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, l)).collect();
    let bar = session_bar(progress, lines.len() as u64);
    let mut stats = ImportStats::default();
    let mut warned = false;
    for (n, line) in lines {
        let outcome = match parse_line(line) {
            Err(why) => Err(CliError::new(ExitKind::Invalid, why)),
            Ok(item) => {
                let count = item.messages.len();
                import_one(storage, item, overwrite).await.map(|done| (done, count))
            }
        };
        if matches!(outcome, Ok((Imported::WrittenLossy, _))) && !warned {
            warned = true;
            let text = format!(
                "warning: the {} store cannot import records verbatim: it sets created_at/updated_at itself and drops team_id",
                storage.backend_name()
            );
            note(bar.as_ref(), text);
        }
        match outcome {
            Ok((Imported::Written | Imported::WrittenLossy, count)) => {
                stats.imported += 1;
                stats.messages += count;
            }
            Ok((Imported::Skipped, _)) => stats.skipped += 1,
            Err(e) => {
                stats.failed += 1;
                let unavailable = e.kind() == ExitKind::Unavailable;
                let text = if unavailable {
                    format!("line {n}: {e}; stopping (the lines after it were not imported)")
                } else {
                    format!("line {n}: {e}")
                };
                note(bar.as_ref(), format!("error: {text}"));
                if unavailable {
                    stats.stopped = true;
                    break;
                }
            }
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    stats
}

/// `sessions export`.
pub(crate) async fn run_export(storage: &SharedStorage, args: ExportArgs) -> CliResult {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let stats = export(storage, &args.user, &args.agents, &mut out, std::io::stderr().is_terminal()).await?;
    drop(out);
    if stats.unreadable > 0 {
        eprintln!(
            "exported {} sessions ({} messages); {} unreadable sessions were left out (see the warnings)",
            stats.sessions, stats.messages, stats.unreadable
        );
        return Err(CliError::silent(ExitKind::Failed));
    }
    eprintln!("exported {} sessions ({} messages)", stats.sessions, stats.messages);
    Ok(())
}

/// `sessions import`.
pub(crate) async fn run_import(storage: &SharedStorage, args: ImportArgs) -> CliResult {
    let text = String::from_utf8(crate::cmd::read_input(Some(&args.file))?).map_err(|e| {
        let what = if args.file.as_os_str() == "-" { "stdin".to_owned() } else { args.file.display().to_string() };
        CliError::new(ExitKind::Invalid, format!("{what} is not UTF-8 text: {e}"))
    })?;
    let stats = import(storage, &text, args.overwrite, std::io::stderr().is_terminal()).await;
    outln!("{}", stats.summary())?;
    if stats.stopped {
        Err(CliError::silent(ExitKind::Unavailable))
    } else if stats.failed > 0 {
        Err(CliError::silent(ExitKind::Failed))
    } else {
        Ok(())
    }
}

/// One problem found by `validate`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    /// `user/agent/session`.
    pub(crate) key: String,
    /// Why.
    pub(crate) why: String,
}

/// Invariants a parsed record must hold beyond its schema.
pub(crate) fn check_record(key: &SessionKey, record: &SessionRecord) -> Vec<String> {
    let mut out = Vec::new();
    if record.id != key.session_id {
        out.push(format!("record id {:?} differs from the session id", record.id));
    }
    if record.user_id != key.user_id || record.agent_id != key.agent_id {
        out.push(format!("owner {}/{} differs from the index's", record.user_id, record.agent_id));
    }
    if let Err(e) = validate_id("session_id", &record.id) {
        out.push(e.message().to_owned());
    }
    if record.state.cur_iter < 0 {
        out.push(format!("state.cur_iter is negative ({})", record.state.cur_iter));
    }
    for (i, msg) in record.state.context.iter().enumerate() {
        let mut results = std::collections::HashSet::new();
        for b in &msg.content {
            if let ContentBlock::ToolResult(r) = b
                && !results.insert(r.id.as_str())
            {
                out.push(format!("state.context[{i}]: two results for tool call {:?}", r.id));
            }
        }
        for b in &msg.content {
            if let ContentBlock::ToolCall(c) = b
                && c.state == ToolCallState::Finished
                && !results.contains(c.id.as_str())
            {
                out.push(format!("state.context[{i}]: tool call {:?} is finished but has no result", c.id));
            }
        }
    }
    out
}

/// The published JSON Schemas (`agentscope schema session-record` / `msg`) as validators.
pub(crate) struct Schemas {
    record: jsonschema::Validator,
    msg: jsonschema::Validator,
}

impl Schemas {
    /// Compiles the `session-record` and `msg` schemas.
    pub(crate) fn new() -> CliResult<Self> {
        let compile = |name: &str| {
            let entry = as_cli::schemas::find(name)
                .ok_or_else(|| CliError::new(ExitKind::Failed, format!("schema {name} is not published")))?;
            jsonschema::validator_for(&(entry.generate)().to_value())
                .map_err(|e| CliError::new(ExitKind::Failed, format!("schema {name} does not compile: {e}")))
        };
        Ok(Self { record: compile("session-record")?, msg: compile("msg")? })
    }

    fn errors(v: &jsonschema::Validator, doc: &JsonValue, prefix: &str) -> Vec<String> {
        v.iter_errors(doc).take(3).map(|e| format!("schema: {prefix}{}: {e}", e.instance_path())).collect()
    }

    /// Schema violations of a record's stored JSON.
    #[cfg(test)]
    pub(crate) fn check_record(&self, record: &SessionRecord) -> Vec<String> {
        self.check_record_text(&record.to_canonical_json())
    }

    /// Schema violations of a record's stored text (what `get_session_raw` returns).
    pub(crate) fn check_record_text(&self, text: &str) -> Vec<String> {
        match serde_json::from_str::<JsonValue>(text) {
            Ok(doc) => Self::errors(&self.record, &doc, ""),
            Err(e) => vec![format!("schema: the record is not JSON: {e}")],
        }
    }

    /// Schema violations of a logged message.
    pub(crate) fn check_msg(&self, i: usize, msg: &Msg) -> Vec<String> {
        match serde_json::from_str::<JsonValue>(&as_message::to_json(msg)) {
            Ok(doc) => Self::errors(&self.msg, &doc, &format!("messages[{i}]")),
            Err(e) => vec![format!("schema: messages[{i}] does not serialize: {e}")],
        }
    }
}

/// Checks every session of `user`'s `agents` (none: all of the user's agents). Returns the number
/// checked and the problems.
pub(crate) async fn validate(
    storage: &SharedStorage,
    user: &str,
    agents: &[String],
) -> CliResult<(usize, Vec<Problem>)> {
    let schemas = Schemas::new()?;
    let mut checked = 0;
    let mut problems = Vec::new();
    for agent in &agents_of(storage, user, agents).await? {
        let owner = Owner::new(user, agent.as_str());
        owner.validate()?;
        let (ids, bad) = all_sessions(storage, &owner).await?;
        for (id, why) in bad {
            checked += 1;
            problems.push(Problem { key: format!("{user}/{agent}/{id}"), why });
        }
        for id in ids {
            checked += 1;
            let key = owner.session(id.as_str());
            let name = key.to_string();
            match storage.get_session(&key).await {
                Ok(None) => checked -= 1, // deleted meanwhile
                Ok(Some(record)) => {
                    // The schema check reads the stored bytes, not our re-encoding of what was read.
                    let schema_problems = match storage.get_session_raw(&key).await {
                        Ok(Some(text)) => schemas.check_record_text(&text),
                        Ok(None) => Vec::new(), // deleted meanwhile
                        Err(e) => return Err(e.into()),
                    };
                    for why in check_record(&key, &record).into_iter().chain(schema_problems) {
                        problems.push(Problem { key: name.clone(), why });
                    }
                    match storage.list_messages(&key, 0, 0).await {
                        Ok(log) => {
                            for (i, m) in log.iter().enumerate() {
                                for why in schemas.check_msg(i, m) {
                                    problems.push(Problem { key: name.clone(), why });
                                }
                            }
                        }
                        Err(e)
                            if matches!(e.kind(), StorageErrorKind::Serialization | StorageErrorKind::InvalidKey) =>
                        {
                            problems.push(Problem { key: name, why: format!("message log: {e}") });
                        }
                        // An unreachable store is not a bad record: exit 6, as for the record itself.
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) if matches!(e.kind(), StorageErrorKind::Serialization | StorageErrorKind::InvalidKey) => {
                    problems.push(Problem { key: name, why: e.to_string() });
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok((checked, problems))
}

/// `sessions validate`.
pub(crate) async fn run_validate(storage: &SharedStorage, args: ValidateArgs) -> CliResult {
    let (mut checked, mut problems) = (0, Vec::new());
    for user in users_of(storage, args.user.as_deref()).await? {
        let (n, p) = validate(storage, &user, &args.agents).await?;
        checked += n;
        problems.extend(p);
    }
    for p in &problems {
        outln!("bad  {}  {}", p.key, p.why)?;
    }
    let bad: std::collections::BTreeSet<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    outln!("checked {checked} sessions: {} bad", bad.len())?;
    if bad.is_empty() { Ok(()) } else { Err(CliError::silent(ExitKind::Failed)) }
}

/// How many of the last messages `--summary` shows.
const LAST_MESSAGES: usize = 5;

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // What whitespace splitting leaves of control characters (escape sequences) is shown escaped.
    let flat = printable(&flat).into_owned();
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn describe_block(b: &ContentBlock) -> String {
    match b {
        ContentBlock::Text(t) => one_line(&t.text, 100),
        ContentBlock::Thinking(t) => format!("(thinking) {}", one_line(&t.thinking, 60)),
        ContentBlock::Hint(_) => "(hint)".to_owned(),
        ContentBlock::ToolCall(c) => format!("[tool call {} {} {}]", c.name, one_line(&c.input, 60), c.state_str()),
        ContentBlock::ToolResult(r) => {
            format!("[tool result {} {}: {}]", r.name, state_name(r.state), one_line(&r.output.text(), 60))
        }
        ContentBlock::Data(_) => "(data)".to_owned(),
    }
}

fn state_name<T: serde::Serialize>(v: T) -> String {
    as_message::to_json(&v).trim_matches('"').to_owned()
}

trait CallStateStr {
    fn state_str(&self) -> String;
}

impl CallStateStr for as_message::ToolCallBlock {
    fn state_str(&self) -> String {
        state_name(self.state)
    }
}

/// The readable view of `show --summary`.
pub(crate) fn summary(record: &SessionRecord, log_len: Option<usize>) -> String {
    use std::fmt::Write as _;
    let s = &record.state;
    let mut out = String::new();
    let _ = writeln!(out, "session      {}", printable(&record.id));
    let _ = writeln!(out, "owner        {}/{}", printable(&record.user_id), printable(&record.agent_id));
    let _ = writeln!(out, "name         {}", printable(&record.config.name));
    let _ = writeln!(out, "created      {}", record.created_at);
    let _ = writeln!(out, "updated      {}", record.updated_at);
    let _ = writeln!(out, "messages     {} in context", s.context.len());
    if let Some(n) = log_len {
        let _ = writeln!(out, "message log  {n}");
    }
    let _ = writeln!(out, "reply        {} (iteration {})", printable(&s.reply_id), s.cur_iter);
    if !s.summary.is_empty() {
        let _ = writeln!(out, "summary      {}", one_line(&s.summary.text(), 100));
    }
    let _ = writeln!(out, "\nlast messages:");
    if s.context.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    let start = s.context.len().saturating_sub(LAST_MESSAGES);
    for m in &s.context[start..] {
        let parts: Vec<String> = m.content.iter().map(describe_block).collect();
        let _ = writeln!(out, "  {:<9} {}: {}", role_name(m.role), printable(&m.name), one_line(&parts.join(" "), 160));
    }
    let parked: Vec<&as_message::ToolCallBlock> = parked_calls(record);
    let _ = writeln!(out, "\nparked tool calls:");
    if parked.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for c in parked {
        let _ = writeln!(
            out,
            "  {} {} {} ({})",
            printable(&c.id),
            printable(&c.name),
            one_line(&c.input, 80),
            c.state_str()
        );
        for r in &c.suggested_rules {
            let _ = writeln!(
                out,
                "    suggested rule: {} {}",
                printable(&r.tool_name),
                printable(r.rule_content.as_deref().unwrap_or("*"))
            );
        }
    }
    let _ = writeln!(out, "\ntasks:");
    if s.tasks_context.tasks.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for t in &s.tasks_context.tasks {
        let _ = writeln!(out, "  [{}] {} ({})", state_name(t.state), printable(&t.subject), printable(&t.id));
    }
    let p = &s.permission_context;
    let _ = writeln!(out, "\npermissions: mode {}", p.mode.as_str());
    let mut any = false;
    for (label, rules) in [("allow", &p.allow_rules), ("deny", &p.deny_rules), ("ask", &p.ask_rules)] {
        for (tool, list) in rules {
            for r in list {
                any = true;
                let _ = writeln!(
                    out,
                    "  {label:<5} {} {}",
                    printable(tool),
                    printable(r.rule_content.as_deref().unwrap_or("*"))
                );
            }
        }
    }
    for dir in p.working_directories.keys() {
        any = true;
        let _ = writeln!(out, "  dir   {}", printable(dir));
    }
    if !any {
        let _ = writeln!(out, "  (no rules)");
    }
    out
}

fn role_name(r: Role) -> &'static str {
    r.as_str()
}

/// The tool calls the agent is waiting on (asking, or submitted without a result), in the last
/// assistant message.
pub(crate) fn parked_calls(record: &SessionRecord) -> Vec<&as_message::ToolCallBlock> {
    let Some(last) = record.state.context.last() else { return Vec::new() };
    if last.role != Role::Assistant {
        return Vec::new();
    }
    let results: Vec<&str> = last.tool_result_ids().collect();
    last.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c)
                if c.state == ToolCallState::Asking
                    || (c.state == ToolCallState::Submitted && !results.contains(&c.id.as_str())) =>
            {
                Some(c)
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use as_message::{PermissionBehavior, PermissionRule, ToolCallBlock, ToolResultBlock, ToolResultState};
    use as_state::AgentState;
    use as_storage::{SessionConfig, SessionMeta, Timestamp};

    use super::*;

    fn record() -> SessionRecord {
        let mut state = AgentState::for_session("s1");
        state.context.push(Msg::user("user", "my name is Ada"));
        let mut reply = Msg::assistant("friday", "Let me write that down.");
        let mut call = ToolCallBlock::new("call_1", "Write", r#"{"file_path":"a.txt"}"#);
        call.state = ToolCallState::Asking;
        call.suggested_rules.push(PermissionRule::new(
            "Write",
            Some("a.txt".to_owned()),
            PermissionBehavior::Allow,
            "suggested",
        ));
        reply.content.push(ContentBlock::ToolCall(call));
        state.context.push(reply);
        state
            .permission_context
            .allow_rules
            .insert("Read".to_owned(), vec![PermissionRule::new("Read", None, PermissionBehavior::Allow, "session")]);
        let meta = SessionMeta {
            id: "s1".to_owned(),
            updated_at: Timestamp::now(),
            created_at: Timestamp::now(),
            user_id: "alice".to_owned(),
            agent_id: "friday".to_owned(),
            source: Default::default(),
            source_schedule_id: None,
            team_id: None,
            config: SessionConfig::new("ws").with_name("demo"),
        };
        SessionRecord::from_parts(meta, state)
    }

    #[test]
    fn export_line_round_trips() {
        let r = record();
        let msgs = vec![Msg::user("user", "hi"), Msg::assistant("friday", "hello")];
        let line = export_line(&r, &msgs);
        assert!(!line.contains('\n'));
        let item = parse_line(&line).unwrap();
        assert_eq!(item.record, r);
        assert_eq!(item.messages, msgs);
        // Re-exporting the parsed item gives the same bytes: the format is lossless.
        assert_eq!(export_line(&item.record, &item.messages), line);
    }

    #[test]
    fn bare_records_import_too() {
        let r = record();
        let item = parse_line(&r.to_canonical_json()).unwrap();
        assert_eq!(item.record, r);
        assert!(item.messages.is_empty());
    }

    #[test]
    fn bad_lines_say_where() {
        for (line, want) in [
            ("nope", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"kind":"other","record":{}}"#, "unknown line kind"),
            (r#"{"kind":"session","record":{"user_id":"u"}}"#, "record:"),
            (r#"{"kind":"session","record":{"user_id":"u"},"messages":3}"#, "record:"),
        ] {
            let err = parse_line(line).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
        let r = record();
        let line = format!(r#"{{"kind":"session","record":{},"messages":[{{"name":"x"}}]}}"#, r.to_canonical_json());
        let err = parse_line(&line).unwrap_err();
        assert!(err.starts_with("messages[0]:"), "{err}");
    }

    /// A message the store reads back (at serde_json's depth limit) imports too: each message is
    /// read at its own depth, not two levels inside the line.
    #[test]
    fn the_deepest_readable_message_imports() {
        let deep = |n: usize| {
            let mut v = JsonValue::Array(Vec::new());
            for _ in 1..n {
                v = JsonValue::Array(vec![v]);
            }
            let mut m = Msg::user("user", "deep");
            m.metadata.insert("a".to_owned(), v);
            m
        };
        let n = (1..200).rev().find(|&n| as_message::from_json::<Msg>(&as_message::to_json(&deep(n))).is_ok()).unwrap();
        let msg = deep(n);
        let item = parse_line(&export_line(&record(), std::slice::from_ref(&msg))).unwrap();
        assert_eq!(item.messages, vec![msg]);
        // And the other shapes of the line still read.
        let line =
            format!(r#" {{ "messages" : null , "kind":"session", "record" : {} }} "#, record().to_canonical_json());
        assert!(parse_line(&line).unwrap().messages.is_empty());
        let line = format!(r#"{{"kind":"sess\u0069on","record":{},"messages":[ ]}}"#, record().to_canonical_json());
        assert!(parse_line(&line).unwrap().messages.is_empty());
        let line = format!(r#"{{"kind":"session","record":{},"messages":{{}}}}"#, record().to_canonical_json());
        assert_eq!(parse_line(&line).unwrap_err(), "messages: expected an array");
    }

    #[test]
    fn summary_shows_parked_calls_and_rules() {
        let text = summary(&record(), Some(2));
        for want in [
            "session      s1",
            "owner        alice/friday",
            "messages     2 in context",
            "message log  2",
            "user      user: my name is Ada",
            "assistant friday: Let me write that down. [tool call Write",
            "call_1 Write {\"file_path\":\"a.txt\"} (asking)",
            "suggested rule: Write a.txt",
            "permissions: mode default",
            "allow Read *",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    async fn store() -> SharedStorage {
        let s: SharedStorage = std::sync::Arc::new(as_storage::InMemoryStorage::new());
        s.open().await.unwrap();
        s
    }

    async fn seed(s: &SharedStorage, agent: &str, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        for i in 0..n {
            let mut state = AgentState::default();
            state.context.push(Msg::user("user", format!("hello {i}")));
            let req =
                UpsertSession::new(Owner::new("alice", agent), SessionConfig::new("ws").with_name(format!("s{i}")))
                    .with_state(state);
            let rec = s.upsert_session(req).await.unwrap();
            let key = SessionKey::new("alice", agent, rec.id.as_str());
            s.upsert_message(&key, &Msg::user("user", format!("hello {i}"))).await.unwrap();
            s.upsert_message(&key, &Msg::assistant("friday", format!("hi {i}"))).await.unwrap();
            ids.push(rec.id);
        }
        ids
    }

    #[tokio::test]
    async fn export_import_export_is_byte_identical_between_stores() {
        let a = store().await;
        seed(&a, "friday", 3).await;
        seed(&a, "helper", 2).await;
        seed(&a, "other", 1).await; // not exported when agents are named
        let agents = vec!["friday".to_owned(), "helper".to_owned()];
        let mut first = Vec::new();
        let stats = export(&a, "alice", &agents, &mut first, false).await.unwrap();
        assert_eq!(stats, ExportStats { sessions: 5, messages: 10, unreadable: 0 });
        let first = String::from_utf8(first).unwrap();

        let b = store().await;
        let imported = import(&b, &first, false, false).await;
        assert_eq!(imported, ImportStats { imported: 5, messages: 10, skipped: 0, failed: 0, stopped: false });
        let mut second = Vec::new();
        export(&b, "alice", &agents, &mut second, false).await.unwrap();
        assert_eq!(String::from_utf8(second).unwrap(), first, "timestamps and all: the same bytes");

        // Again: everything exists, so everything is skipped; --overwrite replaces without duplicating the log.
        assert_eq!(import(&b, &first, false, false).await.skipped, 5);
        assert_eq!(import(&b, &first, true, false).await.imported, 5);
        let mut third = Vec::new();
        export(&b, "alice", &agents, &mut third, false).await.unwrap();
        assert_eq!(String::from_utf8(third).unwrap(), first);
    }

    #[tokio::test]
    async fn without_agents_every_agent_of_the_user_is_covered() {
        let a = store().await;
        seed(&a, "helper", 2).await;
        seed(&a, "friday", 1).await;
        let bob = UpsertSession::new(Owner::new("bob", "friday"), SessionConfig::new("ws"));
        a.upsert_session(bob).await.unwrap();
        let mut out = Vec::new();
        let stats = export(&a, "alice", &[], &mut out, false).await.unwrap();
        assert_eq!(stats, ExportStats { sessions: 3, messages: 6, unreadable: 0 });
        let owners: Vec<String> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| {
                let r = parse_line(l).unwrap().record;
                format!("{}/{}", r.user_id, r.agent_id)
            })
            .collect();
        assert_eq!(owners, ["alice/friday", "alice/helper", "alice/helper"], "by agent, sorted; bob's not included");
        // An agent named twice is exported once.
        let twice = ["helper".to_owned(), "helper".to_owned()];
        let stats = export(&a, "alice", &twice, &mut Vec::new(), false).await.unwrap();
        assert_eq!(stats.sessions, 2);
        let (checked, problems) = validate(&a, "alice", &[]).await.unwrap();
        assert_eq!((checked, problems.len()), (3, 0));
        assert_eq!(validate(&a, "bad:user", &[]).await.unwrap_err().kind(), ExitKind::Invalid);
    }

    #[tokio::test]
    async fn an_unavailable_store_stops_the_import_at_once() {
        let a = store().await;
        seed(&a, "friday", 3).await;
        let mut out = Vec::new();
        export(&a, "alice", &[], &mut out, false).await.unwrap();
        let b = store().await;
        b.close().await.unwrap();
        let stats = import(&b, &String::from_utf8(out).unwrap(), false, false).await;
        assert_eq!(stats, ImportStats { imported: 0, messages: 0, skipped: 0, failed: 1, stopped: true });
    }

    #[tokio::test]
    async fn an_id_of_another_agent_is_not_taken_over() {
        let a = store().await;
        seed(&a, "friday", 1).await;
        let mut out = Vec::new();
        export(&a, "alice", &[], &mut out, false).await.unwrap();
        let line = String::from_utf8(out).unwrap();
        let b = store().await;
        let id = parse_line(line.trim()).unwrap().record.id;
        let theirs = UpsertSession::new(Owner::new("alice", "helper"), SessionConfig::new("ws")).with_session_id(id);
        b.upsert_session(theirs).await.unwrap();
        for overwrite in [false, true] {
            let stats = import(&b, &line, overwrite, false).await;
            assert_eq!((stats.imported, stats.skipped, stats.failed), (0, 0, 1), "overwrite {overwrite}");
        }
    }

    /// A third-party store written before `import_record`/`list_agents`: only the required methods.
    #[derive(Debug)]
    struct Legacy(as_storage::InMemoryStorage);

    #[async_trait::async_trait]
    impl as_storage::StorageBase for Legacy {
        fn backend_name(&self) -> &'static str {
            "legacy"
        }
        fn capabilities(&self) -> as_storage::Capabilities {
            // No save_turn of its own: the trait's two steps.
            self.0.capabilities().with_atomic_turns(false)
        }
        async fn open(&self) -> as_storage::Result<()> {
            self.0.open().await
        }
        async fn close(&self) -> as_storage::Result<()> {
            self.0.close().await
        }
        async fn upsert_session(&self, req: UpsertSession) -> as_storage::Result<SessionRecord> {
            self.0.upsert_session(req).await
        }
        async fn update_session_state(
            &self,
            key: &SessionKey,
            state: &AgentState,
            expected: Option<&as_storage::Revision>,
        ) -> as_storage::Result<as_storage::Revision> {
            self.0.update_session_state(key, state, expected).await
        }
        async fn get_session(&self, key: &SessionKey) -> as_storage::Result<Option<SessionRecord>> {
            self.0.get_session(key).await
        }
        async fn list_sessions(
            &self,
            owner: &Owner,
            page: &PageRequest,
        ) -> as_storage::Result<as_storage::SessionPage> {
            self.0.list_sessions(owner, page).await
        }
        async fn delete_session(&self, key: &SessionKey) -> as_storage::Result<bool> {
            self.0.delete_session(key).await
        }
        async fn upsert_message(&self, key: &SessionKey, msg: &Msg) -> as_storage::Result<()> {
            self.0.upsert_message(key, msg).await
        }
        async fn get_message(&self, key: &SessionKey, id: &str) -> as_storage::Result<Option<Msg>> {
            self.0.get_message(key, id).await
        }
        async fn list_messages(&self, key: &SessionKey, offset: i64, limit: i64) -> as_storage::Result<Vec<Msg>> {
            self.0.list_messages(key, offset, limit).await
        }
    }

    #[tokio::test]
    async fn a_store_without_import_record_still_imports_lossily_and_needs_agent() {
        let a = store().await;
        seed(&a, "friday", 2).await;
        let mut out = Vec::new();
        export(&a, "alice", &[], &mut out, false).await.unwrap();
        let first = String::from_utf8(out).unwrap();
        let legacy = as_storage::InMemoryStorage::new();
        as_storage::StorageBase::open(&legacy).await.unwrap();
        let b: SharedStorage = std::sync::Arc::new(Legacy(legacy));
        let stats = import(&b, &first, false, false).await;
        assert_eq!(stats, ImportStats { imported: 2, messages: 4, skipped: 0, failed: 0, stopped: false });
        assert_eq!(import(&b, &first, false, false).await.skipped, 2);
        // Without list_agents, --agent is required, with a message that says so.
        let err = export(&b, "alice", &[], &mut Vec::new(), false).await.unwrap_err();
        assert_eq!(err.kind(), ExitKind::Usage);
        assert!(err.to_string().contains("name them with --agent"), "{err}");
        let mut out = Vec::new();
        export(&b, "alice", &["friday".to_owned()], &mut out, false).await.unwrap();
        let second = String::from_utf8(out).unwrap();
        // Same sessions, states and logs; only the store-set timestamps differ.
        let strip = |text: &str| -> Vec<(String, String, usize)> {
            let mut v: Vec<_> = text
                .lines()
                .map(|l| {
                    let item = parse_line(l).unwrap();
                    (item.record.id.clone(), as_message::to_json(&item.record.state), item.messages.len())
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(strip(&second), strip(&first));
    }

    #[tokio::test]
    async fn import_counts_bad_lines_and_goes_on() {
        let a = store().await;
        seed(&a, "friday", 1).await;
        let mut out = Vec::new();
        export(&a, "alice", &["friday".to_owned()], &mut out, false).await.unwrap();
        let text = format!("{{oops\n\n{}", String::from_utf8(out).unwrap());
        let b = store().await;
        let stats = import(&b, &text, false, false).await;
        assert_eq!((stats.imported, stats.failed), (1, 1));
        assert_eq!(stats.summary(), "imported 1 sessions (2 messages), skipped 0 existing, 1 failed");
    }

    #[tokio::test]
    async fn validate_passes_good_sessions() {
        let a = store().await;
        seed(&a, "friday", 4).await;
        let (checked, problems) = validate(&a, "alice", &["friday".to_owned()]).await.unwrap();
        assert_eq!(checked, 4);
        assert!(problems.is_empty(), "{problems:?}");
        let err = validate(&a, "alice", &["bad:agent".to_owned()]).await.unwrap_err();
        assert_eq!(err.kind(), ExitKind::Invalid);
    }

    #[test]
    fn records_and_messages_match_the_published_schemas() {
        let schemas = Schemas::new().unwrap();
        let r = record();
        assert_eq!(schemas.check_record(&r), Vec::<String>::new());
        assert_eq!(schemas.check_msg(0, &r.state.context[1]), Vec::<String>::new());
        // A document the wire model would never write is caught, with its path.
        let doc = serde_json::json!({"name": 5, "content": [], "role": "user"});
        let errors = Schemas::errors(&schemas.msg, &doc, "messages[3]");
        assert!(errors.iter().any(|e| e.starts_with("schema: messages[3]/name:")), "{errors:?}");
        // What pydantic (and our reader) accept, the schema accepts: blocks and sources without `type`.
        let lax = serde_json::json!({"name": "n", "role": "assistant", "content": [
            {"text": "hi", "id": "b"},
            {"type": "data", "id": "d", "source": {"data": "AA", "media_type": "x"}}
        ]});
        assert!(as_message::from_value::<as_message::Msg>(lax.clone()).is_ok());
        assert_eq!(Schemas::errors(&schemas.msg, &lax, "m"), Vec::<String>::new());
        // An unknown kind is still refused.
        let bogus = serde_json::json!({"name": "n", "role": "assistant", "content": [{"type": "bogus", "text": "x"}]});
        assert!(!Schemas::errors(&schemas.msg, &bogus, "m").is_empty());
    }

    #[test]
    fn check_record_finds_broken_bookkeeping() {
        let mut r = record();
        let key = SessionKey::new("alice", "friday", "s1");
        assert!(check_record(&key, &r).is_empty(), "{:?}", check_record(&key, &r));
        let last = r.state.context.last_mut().unwrap();
        if let ContentBlock::ToolCall(c) = &mut last.content[1] {
            c.state = ToolCallState::Finished;
        }
        // 2.0.4 does not keep state.session_id equal to the record id (a new record's is unrelated):
        // not a problem.
        r.state.session_id = "other".to_owned();
        r.state.cur_iter = -1;
        let problems = check_record(&key, &r);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("cur_iter"));
        assert!(problems[1].contains("finished but has no result"));
        let last = r.state.context.last_mut().unwrap();
        for _ in 0..2 {
            last.content.push(ContentBlock::ToolResult(ToolResultBlock::new(
                "call_1",
                "Write",
                "ok",
                ToolResultState::Success,
            )));
        }
        assert!(check_record(&key, &r).iter().any(|p| p.contains("two results")));
    }
}
