//! The session record golden survives a read and a write byte for byte.
use as_storage::SessionRecord;

#[test]
fn session_record_golden_roundtrip() {
    let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
    let rec: SessionRecord = as_message::from_json(text).unwrap();
    assert!(as_message::to_json(&rec) == text, "plain serialization is byte-identical");
    // The canonical (stored) form differs only in forcing state.session_id to the record id.
    let canonical = rec.to_canonical_json();
    let expected =
        text.replace(r#""state":{"session_id":"sess_fixture_0001""#, r#""state":{"session_id":"sessrec_fixture_0001""#);
    assert!(canonical == expected, "canonical form forces state.session_id = id");
}
