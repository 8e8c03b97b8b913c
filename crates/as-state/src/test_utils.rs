//! Test and benchmark helpers (feature `test-utils`; not covered by semver).
//!
//! * [`conversation_state`]: an `AgentState` shaped like a real conversation, for benchmarks.
//! * [`arb`]: proptest strategies for every wire type, for round-trip tests.
//! * [`deterministic`]: a read whose generated defaults (ids, times) compare equal across reads.

use as_message::{
    ContentBlock, JsonMap, JsonValue, Msg, Role, TextBlock, ToolCallBlock, ToolCallState, ToolResultBlock,
    ToolResultState, Usage,
};

use crate::AgentState;

/// An `AgentState` with `n` messages repeating a real conversation's shape: user text, assistant
/// tool call, tool result, assistant text. Each message is about 500 bytes of JSON, so 1000 messages
/// are about 500 KB. Ids and times are fixed, so the output is deterministic.
///
/// ```
/// let s = as_state::test_utils::conversation_state(100);
/// assert_eq!(s.context.len(), 100);
/// let bytes = as_message::to_json(&s).len();
/// assert!((40_000..60_000).contains(&bytes), "{bytes}");
/// ```
pub fn conversation_state(n: usize) -> AgentState {
    let mut state = AgentState::for_session("bench-session-0001");
    state.reply_id = "bench-reply-0001".into();
    for i in 0..n {
        let id = format!("{i:032x}");
        let created_at = format!("2025-06-01T10:{:02}:{:02}.{:06}", (i / 60) % 60, i % 60, (i * 7919) % 1_000_000);
        let (role, content) = match i % 4 {
            0 => (
                Role::User,
                vec![text(
                    &id,
                    "Could you look at src/main.rs and tell me why the build fails? I think it is the new \
                     parser module, but the error mentions a lifetime in the tokenizer. ✓ Ünïcødé",
                )],
            ),
            1 => (
                Role::Assistant,
                vec![
                    text(&id, "Let me read the file first."),
                    ContentBlock::ToolCall(ToolCallBlock {
                        state: ToolCallState::Finished,
                        ..ToolCallBlock::new(
                            format!("call_{i:08}"),
                            "Read",
                            r#"{"file_path":"/workspace/proj/src/main.rs","offset":0,"limit":200}"#,
                        )
                    }),
                ],
            ),
            2 => {
                let mut result = ToolResultBlock::new(
                    format!("call_{:08}", i - 1),
                    "Read",
                    "fn main() {\n    let tokens = tokenizer::lex(&input);\n    let ast = parser::parse(&tokens)?;\n    \
                     println!(\"{ast:?}\");\n}\n",
                    ToolResultState::Success,
                );
                result.metadata.insert("lines".into(), JsonValue::from(5));
                (Role::Assistant, vec![ContentBlock::ToolResult(result)])
            }
            _ => (
                Role::Assistant,
                vec![text(
                    &id,
                    "The parser borrows the token slice for longer than the input lives. Return owned tokens \
                     from `lex`, or keep `input` alive until parsing is done.",
                )],
            ),
        };
        let mut msg = Msg::new(if role == Role::User { "user" } else { "Friday" }, role, content);
        msg.id = id;
        msg.created_at = created_at.clone();
        if role == Role::Assistant {
            msg.finished_at = Some(created_at);
            msg.usage = Some(Usage { input_tokens: 1200 + i as i64, output_tokens: 80 });
        } else {
            msg.finished_at = Some(msg.created_at.clone());
        }
        state.context.push(msg);
    }
    state.cur_iter = i64::try_from(n / 4).unwrap_or(i64::MAX);
    let mut mc = JsonMap::new();
    mc.insert("turns".into(), JsonValue::from(n / 4));
    state.middle_context = mc;
    state
}

fn text(msg_id: &str, s: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock { text: s.into(), id: format!("{msg_id}-t") })
}

/// The JSON pointers (RFC 6901) of every object in `doc`, the document itself first, in document order,
/// not descending into objects under a key listed in `free_form` (whose contents are any JSON).
/// Tests use it to check that a table of object positions is complete.
///
/// ```
/// let doc = serde_json::json!({"a": {"b": [{}]}, "metadata": {"x": {}}});
/// let found = as_state::test_utils::object_pointers(&doc, &["metadata"]);
/// assert_eq!(found, ["", "/a", "/a/b/0", "/metadata"]);
/// ```
pub fn object_pointers(doc: &JsonValue, free_form: &[&str]) -> Vec<String> {
    fn walk(v: &JsonValue, at: &str, free_form: &[&str], out: &mut Vec<String>) {
        match v {
            JsonValue::Object(map) => {
                out.push(at.to_owned());
                let last = at.rsplit('/').next().unwrap_or("");
                if free_form.contains(&last) {
                    return;
                }
                for (k, x) in map {
                    walk(x, &format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), free_form, out);
                }
            }
            JsonValue::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), free_form, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(doc, "", free_form, &mut out);
    out
}

/// `doc` with the object at `pointer` replaced by `[]` and by the array of its values (in key order),
/// or `None` when there is no object there. Tests use it to check that a struct rejects an array
/// where pydantic expects an object.
///
/// ```
/// let doc = serde_json::json!({"usage": {"input_tokens": 1, "output_tokens": 2}});
/// let [empty, values] = as_state::test_utils::object_as_arrays(&doc, "/usage").unwrap();
/// assert_eq!(empty["usage"], serde_json::json!([]));
/// assert_eq!(values["usage"], serde_json::json!([1, 2]));
/// assert!(as_state::test_utils::object_as_arrays(&doc, "/usage/input_tokens").is_none());
/// ```
pub fn object_as_arrays(doc: &JsonValue, pointer: &str) -> Option<[JsonValue; 2]> {
    let values: Vec<JsonValue> = doc.pointer(pointer)?.as_object()?.values().cloned().collect();
    let replaced = |with: JsonValue| {
        let mut d = doc.clone();
        if let Some(slot) = d.pointer_mut(pointer) {
            *slot = with;
        }
        d
    };
    Some([replaced(JsonValue::Array(Vec::new())), replaced(JsonValue::Array(values))])
}

/// Runs `read` with a constant id factory (generated default ids become `"<generated>"`) and returns
/// what it read as JSON with generated default times (strings starting with today's date) masked as
/// `"<now>"`, so two reads of one text compare equal even where defaults are generated.
pub fn deterministic<T: serde::Serialize>(
    read: impl FnOnce() -> Result<T, as_message::MessageError>,
) -> Result<JsonValue, as_message::MessageError> {
    fn mask(v: &mut JsonValue, today: &str) {
        match v {
            JsonValue::String(s) if s.starts_with(today) => *s = "<now>".into(),
            JsonValue::Array(items) => items.iter_mut().for_each(|x| mask(x, today)),
            JsonValue::Object(map) => map.values_mut().for_each(|x| mask(x, today)),
            _ => {}
        }
    }
    let value = as_message::with_id_factory(std::sync::Arc::new(|| "<generated>".to_owned()), read)?;
    let mut v: JsonValue = serde_json::from_str(&as_message::to_json(&value)).unwrap_or_default();
    mask(&mut v, &as_message::now_iso()[..10]);
    Ok(v)
}

/// proptest strategies for the wire types.
///
/// Generated values are canonical (URLs normalised, free-form numbers in Python's forms, floats
/// finite, role rules respected), so `value → JSON → value` must be the identity.
pub mod arb {
    use as_message::{
        AdditionalWorkingDirectory, Base64Source, ContentBlock, DataBlock, HintBlock, JsonMap, JsonValue, Msg,
        PermissionBehavior, PermissionContext, PermissionMode, PermissionRule, Role, Source, TextBlock, TextOrBlocks,
        TextOrData, ThinkingBlock, ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState, UrlSource, Usage,
    };
    use indexmap::IndexMap;
    use proptest::collection::vec;
    use proptest::option;
    use proptest::prelude::*;

    use crate::{AgentState, ReadCacheEntry, Task, TaskContext, TaskState, ToolContext};

    /// Any string: ASCII, controls, quotes, non-BMP characters, U+2028.
    pub fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-zA-Z0-9 _./-]{0,12}",
            2 => any::<String>(),
            1 => Just("\u{2028}\"\\\n\t\u{7f}😀é".to_owned()),
        ]
    }

    /// Any id (readers accept any string; writers use 32 hex chars).
    pub fn id() -> impl Strategy<Value = String> {
        prop_oneof![3 => "[0-9a-f]{32}", 1 => text()]
    }

    /// A JSON number as Python would write it: any i64, big integers beyond 64 bits, finite floats.
    pub fn number() -> impl Strategy<Value = JsonValue> {
        prop_oneof![
            any::<i64>().prop_map(JsonValue::from),
            ("[1-9][0-9]{19,40}", any::<bool>()).prop_map(|(digits, neg)| {
                let text = if neg { format!("-{digits}") } else { digits };
                serde_json::from_str(&text).unwrap_or(JsonValue::Null)
            }),
            any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(JsonValue::Number)),
            prop_oneof![Just(1e-7), Just(1e16), Just(25000.0), Just(-0.0), Just(1.5e300), Just(0.1)]
                .prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(JsonValue::Number)),
        ]
    }

    /// Any JSON value (canonical numbers), nested a few levels.
    pub fn json_value() -> impl Strategy<Value = JsonValue> {
        let leaf = prop_oneof![
            Just(JsonValue::Null),
            any::<bool>().prop_map(JsonValue::from),
            number(),
            text().prop_map(JsonValue::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(JsonValue::Array),
                vec((text(), inner), 0..4).prop_map(|kv| JsonValue::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// A free-form object (`metadata`, `middle_context`).
    pub fn json_map() -> impl Strategy<Value = JsonMap> {
        vec((text(), json_value()), 0..4).prop_map(|kv| kv.into_iter().collect())
    }

    /// A text block.
    pub fn text_block() -> impl Strategy<Value = TextBlock> {
        (text(), id()).prop_map(|(text, id)| TextBlock { text, id })
    }

    /// A thinking block with extra provider keys.
    pub fn thinking_block() -> impl Strategy<Value = ThinkingBlock> {
        (text(), id(), vec(("x_[a-z]{1,6}", json_value()), 0..3)).prop_map(|(thinking, id, extra)| ThinkingBlock {
            thinking,
            id,
            extra: extra.into_iter().collect(),
        })
    }

    /// A base64 or URL source (URLs already normalised).
    pub fn source() -> impl Strategy<Value = Source> {
        prop_oneof![
            ("[A-Za-z0-9+/=]{0,16}", text())
                .prop_map(|(data, media_type)| Source::Base64(Base64Source { data, media_type })),
            (
                prop_oneof![
                    "https://[a-z]{1,8}\\.example/[a-z0-9]{0,8}",
                    "HTTP://[A-Z]{1,8}\\.Example\\.COM:80/[a-z ]{0,6}",
                    Just("mailto:someone@example.com".to_owned()),
                    Just("https://bücher.example".to_owned()),
                ],
                text()
            )
                .prop_filter_map("valid url", |(url, media_type)| UrlSource::new(&url, media_type)
                    .ok()
                    .map(Source::Url)),
        ]
    }

    /// A data block.
    pub fn data_block() -> impl Strategy<Value = DataBlock> {
        (id(), source(), option::of(text())).prop_map(|(id, source, name)| DataBlock { id, source, name })
    }

    /// A text or data block.
    pub fn text_or_data() -> impl Strategy<Value = TextOrData> {
        prop_oneof![text_block().prop_map(TextOrData::Text), data_block().prop_map(TextOrData::Data)]
    }

    /// A string or a list of text/data blocks.
    pub fn text_or_blocks() -> impl Strategy<Value = TextOrBlocks> {
        prop_oneof![text().prop_map(TextOrBlocks::Text), vec(text_or_data(), 0..3).prop_map(TextOrBlocks::Blocks)]
    }

    /// A hint block.
    pub fn hint_block() -> impl Strategy<Value = HintBlock> {
        (text_or_blocks(), id(), option::of(text())).prop_map(|(hint, id, source)| HintBlock { hint, id, source })
    }

    /// Any permission behavior.
    pub fn behavior() -> impl Strategy<Value = PermissionBehavior> {
        prop_oneof![
            Just(PermissionBehavior::Allow),
            Just(PermissionBehavior::Deny),
            Just(PermissionBehavior::Ask),
            Just(PermissionBehavior::Passthrough),
        ]
    }

    /// A permission rule.
    pub fn rule() -> impl Strategy<Value = PermissionRule> {
        (text(), option::of(text()), behavior(), text()).prop_map(|(tool_name, rule_content, behavior, source)| {
            PermissionRule { tool_name, rule_content, behavior, source }
        })
    }

    /// Any tool-call state.
    pub fn call_state() -> impl Strategy<Value = ToolCallState> {
        prop_oneof![
            Just(ToolCallState::Pending),
            Just(ToolCallState::Asking),
            Just(ToolCallState::Allowed),
            Just(ToolCallState::Submitted),
            Just(ToolCallState::Finished),
        ]
    }

    /// Any tool-result state.
    pub fn result_state() -> impl Strategy<Value = ToolResultState> {
        prop_oneof![
            Just(ToolResultState::Success),
            Just(ToolResultState::Error),
            Just(ToolResultState::Interrupted),
            Just(ToolResultState::Denied),
            Just(ToolResultState::Running),
        ]
    }

    /// A tool call (input is raw JSON text, possibly incomplete).
    pub fn tool_call() -> impl Strategy<Value = ToolCallBlock> {
        (id(), text(), text(), call_state(), vec(rule(), 0..2)).prop_map(|(id, name, input, state, suggested_rules)| {
            ToolCallBlock { id, name, input, state, suggested_rules }
        })
    }

    /// A tool result.
    pub fn tool_result() -> impl Strategy<Value = ToolResultBlock> {
        (id(), text(), text_or_blocks(), result_state(), json_map())
            .prop_map(|(id, name, output, state, metadata)| ToolResultBlock { id, name, output, state, metadata })
    }

    /// Any content block.
    pub fn content_block() -> impl Strategy<Value = ContentBlock> {
        prop_oneof![
            text_block().prop_map(ContentBlock::Text),
            thinking_block().prop_map(ContentBlock::Thinking),
            hint_block().prop_map(ContentBlock::Hint),
            tool_call().prop_map(ContentBlock::ToolCall),
            tool_result().prop_map(ContentBlock::ToolResult),
            data_block().prop_map(ContentBlock::Data),
        ]
    }

    /// A message that respects the role rules.
    pub fn msg() -> impl Strategy<Value = Msg> {
        let role = prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::System)];
        (
            role,
            text(),
            vec(content_block(), 0..5),
            id(),
            json_map(),
            text(),
            option::of(text()),
            option::of((any::<i64>(), any::<i64>())),
        )
            .prop_map(|(role, name, content, id, metadata, created_at, finished_at, usage)| {
                let content = content
                    .into_iter()
                    .filter(|b| match role {
                        Role::User => matches!(b, ContentBlock::Text(_) | ContentBlock::Data(_)),
                        Role::System => matches!(b, ContentBlock::Text(_)),
                        Role::Assistant => true,
                    })
                    .collect();
                Msg {
                    name,
                    content,
                    role,
                    id,
                    metadata,
                    created_at,
                    finished_at,
                    usage: usage.map(|(input_tokens, output_tokens)| Usage { input_tokens, output_tokens }),
                }
            })
    }

    /// A permission context.
    pub fn permission_context() -> impl Strategy<Value = PermissionContext> {
        let mode = prop_oneof![
            Just(PermissionMode::Default),
            Just(PermissionMode::AcceptEdits),
            Just(PermissionMode::Explore),
            Just(PermissionMode::Bypass),
            Just(PermissionMode::DontAsk),
        ];
        let rules = || vec((text(), vec(rule(), 0..2)), 0..3).prop_map(|kv| kv.into_iter().collect::<IndexMap<_, _>>());
        (mode, vec((text(), text()), 0..3), rules(), rules(), rules()).prop_map(|(mode, dirs, allow, deny, ask)| {
            PermissionContext {
                mode,
                working_directories: dirs
                    .into_iter()
                    .map(|(path, source)| (path.clone(), AdditionalWorkingDirectory { path, source }))
                    .collect(),
                allow_rules: allow,
                deny_rules: deny,
                ask_rules: ask,
            }
        })
    }

    fn finite() -> impl Strategy<Value = f64> {
        any::<f64>().prop_filter("finite", |f| f.is_finite())
    }

    /// A tool context (limits within pydantic's constraints).
    pub fn tool_context() -> impl Strategy<Value = ToolContext> {
        let entry = (vec(text(), 0..3), finite(), finite(), text())
            .prop_map(|(lines, updated_at, bytes, file_path)| ReadCacheEntry { lines, updated_at, bytes, file_path });
        (2i64..i64::MAX, 10000.5f64..1e300, vec(entry, 0..3), vec(text(), 0..3)).prop_map(
            |(max_cache_files, max_cache_bytes, read_file_cache, activated_groups)| ToolContext {
                max_cache_files,
                max_cache_bytes,
                read_file_cache,
                activated_groups,
            },
        )
    }

    /// A plan-mode task.
    pub fn task() -> impl Strategy<Value = Task> {
        let state = prop_oneof![Just(TaskState::Pending), Just(TaskState::InProgress), Just(TaskState::Completed)];
        (text(), text(), json_map(), text(), state, id(), option::of(text()), vec(id(), 0..2), vec(id(), 0..2))
            .prop_map(|(subject, description, metadata, created_at, state, id, owner, blocks, blocked_by)| Task {
                subject,
                description,
                metadata,
                created_at,
                state,
                id,
                owner,
                blocks,
                blocked_by,
            })
    }

    /// Any agent state.
    pub fn agent_state() -> impl Strategy<Value = AgentState> {
        (
            id(),
            text_or_blocks(),
            vec(msg(), 0..4),
            id(),
            any::<i64>(),
            permission_context(),
            tool_context(),
            vec(task(), 0..3),
            json_map(),
        )
            .prop_map(
                |(
                    session_id,
                    summary,
                    context,
                    reply_id,
                    cur_iter,
                    permission_context,
                    tool_context,
                    tasks,
                    middle_context,
                )| {
                    AgentState {
                        session_id,
                        summary,
                        context,
                        reply_id,
                        cur_iter,
                        permission_context,
                        tool_context,
                        tasks_context: TaskContext { tasks },
                        middle_context,
                    }
                },
            )
    }
}
