//! The wire form of each message type, pinned with insta. After a change, run the tests, then
//! `cargo insta review` (cargo-insta) and accept each changed snapshot only after reading it: the
//! `.snap` files are the bytes AgentScope Python 2.0.4 reads.

#![cfg(test)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use as_message::{
    AdditionalWorkingDirectory, Base64Source, ContentBlock, DataBlock, HintBlock, JsonMap, Msg, PermissionBehavior,
    PermissionContext, PermissionMode, PermissionRule, Source, TextBlock, TextOrBlocks, TextOrData, ThinkingBlock,
    ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState, UrlSource, Usage, json, to_json, with_id_factory,
};

/// Runs `f` with ids `id0001`, `id0002`, … so snapshots are deterministic.
fn seeded<R>(f: impl FnOnce() -> R) -> R {
    let n = Arc::new(AtomicU32::new(1));
    with_id_factory(Arc::new(move || format!("id{:04}", n.fetch_add(1, Ordering::SeqCst))), f)
}

fn fixed(mut m: Msg) -> Msg {
    let had_finished = m.finished_at.is_some();
    m.created_at = "2025-06-01T10:00:00".into();
    if had_finished {
        m.finished_at = Some("2025-06-01T10:00:01.250000".into());
    }
    m
}

fn meta(v: serde_json::Value) -> JsonMap {
    match v {
        serde_json::Value::Object(m) => m,
        _ => JsonMap::new(),
    }
}

#[test]
fn text_block() {
    seeded(|| insta::assert_snapshot!(to_json(&ContentBlock::text("héllo \"world\"\n"))));
}

#[test]
fn thinking_block_with_extras() {
    seeded(|| {
        let mut b = ThinkingBlock::new("let me think");
        b.extra = meta(json!({"signature": "sig==", "z": [1, 2.5, 9007199254740993u64]}));
        insta::assert_snapshot!(to_json(&ContentBlock::Thinking(b)));
    });
}

#[test]
fn hint_blocks() {
    seeded(|| {
        let s = HintBlock { hint: "remember the plan".into(), id: "h1".into(), source: Some("system".into()) };
        let l = HintBlock {
            hint: TextOrBlocks::Blocks(vec![TextOrData::Text(TextBlock::new("a"))]),
            id: "h2".into(),
            source: None,
        };
        insta::assert_snapshot!(format!("{}\n{}", to_json(&ContentBlock::Hint(s)), to_json(&ContentBlock::Hint(l))));
    });
}

#[test]
fn tool_call_block() {
    let mut c = ToolCallBlock::new("call_1", "Bash", r#"{"command":"ls"}"#);
    c.state = ToolCallState::Asking;
    c.suggested_rules.push(PermissionRule::new("Bash", Some("ls:*".into()), PermissionBehavior::Allow, "suggested"));
    c.suggested_rules.push(PermissionRule::new("Bash", None, PermissionBehavior::Ask, "session"));
    insta::assert_snapshot!(to_json(&ContentBlock::ToolCall(c)));
}

#[test]
fn tool_result_blocks() {
    seeded(|| {
        let mut s = ToolResultBlock::new("call_1", "Bash", "ok\n", ToolResultState::Success);
        s.metadata = meta(json!({"exit_code": 0}));
        let l = ToolResultBlock::new(
            "call_2",
            "Read",
            TextOrBlocks::Blocks(vec![
                TextOrData::Text(TextBlock::new("line")),
                TextOrData::Data(DataBlock::new(
                    Source::Base64(Base64Source { data: "AA==".into(), media_type: "image/png".into() }),
                    None,
                )),
            ]),
            ToolResultState::Error,
        );
        insta::assert_snapshot!(format!(
            "{}\n{}",
            to_json(&ContentBlock::ToolResult(s)),
            to_json(&ContentBlock::ToolResult(l))
        ));
    });
}

#[test]
fn data_blocks() {
    seeded(|| {
        let b = DataBlock::new(
            Source::Base64(Base64Source { data: "iVBORw0K".into(), media_type: "image/png".into() }),
            Some("shot.png".into()),
        );
        let u = DataBlock::new(Source::Url(UrlSource::new("HTTPS://Example.COM", "text/html").unwrap()), None);
        insta::assert_snapshot!(format!("{}\n{}", to_json(&ContentBlock::Data(b)), to_json(&ContentBlock::Data(u))));
    });
}

#[test]
fn messages_of_each_role() {
    seeded(|| {
        let user = fixed(Msg::user("alice", "hi ✓"));
        let system = fixed(Msg::system("system", "You are Friday."));
        let mut assistant = fixed(Msg::assistant("Friday", "hello"));
        assistant.usage = Some(Usage { input_tokens: 12, output_tokens: 3 });
        assistant.metadata = meta(json!({"model": "m", "latency": 0.25}));
        insta::assert_snapshot!(format!("{}\n{}\n{}", to_json(&user), to_json(&system), to_json(&assistant)));
    });
}

#[test]
fn permission_context() {
    let mut p = PermissionContext { mode: PermissionMode::AcceptEdits, ..PermissionContext::default() };
    p.working_directories
        .insert("/w".into(), AdditionalWorkingDirectory { path: "/w".into(), source: "session".into() });
    p.allow_rules
        .insert("Read".into(), vec![PermissionRule::new("Read", None, PermissionBehavior::Allow, "userSettings")]);
    p.deny_rules.insert(
        "Bash".into(),
        vec![PermissionRule::new("Bash", Some("rm:*".into()), PermissionBehavior::Deny, "projectSettings")],
    );
    insta::assert_snapshot!(format!("{}\n{}", to_json(&PermissionContext::default()), to_json(&p)));
}
