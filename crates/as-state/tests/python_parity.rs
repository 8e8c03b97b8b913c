//! States read as AgentScope Python 2.0.4 reads them. Every expected value below was produced by the
//! real package (agentscope==2.0.4 on pydantic 2.14.4), not written by hand:
//! `AgentState.model_validate_json(input).model_dump_json()`, or `None` where pydantic refuses it.
//! Every read path must give those bytes (or refuse), and what it writes must read back unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use as_message::read::Cursor;
use as_message::{from_json, to_json};
use as_state::AgentState;
use as_state::read::read_state;

/// (input, what Python writes after reading it, or `None` when it refuses it).
type Case = (&'static str, Option<&'static str>);

/// One way of reading a state; `Ok(None)` means "declined, another reader decides".
type Reader = fn(&str) -> Result<Option<AgentState>, String>;

const FROM_JSON: (&str, Reader) = ("from_json", |s| from_json::<AgentState>(s).map(Some).map_err(|e| e.to_string()));
const STATE_FROM_JSON: (&str, Reader) =
    ("state_from_json", |s| as_state::state_from_json(s).map(Some).map_err(|e| e.to_string()));
/// The hand-written reader alone: it may decline, but what it reads must be right.
const CURSOR: (&str, Reader) = ("cursor", |s| {
    let mut c = Cursor::new(s);
    Ok(read_state(&mut c).filter(|_| c.is_at_end()))
});
/// The serde impls alone (what a caller of `serde_json::from_str` gets).
const SERDE: (&str, Reader) =
    ("serde_json", |s| serde_json::from_str::<AgentState>(s).map(Some).map_err(|e| e.to_string()));

fn check(cases: &[Case], readers: &[(&str, Reader)]) {
    check_reads(cases, readers, true);
}

/// [`check`]; `read_back`: also read the written bytes again (not when Python writes what it cannot
/// read itself: a non-finite float in a typed field is written as `null`).
fn check_reads(cases: &[Case], readers: &[(&str, Reader)], read_back: bool) {
    for &(input, want) in cases {
        for &(name, read) in readers {
            match (read(input), want) {
                (Ok(Some(s)), Some(out)) => {
                    assert_eq!(to_json(&s), out, "{name} on {input}");
                    assert_eq!(serde_json::to_string(&s).unwrap(), out, "{name}: serde_json::to_string");
                    if read_back {
                        let again = from_json::<AgentState>(out).unwrap();
                        assert_eq!(to_json(&again), out, "{name}: written bytes read back");
                    }
                }
                (Ok(None), _) | (Err(_), None) => {}
                (Ok(Some(s)), None) => panic!("{name} accepted {input} (Python refuses it): {}", to_json(&s)),
                (Err(e), Some(_)) => panic!("{name} refused {input} (Python reads it): {e}"),
            }
        }
        if want.is_some() {
            assert!(as_state::state_from_json(input).is_ok(), "some reader must read {input}");
        }
    }
}

/// An object in free-form data whose key is one of serde_json's private markers
/// (`$serde_json::private::Number`, `…RawValue`) is an ordinary object to Python; serde_json's `Value`
/// reader took it for a number or raw JSON (or refused the state). A typed number is never an object.
#[test]
fn marker_keys_in_free_form_data_are_ordinary_keys() {
    check(MARKERS, &[FROM_JSON, STATE_FROM_JSON, CURSOR, SERDE]);
}

const MARKERS: &[Case] = &[
    // Free-form maps of a state: `middle_context`, a task's `metadata`, a message's `metadata`.
    (
        r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"mw":{"$serde_json::private::Number":"7"},"raw":{"$serde_json::private::RawValue":"{}"}}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"mw":{"$serde_json::private::Number":"7"},"raw":{"$serde_json::private::RawValue":"{}"}}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"$serde_json::private::Number":"not a number"}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"$serde_json::private::Number":"not a number"}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{"n":[{"$serde_json::private::Number":"1"}]},"created_at":"t","state":"pending","id":"i","owner":null,"blocks":[],"blocked_by":[]}]},"middle_context":{}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{"n":[{"$serde_json::private::Number":"1"}]},"created_at":"t","state":"pending","id":"i","owner":null,"blocks":[],"blocked_by":[]}]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","summary":"","context":[{"name":"u","content":[],"role":"user","id":"m","metadata":{"k":{"$serde_json::private::Number":"123"}},"created_at":"t","finished_at":null,"usage":null}],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[{"name":"u","content":[],"role":"user","id":"m","metadata":{"k":{"$serde_json::private::Number":"123"}},"created_at":"t","finished_at":null,"usage":null}],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    // Not canonical: read by serde.
    (
        r#"{"reply_id":"r","session_id":"s","middle_context":{"a":{"$serde_json::private::Number":"1e2"}},"tasks_context":{"tasks":[{"subject":"s","description":"d","created_at":"t","id":"i","metadata":{"$serde_json::private::Number":"2"}}]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{"$serde_json::private::Number":"2"},"created_at":"t","state":"pending","id":"i","owner":null,"blocks":[],"blocked_by":[]}]},"middle_context":{"a":{"$serde_json::private::Number":"1e2"}}}"#,
        ),
    ),
    // Typed numbers: an object is not a number, whatever its key.
    (r#"{"session_id":"s","reply_id":"r","cur_iter":{"$serde_json::private::Number":"3"}}"#, None),
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_files":{"$serde_json::private::Number":"30"}}}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_bytes":{"$serde_json::private::Number":"30000.0"}}}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"read_file_cache":[{"lines":[],"updated_at":{"$serde_json::private::Number":"1.5"},"bytes":0.1,"file_path":"/a"}]}}"#,
        None,
    ),
];

/// Free-form values are read from their text on every path, within pydantic's nesting limit for the
/// whole document (200 levels of non-empty containers), measured with Python 2.0.4: `middle_context`
/// (level 2) holding 198 arrays around a number is read, 199 are refused; a message's `metadata`
/// (level 4) holding 196 is read, 197 are refused.
#[test]
fn free_form_nesting_stops_where_python_stops() {
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let middle = |n: usize| format!(r#"{{"session_id":"s","reply_id":"r","middle_context":{{"a":{}}}}}"#, nested(n));
    let in_msg = |n: usize| {
        let msg = format!(
            r#"{{"name":"u","content":[],"role":"user","id":"m","metadata":{{"a":{}}},"created_at":"t"}}"#,
            nested(n)
        );
        format!(r#"{{"session_id":"s","reply_id":"r","context":[{msg}]}}"#)
    };
    let cases = [
        (middle(198), true),
        (middle(199), false),
        (in_msg(100), true),
        (in_msg(196), true),
        (in_msg(197), false),
        (middle(100_000), false),
    ];
    // On a thread with a tokio worker's stack (2 MiB): the deep reads are recursive.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for (text, python_reads) in cases {
                for (name, read) in [FROM_JSON, STATE_FROM_JSON, CURSOR] {
                    match read(&text) {
                        Ok(Some(_)) => assert!(python_reads, "{name} read {}", &text[..80]),
                        Ok(None) => assert_eq!(name, "cursor"),
                        Err(e) => {
                            assert!(!python_reads, "{name} refused {}: {e}", &text[..80]);
                            assert!(e.contains("recursion limit"), "{name}: {e}");
                        }
                    }
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A repeated key is read as pydantic reads it: the last value counts, in typed objects (a repeated
/// `type` decides the block) as in free-form maps and keyed rules (where it keeps the first key's
/// position, as a Python dict does). serde's derived readers refused a repeated field, or read the
/// first `type`. (`serde_json::from_str` alone still refuses a repeated typed field.)
#[test]
fn repeated_keys_keep_the_last_value() {
    check(DUPLICATES, &[FROM_JSON, STATE_FROM_JSON, CURSOR]);
}

const DUPLICATES: &[Case] = &[
    // A repeated key of a typed object: the last value counts.
    (
        r#"{"session_id":"a","session_id":"s","reply_id":"r","cur_iter":1,"cur_iter":4}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":4,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","context":[{"name":"u","content":[],"role":"user","id":"m","metadata":{},"created_at":"t"}],"context":[]}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","summary":"old","summary":[{"type":"text","text":"new","id":"b"}]}"#,
        Some(
            r#"{"session_id":"s","summary":[{"type":"text","text":"new","id":"b"}],"context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_files":5,"max_cache_bytes":20000.0,"max_cache_files":7,"activated_groups":["a"],"activated_groups":[]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":7,"max_cache_bytes":20000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"read_file_cache":[{"lines":["x"],"updated_at":1.5,"bytes":0.1,"file_path":"/a","file_path":"/b"}]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[{"lines":["x"],"updated_at":1.5,"bytes":0.1,"file_path":"/b"}],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","permission_context":{"mode":"explore","mode":"bypass","allow_rules":{"Bash":[],"Read":[{"tool_name":"Read","rule_content":null,"behavior":"allow","source":"session"}],"Bash":[{"tool_name":"Bash","rule_content":"git:*","behavior":"allow","source":"session","source":"userSettings"}]}}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"bypass","working_directories":{},"allow_rules":{"Bash":[{"tool_name":"Bash","rule_content":"git:*","behavior":"allow","source":"userSettings"}],"Read":[{"tool_name":"Read","rule_content":null,"behavior":"allow","source":"session"}]},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tasks_context":{"tasks":[{"subject":"a","description":"d","metadata":{"k":1,"j":2,"k":3},"created_at":"t","state":"pending","state":"completed","id":"i","blocks":["x"],"blocks":[]}]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[{"subject":"a","description":"d","metadata":{"k":3,"j":2},"created_at":"t","state":"completed","id":"i","owner":null,"blocks":[],"blocked_by":[]}]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","cur_iter":"x","cur_iter":2}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":2,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (r#"{"session_id":"s","reply_id":"r","cur_iter":2,"cur_iter":"x"}"#, None),
    // Free-form maps: the last value in the first position, at every level.
    (
        r#"{"session_id":"s","reply_id":"r","middle_context":{"a":1,"b":{"x":1,"y":2,"x":[3]},"a":{"c":1}},"middle_context":{"z":{"q":1,"q":2},"a":0}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"z":{"q":2},"a":0}}"#,
        ),
    ),
    // Blocks in a state, canonical but for a repeated key.
    (
        r#"{"session_id":"s","summary":"","context":[{"name":"Friday","content":[{"type":"text","text":"x","id":"1","type":"tool_call","name":"Bash","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[{"name":"Friday","content":[{"type":"tool_call","id":"1","name":"Bash","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","summary":[{"type":"text","text":"x","id":"1","type":"data","source":{"type":"url","url":"https://a.b","media_type":"text/html"}}],"context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        Some(
            r#"{"session_id":"s","summary":[{"type":"data","id":"1","source":{"type":"url","url":"https://a.b/","media_type":"text/html"},"name":null}],"context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
];

/// `NaN`, `Infinity` and `-Infinity` (Python's `json` spellings) in free-form data are read, and
/// written back as `null` as pydantic writes a non-finite float; serde_json refused the document.
/// Integer and string fields refuse them, as pydantic does.
#[test]
fn non_finite_floats_in_free_form_data_are_read() {
    check(NON_FINITE, &[FROM_JSON, STATE_FROM_JSON, CURSOR]);
}

const NON_FINITE: &[Case] = &[
    // Python's non-finite floats in free-form data are read, and written back as null.
    (
        r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"a":NaN,"b":[Infinity,-Infinity]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{"a":null,"b":[null,null]}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{"p":NaN},"created_at":"t","id":"i"}]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{"p":null},"created_at":"t","state":"pending","id":"i","owner":null,"blocks":[],"blocked_by":[]}]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","context":[{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":-Infinity},"created_at":"t"}]}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":null},"created_at":"t","finished_at":null,"usage":null}],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    // Refused by typed fields.
    (r#"{"session_id":"s","reply_id":"r","cur_iter":NaN}"#, None),
    (r#"{"session_id":"s","reply_id":"r","cur_iter":Infinity}"#, None),
    (r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_files":-Infinity}}"#, None),
    (r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_bytes":-Infinity}}"#, None),
    (r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_bytes":NaN}}"#, None),
    (r#"{"session_id":NaN,"reply_id":"r"}"#, None),
    // A NaN is a float to pydantic, not a None: nullable typed fields refuse it.
    (
        r#"{"session_id":"s","reply_id":"r","permission_context":{"mode":"default","allow_rules":{"Bash":[{"tool_name":"Bash","rule_content":NaN,"behavior":"allow","source":"session"}]}}}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{},"created_at":"t","id":"i","owner":NaN}]}}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","context":[{"name":"u","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":NaN}]}"#,
        None,
    ),
];

/// Float fields read `Infinity` and `-Infinity` as infinities, as pydantic does; both write them
/// back as `null` (which neither reads again, so the written bytes are not read back here).
#[test]
fn infinities_in_float_fields_are_read() {
    check_reads(INFINITE_FLOATS, &[FROM_JSON, STATE_FROM_JSON, CURSOR], false);
}

const INFINITE_FLOATS: &[Case] = &[
    // Typed float fields read infinities (pydantic writes them back as null, which it cannot read again).
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_bytes":Infinity}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":null,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tool_context":{"read_file_cache":[{"lines":[],"updated_at":Infinity,"bytes":-Infinity,"file_path":"x"}]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[{"lines":[],"updated_at":null,"bytes":null,"file_path":"x"}],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
        ),
    ),
];

/// A known difference (see the crate docs): pydantic reads `NaN` in a float field that has no bound
/// (`read_file_cache[].updated_at`, `.bytes`) and writes it back as `null`, which it cannot read
/// again; Rust refuses it (the value reader has no number for it).
#[test]
fn nan_in_a_float_field_is_refused() {
    let text = r#"{"session_id":"s","reply_id":"r","tool_context":{"read_file_cache":[{"lines":[],"updated_at":NaN,"bytes":1,"file_path":"x"}]}}"#;
    let e = as_state::state_from_json(text).unwrap_err();
    assert_eq!(e.path(), "tool_context.read_file_cache[0].updated_at", "{e}");
}

/// A known difference (see the crate docs): pydantic reads integers of any size; `cur_iter` and
/// `max_cache_files` are `i64`, so a larger integer is refused with an error naming the field and
/// saying why (it said "expected an integer"). The middle column is what Python writes for the input.
#[test]
fn integers_past_64_bits_are_an_error_naming_the_field() {
    for &((input, python), path) in BIG_INTEGERS {
        assert!(python.is_some(), "Python reads {input}");
        for e in [from_json::<AgentState>(input).unwrap_err(), as_state::state_from_json(input).unwrap_err()] {
            assert_eq!(e.path(), path, "{e}");
            assert!(e.message().starts_with("integer out of range: "), "{e}");
        }
    }
}

const BIG_INTEGERS: &[(Case, &str)] = &[
    (
        (
            r#"{"session_id":"s","reply_id":"r","cur_iter":9223372036854775808}"#,
            Some(
                r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":9223372036854775808,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
            ),
        ),
        "cur_iter",
    ),
    (
        (
            r#"{"session_id":"s","reply_id":"r","cur_iter":"-99999999999999999999"}"#,
            Some(
                r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":-99999999999999999999,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
            ),
        ),
        "cur_iter",
    ),
    (
        (
            r#"{"session_id":"s","reply_id":"r","tool_context":{"max_cache_files":99999999999999999999999}}"#,
            Some(
                r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"default","working_directories":{},"allow_rules":{},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":99999999999999999999999,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[]},"middle_context":{}}"#,
            ),
        ),
        "tool_context.max_cache_files",
    ),
];

/// Caching an empty file records `"bytes":0.0`, as Python does (`sum(...)` of no lengths is the
/// integer `0`); an empty `f64` sum is `-0.0` in Rust, which was written as `"bytes":-0.0`.
#[test]
fn caching_an_empty_file_records_zero_kilobytes() {
    let mut t = as_state::ToolContext::default();
    t.cache_file_with_mtime("/e", vec![], 1.0);
    assert_eq!(t.read_file_cache[0].bytes.to_bits(), 0.0f64.to_bits());
    assert_eq!(
        to_json(&t),
        r#"{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[{"lines":[],"updated_at":1.0,"bytes":0.0,"file_path":"/e"}],"activated_groups":[]}"#
    );
}

/// A `Literal` or `StrEnum` field (permission mode and behavior, task state) is read from its string
/// alone; serde's derived enum reader also took the externally tagged map `{"bypass":null}`.
#[test]
fn wire_enums_are_read_from_strings_only() {
    check(WIRE_ENUMS, &[FROM_JSON, STATE_FROM_JSON, CURSOR, SERDE]);
    use as_state::TaskState;
    for state in [TaskState::Pending, TaskState::InProgress, TaskState::Completed] {
        let text = serde_json::to_string(&state).unwrap();
        assert_eq!(serde_json::from_str::<TaskState>(&text).unwrap(), state, "{text}");
        let e = serde_json::from_str::<TaskState>(&format!("{{{text}:null}}")).unwrap_err();
        assert!(e.to_string().starts_with("invalid type: map, expected one of `pending`, `in_progress`, `completed`"));
    }
}

const WIRE_ENUMS: &[Case] = &[
    (r#"{"session_id":"s","reply_id":"r","permission_context":{"mode":{"bypass":null}}}"#, None),
    (
        r#"{"session_id":"s","reply_id":"r","permission_context":{"mode":"bypass","allow_rules":{"Bash":[{"tool_name":"Bash","rule_content":null,"behavior":{"allow":null},"source":"session"}]}}}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{},"state":{"completed":null}}]}}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","context":[{"name":"u","content":[],"role":{"user":null},"id":"m","metadata":{},"created_at":"t"}]}"#,
        None,
    ),
    (
        r#"{"session_id":"s","reply_id":"r","permission_context":{"mode":"bypass","allow_rules":{"Bash":[{"tool_name":"Bash","rule_content":null,"behavior":"allow","source":"session"}]}},"tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{},"created_at":"t","state":"completed","id":"i"}]}}"#,
        Some(
            r#"{"session_id":"s","summary":"","context":[],"reply_id":"r","cur_iter":0,"permission_context":{"mode":"bypass","working_directories":{},"allow_rules":{"Bash":[{"tool_name":"Bash","rule_content":null,"behavior":"allow","source":"session"}]},"deny_rules":{},"ask_rules":{}},"tool_context":{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]},"tasks_context":{"tasks":[{"subject":"s","description":"d","metadata":{},"created_at":"t","state":"completed","id":"i","owner":null,"blocks":[],"blocked_by":[]}]},"middle_context":{}}"#,
        ),
    ),
];
