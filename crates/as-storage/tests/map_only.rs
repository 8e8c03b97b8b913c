//! Every object position of a session record rejects a JSON array, as pydantic 2.x does
//! ("Input should be a valid dictionary or instance of …"). serde's derived `Deserialize` alone
//! would read `[field values…]` (and `[]` for an all-default struct) as the struct.
//!
//! The table lists every JSON object of the 2.0.4 session record golden outside the state and free-form
//! maps (a test checks that it is complete); each is replaced by `[]` and by the array of its values,
//! and the read must fail at that object's path. Objects inside the state are checked the same way
//! against their path (as-state's own table also checks what each error says was expected).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use as_message::{JsonValue, MessageError, from_json};
use as_storage::{SessionMeta, SessionRecord};

const GOLDEN: &str = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");

/// Keys whose object value is free-form: any JSON (arrays included) may sit inside it.
const FREE_FORM: &[&str] = &["metadata", "middle_context", "parameters"];

/// (JSON pointer of an object outside `/state`, the error's path, what the error says it expected there).
const CASES: &[(&str, &str, &str)] = &[
    ("", "", "a SessionRecord object"),
    ("/config", "config", "a SessionConfig object"),
    ("/config/chat_model_config", "config.chat_model_config", "a ChatModelConfig object"),
    ("/config/chat_model_config/parameters", "config.chat_model_config.parameters", "a map"),
    ("/config/tts_model_config", "config.tts_model_config", "a ChatModelConfig object"),
    ("/config/tts_model_config/parameters", "config.tts_model_config.parameters", "a map"),
    ("/config/knowledge_config", "config.knowledge_config", "a SessionKnowledgeConfig object"),
    ("/config/knowledge_config/parameters", "config.knowledge_config.parameters", "a map"),
    ("/state", "state", "an AgentState object"),
];

/// The error path of a JSON pointer (`/state/context/0/usage` → `state.context[0].usage`).
fn error_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let key = seg.replace("~1", "/").replace("~0", "~");
        if key.parse::<usize>().is_ok() {
            out.push_str(&format!("[{key}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&key);
        }
    }
    out
}

/// `doc` with the object at `pointer` replaced by `[]` and by the array of its values.
fn as_arrays(doc: &JsonValue, pointer: &str) -> [String; 2] {
    as_state::test_utils::object_as_arrays(doc, pointer)
        .unwrap_or_else(|| panic!("{pointer:?} is not an object in the golden"))
        .map(|d| as_message::to_json(&d))
}

fn rejected(result: Result<impl Sized, MessageError>, what: &str, json: &str) -> MessageError {
    match result {
        Ok(_) => panic!("{what}: accepted {json}"),
        Err(e) => e,
    }
}

#[test]
fn the_table_lists_every_object_of_the_golden_outside_the_state() {
    let doc: JsonValue = from_json(GOLDEN).unwrap();
    let mut found = as_state::test_utils::object_pointers(&doc, FREE_FORM);
    found.retain(|p| !p.starts_with("/state/"));
    let listed: Vec<String> = CASES.iter().map(|c| c.0.to_owned()).collect();
    assert_eq!(listed, found);
    assert!(CASES.iter().all(|&(pointer, path, _)| error_path(pointer) == path), "paths follow the pointers");
}

#[test]
fn an_array_in_place_of_any_record_object_is_rejected_at_its_path() {
    // The unchanged golden reads, so every failure below comes from the substituted array.
    from_json::<SessionRecord>(GOLDEN).unwrap();
    from_json::<SessionMeta>(GOLDEN).unwrap();
    let doc: JsonValue = from_json(GOLDEN).unwrap();
    for &(pointer, path, expected) in CASES {
        for json in as_arrays(&doc, pointer) {
            let err = rejected(from_json::<SessionRecord>(&json), pointer, &json);
            assert_eq!(err.path(), path, "{pointer:?}: {err}");
            assert_eq!(err.message(), format!("invalid type: sequence, expected {expected}"), "{pointer:?}");
            // The envelope reader skips the state; everything else it reads the same way.
            if pointer != "/state" {
                let err = rejected(from_json::<SessionMeta>(&json), pointer, &json);
                let expected = if pointer.is_empty() { "a SessionMeta object" } else { expected };
                assert_eq!(err.path(), path, "{pointer:?}: {err}");
                assert_eq!(err.message(), format!("invalid type: sequence, expected {expected}"), "{pointer:?}");
            }
        }
    }
}

#[test]
fn an_array_in_place_of_any_state_object_is_rejected_at_its_path() {
    let doc: JsonValue = from_json(GOLDEN).unwrap();
    let mut found = as_state::test_utils::object_pointers(&doc, FREE_FORM);
    found.retain(|p| p.starts_with("/state/"));
    assert!(found.len() > 60, "the golden's state has its objects: {}", found.len());
    for pointer in &found {
        for json in as_arrays(&doc, pointer) {
            let err = rejected(from_json::<SessionRecord>(&json), pointer, &json);
            assert_eq!(err.path(), error_path(pointer), "{pointer:?}: {err}");
            assert!(err.message().starts_with("invalid type: sequence, expected a"), "{pointer:?}: {err}");
        }
    }
}

#[test]
fn every_record_struct_read_directly_rejects_an_array() {
    let doc: JsonValue = from_json(GOLDEN).unwrap();
    let object = |p: &str| as_message::to_json(doc.pointer(p).unwrap_or_else(|| panic!("{p}")));
    type Reader = fn(&str) -> Result<(), MessageError>;
    let types: [(String, &str, Reader); 3] = [
        (object("/config"), "a SessionConfig object", |s| from_json::<as_storage::SessionConfig>(s).map(drop)),
        (object("/config/chat_model_config"), "a ChatModelConfig object", |s| {
            from_json::<as_storage::ChatModelConfig>(s).map(drop)
        }),
        (object("/config/knowledge_config"), "a SessionKnowledgeConfig object", |s| {
            from_json::<as_storage::SessionKnowledgeConfig>(s).map(drop)
        }),
    ];
    for (object, expected, read) in types {
        read(&object).unwrap_or_else(|e| panic!("{expected}: the valid object fails: {e}"));
        let doc: JsonValue = from_json(&object).unwrap();
        for json in as_arrays(&doc, "") {
            let err = rejected(read(&json), expected, &json);
            assert_eq!(err.path(), "", "{expected}: {err}");
            assert_eq!(err.message(), format!("invalid type: sequence, expected {expected}"));
        }
    }
}
