//! `decode_record` returns exactly what `as_message::from_json::<SessionRecord>` returns (same record or
//! same error) on canonical records, the golden files and mutated input, and reads canonical records
//! without declining or falling back.

#![cfg(test)]

use as_message::read::Cursor;
use as_state::test_utils::{arb, conversation_state, deterministic};
use as_storage::{SessionMeta, SessionRecord, decode_record, encode_record, read_record};
use proptest::prelude::*;
use proptest::sample::Index;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agentscope-2.0.4/");

/// Local fallbacks of the fast reader, or `None` when it declined.
fn fast_fallbacks(text: &str) -> Option<usize> {
    let mut c = Cursor::new(text);
    read_record(&mut c).filter(|_| c.is_at_end()).map(|_| c.fallbacks())
}

/// Both readers agree on `text`; returns the fast reader's fallbacks (`None`: declined).
fn check_same(text: &str) -> Option<usize> {
    let slow = deterministic(|| as_message::from_json::<SessionRecord>(text));
    let fast = deterministic(|| decode_record(text));
    assert_eq!(fast, slow, "readers disagree on {text:?}");
    let path = fast_fallbacks(text);
    if path.is_some() {
        assert!(slow.is_ok(), "fast reader accepted what serde rejects: {text:?}");
    }
    path
}

fn meta(variant: usize) -> SessionMeta {
    let config = [
        r#"{"workspace_id":"ws"}"#,
        r#"{"workspace_id":"ws","name":"n","chat_model_config":{"type":"openai_credential","credential_id":"c","model":"m","parameters":{"temperature":0.2,"max_tokens":4096}},"fallback_chat_model_config":null,"tts_model_config":null,"knowledge_config":{"knowledge_base_ids":["kb"],"parameters":{}}}"#,
    ][variant % 2];
    let (source, schedule, team) =
        [("user", "null", "null"), ("schedule", r#""sched-1""#, r#""team-\u00e9""#)][variant / 2 % 2];
    as_message::from_json(&format!(
        r#"{{"id":"rec-{variant}","updated_at":"2025-06-01T10:05:30.123456","created_at":"2025-06-01T10:00:00","user_id":"u","agent_id":"a","source":"{source}","source_schedule_id":{schedule},"team_id":{team},"config":{config}}}"#
    ))
    .unwrap()
}

#[test]
fn record_goldens_read_fast_and_equal() {
    for name in ["session_record.compact.json", "redis-session-after-cycle.compact.json"] {
        let text = std::fs::read_to_string(format!("{FIX}{name}")).unwrap();
        assert_eq!(check_same(&text), Some(0), "{name}");
        let record = decode_record(&text).unwrap();
        assert_eq!(as_message::to_json(&record), text, "{name}");
    }
    let pretty = std::fs::read_to_string(format!("{FIX}session_record.pretty.json")).unwrap();
    assert_eq!(check_same(&pretty), None);
}

#[test]
fn encoded_records_read_fast_and_equal() {
    for variant in 0..4 {
        let state = conversation_state(9);
        let json = encode_record(&meta(variant), &state);
        assert_eq!(check_same(&json), Some(0), "variant {variant}");
        assert_eq!(decode_record(&json).unwrap().state.context, state.context);
    }
}

#[test]
fn envelope_variations_agree() {
    let json = encode_record(&meta(3), &conversation_state(5));
    for (from, to) in [
        (r#""source":"schedule""#, r#""source":"user""#),
        (r#""source":"schedule""#, r#""source":"sch\u0065dule""#),
        (r#""source":"schedule""#, r#""source":"other""#),
        (r#""source":"schedule""#, r#""source":null"#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":1748772000.5"#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":"not a time""#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":"2025-06-01T10:05:30Z""#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":"2025-06-01 10:05:30.123456""#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":"2025-06-01T10:05:30.12345\u0036""#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":"2025-06-01T10:05:60""#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":"2025-02-30T10:05:30""#),
        (r#""updated_at":"2025-06-01T10:05:30.123456""#, r#""updated_at":" 2025-06-01T10:05:30 ""#),
        (r#""created_at":"2025-06-01T10:00:00""#, r#""created_at":"2025-06-01""#),
        (r#""created_at":"2025-06-01T10:00:00""#, r#""created_at":null"#),
        (r#""team_id":"team-é""#, r#""team_id":7"#),
        (r#""user_id":"u","#, ""),
        (r#""config":{"workspace_id":"ws","#, r#""config":{"#),
        (r#""state":{"#, r#""state":{"session_id":"other","#),
        (r#","state":{"session_id":"rec-3""#, r#","state":{}, "x":{"session_id":"rec-3""#),
        (r#"{"id":"rec-3","#, "{"),
    ] {
        assert!(json.contains(from), "{from}");
        check_same(&json.replacen(from, to, 1));
    }
    // The state may be absent (default) or not canonical: the serde path reads it.
    let no_state = &json[..json.find(r#","state":"#).unwrap()];
    assert_eq!(check_same(&format!("{no_state}}}")), None);
}

/// Char boundaries of `s` (and its end).
fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices().map(|(i, _)| i).chain([s.len()]).collect()
}

#[derive(Clone, Debug)]
enum Mutation {
    Insert(Index, char),
    Replace(Index, char),
    Truncate(Index),
    Delete(Index, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let ch = prop::sample::select(" \n{}[],:\"\\0123456789-.eEnaulrtfxé".chars().collect::<Vec<_>>());
    prop_oneof![
        (any::<Index>(), ch.clone()).prop_map(|(i, c)| Mutation::Insert(i, c)),
        (any::<Index>(), ch).prop_map(|(i, c)| Mutation::Replace(i, c)),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 1usize..12).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let b = boundaries(text);
    match m {
        Mutation::Insert(i, c) => {
            let at = *i.get(&b);
            format!("{}{c}{}", &text[..at], &text[at..])
        }
        Mutation::Replace(i, c) => {
            if b.len() < 2 {
                return text.to_owned();
            }
            let k = i.index(b.len() - 1);
            format!("{}{c}{}", &text[..b[k]], &text[b[k + 1]..])
        }
        Mutation::Truncate(i) => text[..*i.get(&b)].to_owned(),
        Mutation::Delete(i, n) => {
            let k = i.index(b.len());
            format!("{}{}", &text[..b[k]], &text[b[(k + n).min(b.len() - 1)]..])
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any state in any envelope: read fast, without fallback, equal to serde's record.
    #[test]
    fn arb_records_read_fast(variant in 0usize..4, state in arb::agent_state()) {
        let json = encode_record(&meta(variant), &state);
        prop_assert_eq!(check_same(&json), Some(0));
    }

    /// Mutated records: both readers agree.
    #[test]
    fn mutated_records_agree(
        golden in any::<bool>(),
        variant in 0usize..4,
        state in arb::agent_state(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut text = if golden {
            std::fs::read_to_string(format!("{FIX}session_record.compact.json")).unwrap()
        } else {
            encode_record(&meta(variant), &state)
        };
        for m in &mutations {
            text = apply(&text, m);
        }
        check_same(&text);
    }
}

/// A record whose free-form state data nests past serde_json's 128 levels (and within what
/// AgentScope 2.0.4 reads) is read, and written back byte for byte; a state that deep read from a
/// file is stored as a readable record.
#[test]
fn records_nested_as_deep_as_python_reads_them_are_read() {
    for arrays in [126, 150, 195] {
        let state = format!(r#"{{"middle_context":{{"a":{}{}}}}}"#, "[".repeat(arrays), "]".repeat(arrays));
        let state = as_state::state_from_json(&state).unwrap_or_else(|e| panic!("state, {arrays}: {e}"));
        let text = encode_record(&meta(0), &state);
        let rec = decode_record(&text).unwrap_or_else(|e| panic!("record, {arrays}: {e}"));
        assert_eq!(encode_record(&rec.meta(), &rec.state), text);
        check_same(&text);
    }
}
