//! Every object position of an `AgentState` rejects a JSON array, as pydantic 2.x does
//! ("Input should be a valid dictionary or instance of …"). serde's derived `Deserialize` alone
//! would read `[field values…]` (and `[]` for an all-default struct) as the struct.
//!
//! The table lists every JSON object of the rich 2.0.4 golden outside free-form maps (a test checks
//! that it is complete); each is replaced by `[]` and by the array of its values, and the read must
//! fail at that object's path, saying an object (or map) was expected there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use as_message::{JsonValue, from_json};
use as_state::AgentState;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agentscope-2.0.4/");

/// Keys whose object value is free-form: any JSON (arrays included) may sit inside it.
const FREE_FORM: &[&str] = &["metadata", "middle_context", "parameters"];

/// (JSON pointer of an object in `rich_agent_state.compact.json`, the error's path, what the error
/// says it expected there).
const CASES: &[(&str, &str, &str)] = &[
    ("", "", "an AgentState object"),
    ("/summary/0", "summary[0]", "a text or data block object"),
    ("/summary/1", "summary[1]", "a text or data block object"),
    ("/summary/1/source", "summary[1].source", "a map"),
    ("/context/0", "context[0]", "a Msg object"),
    ("/context/0/content/0", "context[0].content[0]", "a content block object"),
    ("/context/0/metadata", "context[0].metadata", "a map"),
    ("/context/1", "context[1]", "a Msg object"),
    ("/context/1/content/0", "context[1].content[0]", "a content block object"),
    ("/context/1/content/1", "context[1].content[1]", "a content block object"),
    ("/context/1/content/1/source", "context[1].content[1].source", "a map"),
    ("/context/1/content/2", "context[1].content[2]", "a content block object"),
    ("/context/1/content/2/source", "context[1].content[2].source", "a map"),
    ("/context/1/metadata", "context[1].metadata", "a map"),
    ("/context/2", "context[2]", "a Msg object"),
    ("/context/2/content/0", "context[2].content[0]", "a content block object"),
    ("/context/2/content/1", "context[2].content[1]", "a content block object"),
    ("/context/2/content/2", "context[2].content[2]", "a content block object"),
    ("/context/2/content/3", "context[2].content[3]", "a content block object"),
    ("/context/2/content/3/hint/0", "context[2].content[3].hint[0]", "a text or data block object"),
    ("/context/2/content/3/hint/1", "context[2].content[3].hint[1]", "a text or data block object"),
    ("/context/2/content/3/hint/1/source", "context[2].content[3].hint[1].source", "a map"),
    ("/context/2/content/4", "context[2].content[4]", "a content block object"),
    ("/context/2/content/5", "context[2].content[5]", "a content block object"),
    ("/context/2/content/6", "context[2].content[6]", "a content block object"),
    ("/context/2/content/6/suggested_rules/0", "context[2].content[6].suggested_rules[0]", "a PermissionRule object"),
    ("/context/2/content/7", "context[2].content[7]", "a content block object"),
    ("/context/2/content/8", "context[2].content[8]", "a content block object"),
    ("/context/2/content/9", "context[2].content[9]", "a content block object"),
    ("/context/2/content/10", "context[2].content[10]", "a content block object"),
    ("/context/2/content/11", "context[2].content[11]", "a content block object"),
    ("/context/2/content/12", "context[2].content[12]", "a content block object"),
    ("/context/2/content/13", "context[2].content[13]", "a content block object"),
    ("/context/2/content/13/output/0", "context[2].content[13].output[0]", "a text or data block object"),
    ("/context/2/content/13/output/1", "context[2].content[13].output[1]", "a text or data block object"),
    ("/context/2/content/13/output/1/source", "context[2].content[13].output[1].source", "a map"),
    ("/context/2/content/13/metadata", "context[2].content[13].metadata", "a map"),
    ("/context/2/content/14", "context[2].content[14]", "a content block object"),
    ("/context/2/content/14/metadata", "context[2].content[14].metadata", "a map"),
    ("/context/2/content/15", "context[2].content[15]", "a content block object"),
    ("/context/2/content/15/metadata", "context[2].content[15].metadata", "a map"),
    ("/context/2/content/16", "context[2].content[16]", "a content block object"),
    ("/context/2/content/16/metadata", "context[2].content[16].metadata", "a map"),
    ("/context/2/content/17", "context[2].content[17]", "a content block object"),
    ("/context/2/content/17/metadata", "context[2].content[17].metadata", "a map"),
    ("/context/2/metadata", "context[2].metadata", "a map"),
    ("/context/2/usage", "context[2].usage", "a Usage object"),
    ("/permission_context", "permission_context", "a PermissionContext object"),
    ("/permission_context/working_directories", "permission_context.working_directories", "a map"),
    (
        "/permission_context/working_directories/~1workspace~1proj",
        "permission_context.working_directories./workspace/proj",
        "an AdditionalWorkingDirectory object",
    ),
    (
        "/permission_context/working_directories/~1data~1shared",
        "permission_context.working_directories./data/shared",
        "an AdditionalWorkingDirectory object",
    ),
    ("/permission_context/allow_rules", "permission_context.allow_rules", "a map"),
    ("/permission_context/allow_rules/Bash/0", "permission_context.allow_rules.Bash[0]", "a PermissionRule object"),
    ("/permission_context/allow_rules/Bash/1", "permission_context.allow_rules.Bash[1]", "a PermissionRule object"),
    ("/permission_context/allow_rules/Read/0", "permission_context.allow_rules.Read[0]", "a PermissionRule object"),
    ("/permission_context/deny_rules", "permission_context.deny_rules", "a map"),
    ("/permission_context/deny_rules/Bash/0", "permission_context.deny_rules.Bash[0]", "a PermissionRule object"),
    ("/permission_context/ask_rules", "permission_context.ask_rules", "a map"),
    ("/permission_context/ask_rules/Write/0", "permission_context.ask_rules.Write[0]", "a PermissionRule object"),
    ("/tool_context", "tool_context", "a ToolContext object"),
    ("/tool_context/read_file_cache/0", "tool_context.read_file_cache[0]", "a ReadCacheEntry object"),
    ("/tool_context/read_file_cache/1", "tool_context.read_file_cache[1]", "a ReadCacheEntry object"),
    ("/tasks_context", "tasks_context", "a TaskContext object"),
    ("/tasks_context/tasks/0", "tasks_context.tasks[0]", "a Task object"),
    ("/tasks_context/tasks/0/metadata", "tasks_context.tasks[0].metadata", "a map"),
    ("/tasks_context/tasks/1", "tasks_context.tasks[1]", "a Task object"),
    ("/tasks_context/tasks/1/metadata", "tasks_context.tasks[1].metadata", "a map"),
    ("/tasks_context/tasks/2", "tasks_context.tasks[2]", "a Task object"),
    ("/tasks_context/tasks/2/metadata", "tasks_context.tasks[2].metadata", "a map"),
    ("/middle_context", "middle_context", "a map"),
];

fn golden(name: &str) -> String {
    std::fs::read_to_string(format!("{FIX}{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `doc` with the object at `pointer` replaced by `[]` and by the array of its values.
fn as_arrays(doc: &JsonValue, pointer: &str) -> [String; 2] {
    as_state::test_utils::object_as_arrays(doc, pointer)
        .unwrap_or_else(|| panic!("{pointer:?} is not an object in the golden"))
        .map(|d| as_message::to_json(&d))
}

#[test]
fn the_table_lists_every_object_of_the_golden() {
    let doc: JsonValue = serde_json::from_str(&golden("rich_agent_state.compact.json")).unwrap();
    let found = as_state::test_utils::object_pointers(&doc, FREE_FORM);
    let listed: Vec<String> = CASES.iter().map(|c| c.0.to_owned()).collect();
    assert_eq!(listed, found);
}

/// Moves every `type` key (outside free-form maps) after the other keys, so blocks are read by the
/// buffering reader instead of the one that streams the keys after a leading `type`.
fn type_last(v: &mut JsonValue, free: bool) {
    match v {
        JsonValue::Object(map) => {
            if !free && let Some(t) = map.shift_remove("type") {
                map.insert("type".to_owned(), t);
            }
            for (k, x) in map.iter_mut() {
                type_last(x, free || FREE_FORM.contains(&k.as_str()));
            }
        }
        JsonValue::Array(items) => items.iter_mut().for_each(|x| type_last(x, free)),
        _ => {}
    }
}

fn check_table(doc: &JsonValue) {
    // The unchanged document reads, so every failure below comes from the substituted array.
    from_json::<AgentState>(&as_message::to_json(doc)).unwrap();
    for &(pointer, path, expected) in CASES {
        for json in as_arrays(doc, pointer) {
            let err =
                from_json::<AgentState>(&json).expect_err(&format!("{pointer:?} as an array was accepted: {json}"));
            assert_eq!(err.path(), path, "{pointer:?}: {err}");
            assert_eq!(err.message(), format!("invalid type: sequence, expected {expected}"), "{pointer:?}");
        }
    }
}

#[test]
fn an_array_in_place_of_any_object_is_rejected_at_its_path() {
    let doc: JsonValue = serde_json::from_str(&golden("rich_agent_state.compact.json")).unwrap();
    check_table(&doc);
}

#[test]
fn blocks_buffered_for_a_late_type_key_reject_arrays_at_the_same_paths() {
    let mut doc: JsonValue = serde_json::from_str(&golden("rich_agent_state.compact.json")).unwrap();
    type_last(&mut doc, false);
    assert!(!as_message::to_json(&doc).contains(r#"{"type":"#), "every type key was moved");
    check_table(&doc);
}

/// Reads `json` as one wire type, dropping the value.
type Reader = fn(&str) -> Result<(), as_message::MessageError>;

/// (a valid object of the type, what the error says it expected, the reader).
const TYPES: &[(&str, &str, Reader)] = &[
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        "a Msg object",
        |s| from_json::<as_message::Msg>(s).map(drop),
    ),
    (r#"{"input_tokens":1,"output_tokens":2}"#, "a Usage object", |s| from_json::<as_message::Usage>(s).map(drop)),
    (r#"{"text":"hi","id":"b"}"#, "a TextBlock object", |s| from_json::<as_message::TextBlock>(s).map(drop)),
    (
        r#"{"id":"b","source":{"type":"url","url":"https://a.b/","media_type":"image/png"},"name":null}"#,
        "a DataBlock object",
        |s| from_json::<as_message::DataBlock>(s).map(drop),
    ),
    (r#"{"hint":"h","id":"b","source":null}"#, "a HintBlock object", |s| {
        from_json::<as_message::HintBlock>(s).map(drop)
    }),
    (
        r#"{"id":"c","name":"Read","input":"{}","state":"pending","suggested_rules":[]}"#,
        "a ToolCallBlock object",
        |s| from_json::<as_message::ToolCallBlock>(s).map(drop),
    ),
    (r#"{"id":"c","name":"Read","output":"ok","state":"success","metadata":{}}"#, "a ToolResultBlock object", |s| {
        from_json::<as_message::ToolResultBlock>(s).map(drop)
    }),
    (r#"{"data":"AA==","media_type":"image/png"}"#, "a Base64Source object", |s| {
        from_json::<as_message::Base64Source>(s).map(drop)
    }),
    (r#"{"url":"https://a.b/","media_type":"image/png"}"#, "a UrlSource object", |s| {
        from_json::<as_message::UrlSource>(s).map(drop)
    }),
    (
        r#"{"tool_name":"Bash","rule_content":null,"behavior":"allow","source":"session"}"#,
        "a PermissionRule object",
        |s| from_json::<as_message::PermissionRule>(s).map(drop),
    ),
    (r#"{"path":"/w","source":"session"}"#, "an AdditionalWorkingDirectory object", |s| {
        from_json::<as_message::AdditionalWorkingDirectory>(s).map(drop)
    }),
    (
        r#"{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}}"#,
        "a PermissionContext object",
        |s| from_json::<as_message::PermissionContext>(s).map(drop),
    ),
    (
        r#"{"subject":"s","description":"d","metadata":{},"created_at":"t","state":"pending","id":"i","owner":null,"blocks":[],"blocked_by":[]}"#,
        "a Task object",
        |s| from_json::<as_state::Task>(s).map(drop),
    ),
    (r#"{"tasks":[]}"#, "a TaskContext object", |s| from_json::<as_state::TaskContext>(s).map(drop)),
    (r#"{"lines":["a"],"updated_at":1.5,"bytes":0.1,"file_path":"/a"}"#, "a ReadCacheEntry object", |s| {
        from_json::<as_state::ReadCacheEntry>(s).map(drop)
    }),
    (
        r#"{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]}"#,
        "a ToolContext object",
        |s| from_json::<as_state::ToolContext>(s).map(drop),
    ),
    (AGENT_STATE_DEFAULT, "an AgentState object", |s| from_json::<AgentState>(s).map(drop)),
];

const AGENT_STATE_DEFAULT: &str = r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#;

#[test]
fn every_wire_struct_read_directly_rejects_an_array() {
    for &(object, expected, read) in TYPES {
        read(object).unwrap_or_else(|e| panic!("{expected}: the valid object fails: {e}"));
        let doc: JsonValue = serde_json::from_str(object).unwrap();
        for json in as_arrays(&doc, "") {
            let err = read(&json).expect_err(&format!("{expected}: {json} was accepted"));
            assert_eq!(err.path(), "", "{expected}: {err}");
            assert_eq!(err.message(), format!("invalid type: sequence, expected {expected}"));
        }
    }
}
