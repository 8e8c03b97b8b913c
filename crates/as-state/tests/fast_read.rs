//! The fast canonical reader (`as_state::state_from_json`) returns exactly what the serde path
//! (`as_message::from_json::<AgentState>`) returns: same value, or the same error, on canonical input,
//! on the golden files and on mutated input; and it reads canonical input without falling back.

#![cfg(test)]

use as_message::JsonValue;
use as_message::read::Cursor;
use as_state::AgentState;
use as_state::read::read_state;
use as_state::test_utils::{arb, conversation_state, deterministic, object_as_arrays, object_pointers};
use proptest::prelude::*;
use proptest::sample::Index;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agentscope-2.0.4/");

/// How the fast reader handled a text.
#[derive(Debug, PartialEq)]
enum Path {
    /// Read by the fast reader with this many local (per-object) serde re-reads.
    Fast { fallbacks: usize },
    /// Declined: the whole text went to serde.
    Declined,
}

fn fast_path(text: &str) -> Path {
    let mut c = Cursor::new(text);
    match read_state(&mut c) {
        Some(_) if c.is_at_end() => Path::Fast { fallbacks: c.fallbacks() },
        _ => Path::Declined,
    }
}

/// Both readers agree on `text`; returns which path the fast reader took.
fn check_same(text: &str) -> Path {
    let slow = deterministic(|| as_message::from_json::<AgentState>(text));
    let fast = deterministic(|| as_state::state_from_json(text));
    assert_eq!(fast, slow, "readers disagree on {text:?}");
    let path = fast_path(text);
    if path != Path::Declined {
        assert!(slow.is_ok(), "fast reader accepted what serde rejects: {text:?}");
    }
    path
}

#[test]
fn conversation_states_take_the_fast_path_without_fallback() {
    for n in [0, 1, 10, 101] {
        let state = conversation_state(n);
        let json = as_message::to_json(&state);
        assert_eq!(check_same(&json), Path::Fast { fallbacks: 0 }, "{n} messages");
        assert_eq!(as_state::state_from_json(&json).unwrap(), state);
    }
}

#[test]
fn agent_state_goldens_read_fast_and_equal() {
    for name in ["empty_agent_state.compact.json", "rich_agent_state.compact.json"] {
        let text = std::fs::read_to_string(format!("{FIX}{name}")).unwrap();
        assert_eq!(check_same(&text), Path::Fast { fallbacks: 0 }, "{name}");
        assert!(as_state::state_from_json(&text).is_ok(), "{name}");
    }
}

#[test]
fn pretty_golden_declines_and_still_reads() {
    let text = std::fs::read_to_string(format!("{FIX}rich_agent_state.pretty.json")).unwrap();
    assert_eq!(check_same(&text), Path::Declined);
    assert!(as_state::state_from_json(&text).is_ok());
}

/// A message with its keys in another order is re-read by serde on its own; the rest stays fast.
#[test]
fn non_canonical_message_falls_back_locally() {
    let state = conversation_state(4);
    let mut doc: JsonValue = serde_json::from_str(&as_message::to_json(&state)).unwrap();
    let msg = doc.pointer_mut("/context/1").unwrap().as_object_mut().unwrap();
    let reversed: serde_json::Map<String, JsonValue> = msg.clone().into_iter().rev().collect();
    *msg = reversed;
    let block = doc.pointer_mut("/context/2/content/0").unwrap().as_object_mut().unwrap();
    let metadata = block.shift_remove("metadata").unwrap();
    block.insert("extra".into(), JsonValue::from(1));
    block.insert("metadata".into(), metadata);
    let text = doc.to_string();
    assert_eq!(check_same(&text), Path::Fast { fallbacks: 2 });
    assert_eq!(as_state::state_from_json(&text).unwrap(), state);
}

/// serde_json rejects nesting deeper than 128 levels; a subtree read on its own must not accept what
/// the whole-document read rejects.
#[test]
fn nesting_limit_is_the_whole_documents() {
    for depth in 110..=130 {
        let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let mut state = conversation_state(3);
        state.middle_context.clear();
        let json = as_message::to_json(&state);
        // Deep value in a message's metadata, in a tool result's metadata and in middle_context.
        for (from, to) in [
            (r#""metadata":{}"#, format!(r#""metadata":{{"x":{nested}}}"#)),
            (r#""metadata":{"lines":5}"#, format!(r#""metadata":{{"lines":{nested}}}"#)),
            (r#""middle_context":{}"#, format!(r#""middle_context":{{"x":{nested}}}"#)),
        ] {
            assert!(json.contains(from), "{from}");
            check_same(&json.replacen(from, &to, 1));
        }
    }
}

#[test]
fn escapes_and_odd_numbers_agree() {
    let base = as_message::to_json(&conversation_state(4));
    for (from, to) in [
        ("Could you", r"C\u006fuld you"),
        ("Could you", r"\ud83d\ude00 you"),
        ("Could you", r"\ud83d you"),
        ("Could you", r"\ude00 you"),
        ("Could you", r"\u00e9\u00E9"),
        (r#""name":"user""#, r#""name":"us\u0065r""#),
        (r#""role":"user""#, r#""role":"us\u0065r""#),
        (r#""role":"user""#, r#""role":"system""#),
        (r#""role":"user""#, r#""role":"User""#),
        (r#""state":"finished""#, r#""state":"fin\u0069shed""#),
        (r#""state":"success""#, r#""state":"bogus""#),
        (r#""input_tokens":1201"#, r#""input_tokens":1201.0"#),
        (r#""input_tokens":1201"#, r#""input_tokens":"1201""#),
        (r#""input_tokens":1201"#, r#""input_tokens":12e2"#),
        (r#""input_tokens":1201"#, r#""input_tokens":01201"#),
        (r#""input_tokens":1201"#, r#""input_tokens":99999999999999999999"#),
        (r#""input_tokens":1201"#, r#""input_tokens":-0"#),
        (r#""cur_iter":1"#, r#""cur_iter":"1""#),
        (r#""cur_iter":1"#, r#""cur_iter":1.0"#),
        (r#""cur_iter":1"#, r#""cur_iter":true"#),
        (r#""metadata":{"lines":5}"#, r#""metadata":{"lines":5.0E0,"n":-0}"#),
        (r#""metadata":{"lines":5}"#, r#""metadata":null"#),
        (r#""metadata":{}"#, r#""metadata":[]"#),
        (r#""usage":null"#, r#""usage":{"input_tokens":1,"output_tokens":2,"input_tokens":3}"#),
        (r#""usage":null"#, r#""usage":null,"usage":null"#),
        (r#""finished_at":"#, r#""finished_at":null,"finished_at":"#),
        (
            r#""suggested_rules":[]"#,
            r#""suggested_rules":[{"tool_name":"Read","rule_content":null,"behavior":"allow","source":"s"}]"#,
        ),
        (r#""suggested_rules":[]"#, r#""suggested_rules":{}"#),
        (r#"{"type":"text","#, r#"{"type":"thinking","thinking":"t","id":"x"},{"type":"text","#),
        (r#"{"type":"text","#, r#"{"text":"untyped","id":"u"},{"type":"text","#),
        (r#"{"type":"text","#, r#"{"type":"tool_call","id":"c","name":"n","input":"{}"},{"type":"text","#),
        ("}", "} "),
        ("}", "}\n"),
    ] {
        for text in [base.replacen(from, to, 1), base.replace(from, to)] {
            check_same(&text);
        }
    }
    assert!(matches!(check_same(&format!("{base} \n")), Path::Fast { .. }));
    assert_eq!(check_same(&format!("{base}x")), Path::Declined);
    assert_eq!(check_same(&format!("{base}{{}}")), Path::Declined);
}

/// A mutation of canonical JSON text.
#[derive(Clone, Debug)]
enum Mutation {
    Whitespace(Index, u8),
    ByteFlip(Index, u8),
    Truncate(Index),
    ReorderKeys(Index),
    ObjectAsArray(Index, bool),
    NumberAsString(Index),
    Escape(Index),
    Delete(Index, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), prop::sample::select(vec![b' ', b'\n', b'\t', b'\r']))
            .prop_map(|(i, b)| Mutation::Whitespace(i, b)),
        (any::<Index>(), prop::sample::select(b"{}[],:\"\\0123456789-.eE naulrtfx".to_vec()))
            .prop_map(|(i, b)| Mutation::ByteFlip(i, b)),
        any::<Index>().prop_map(Mutation::Truncate),
        any::<Index>().prop_map(Mutation::ReorderKeys),
        (any::<Index>(), any::<bool>()).prop_map(|(i, values)| Mutation::ObjectAsArray(i, values)),
        any::<Index>().prop_map(Mutation::NumberAsString),
        any::<Index>().prop_map(Mutation::Escape),
        (any::<Index>(), 1u8..8).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

/// Char boundaries of `s` (and its end).
fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices().map(|(i, _)| i).chain([s.len()]).collect()
}

fn number_pointers(v: &JsonValue, at: String, out: &mut Vec<String>) {
    match v {
        JsonValue::Number(_) => out.push(at),
        JsonValue::Array(items) => {
            items.iter().enumerate().for_each(|(i, x)| number_pointers(x, format!("{at}/{i}"), out));
        }
        JsonValue::Object(map) => map
            .iter()
            .for_each(|(k, x)| number_pointers(x, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out)),
        _ => {}
    }
}

fn apply(text: &str, m: &Mutation) -> String {
    let doc = || serde_json::from_str::<JsonValue>(text).unwrap();
    match m {
        Mutation::Whitespace(i, b) => {
            let at = *i.get(&boundaries(text));
            format!("{}{}{}", &text[..at], char::from(*b), &text[at..])
        }
        Mutation::ByteFlip(i, b) => {
            let ascii: Vec<usize> = text.bytes().enumerate().filter(|(_, c)| c.is_ascii()).map(|(i, _)| i).collect();
            if ascii.is_empty() {
                return text.to_owned();
            }
            let at = *i.get(&ascii);
            format!("{}{}{}", &text[..at], char::from(*b), &text[at + 1..])
        }
        Mutation::Truncate(i) => text[..*i.get(&boundaries(text))].to_owned(),
        Mutation::Delete(i, n) => {
            let b = boundaries(text);
            let start = i.index(b.len());
            let end = b[(start + usize::from(*n)).min(b.len() - 1)];
            format!("{}{}", &text[..b[start]], &text[end..])
        }
        Mutation::ReorderKeys(i) => {
            let mut d = doc();
            let ptrs = object_pointers(&d, &[]);
            if ptrs.is_empty() {
                return text.to_owned();
            }
            let p = i.get(&ptrs).clone();
            if let Some(JsonValue::Object(map)) = d.pointer_mut(&p) {
                let mut entries: Vec<(String, JsonValue)> = std::mem::take(map).into_iter().collect();
                let by = 1.min(entries.len());
                entries.rotate_left(by);
                *map = entries.into_iter().collect();
            }
            d.to_string()
        }
        Mutation::ObjectAsArray(i, values) => {
            let d = doc();
            let ptrs = object_pointers(&d, &[]);
            if ptrs.is_empty() {
                return text.to_owned();
            }
            let p = i.get(&ptrs);
            let [empty, vals] = object_as_arrays(&d, p).unwrap();
            if *values { vals.to_string() } else { empty.to_string() }
        }
        Mutation::NumberAsString(i) => {
            let mut d = doc();
            let mut ptrs = Vec::new();
            number_pointers(&d, String::new(), &mut ptrs);
            if ptrs.is_empty() {
                return text.to_owned();
            }
            let p = i.get(&ptrs).clone();
            if let Some(slot) = d.pointer_mut(&p) {
                *slot = JsonValue::String(slot.to_string());
            }
            d.to_string()
        }
        Mutation::Escape(i) => {
            // Escape one character that sits inside a string (keys included).
            let mut in_string = false;
            let mut escaped = false;
            let mut inside = Vec::new();
            for (at, c) in text.char_indices() {
                if in_string && !escaped && c != '"' && c != '\\' {
                    inside.push((at, c));
                }
                match (in_string, escaped, c) {
                    (true, true, _) => escaped = false,
                    (true, false, '\\') => escaped = true,
                    (_, false, '"') => in_string = !in_string,
                    _ => {}
                }
            }
            if inside.is_empty() {
                return text.to_owned();
            }
            let (at, c) = *i.get(&inside);
            let mut units = [0u16; 2];
            let esc: String = c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect();
            format!("{}{}{}", &text[..at], esc, &text[at + c.len_utf8()..])
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Canonical text of any state: same value as serde, read without any fallback.
    #[test]
    fn arb_states_read_fast_and_equal(state in arb::agent_state()) {
        let json = as_message::to_json(&state);
        prop_assert_eq!(check_same(&json), Path::Fast { fallbacks: 0 });
        prop_assert_eq!(as_state::state_from_json(&json).unwrap(), state);
    }

    /// Mutated canonical text: both readers agree (both Ok with the same value, or the same error).
    #[test]
    fn mutated_states_agree(state in arb::agent_state(), mutations in prop::collection::vec(mutation(), 1..3)) {
        let mut text = as_message::to_json(&state);
        for m in &mutations {
            let valid = serde_json::from_str::<JsonValue>(&text).is_ok();
            if !valid && matches!(m, Mutation::ReorderKeys(_) | Mutation::ObjectAsArray(..) | Mutation::NumberAsString(_)) {
                continue;
            }
            text = apply(&text, m);
        }
        check_same(&text);
    }

    /// Arbitrary text, and JSON-ish text from the readers' own alphabet: no panic, same result.
    #[test]
    fn arbitrary_text_agrees(
        text in prop_oneof![
            any::<String>(),
            r#"\{"(session_id|summary|context|name|content|role|id|type|text)":("[a-z\\"]{0,3}"|\[|\{|[0-9-]{1,3}|null|,|\}|\])*"#,
        ]
    ) {
        check_same(&text);
    }

    /// Mutations of the golden files.
    #[test]
    fn mutated_goldens_agree(rich in any::<bool>(), m in mutation()) {
        let name = if rich { "rich_agent_state.compact.json" } else { "empty_agent_state.compact.json" };
        let text = std::fs::read_to_string(format!("{FIX}{name}")).unwrap();
        check_same(&apply(&text, &m));
    }
}
