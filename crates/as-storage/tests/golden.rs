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

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// `encode_record` (hand-written state bytes under `to_json`) equals the derived serialization of
    /// the same record with `state.session_id` forced to the record id.
    #[test]
    fn encode_record_matches_derived(state in as_state::test_utils::arb::agent_state()) {
        let text = include_str!("../../../tests/fixtures/agentscope-2.0.4/session_record.compact.json");
        let rec: SessionRecord = as_message::from_json(text).unwrap();
        let encoded = as_storage::encode_record(&rec.meta(), &state);
        // The split form is the same bytes, cut exactly after the envelope.
        let (split, head) = as_storage::encode_record_split(&rec.meta(), &state);
        proptest::prop_assert_eq!(&split, &encoded);
        proptest::prop_assert_eq!(&split[..head], as_storage::encode_envelope(&rec.meta()));
        let joined = SessionRecord::from_parts(rec.meta(), state);
        proptest::prop_assert_eq!(encoded, serde_json::to_string(&joined).unwrap());
    }
}
