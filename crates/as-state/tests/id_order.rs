//! Ids are drawn from the id factory in the order AgentScope 2.0.4 draws them, so a deterministic
//! factory gives the same ids as Python's seeded one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use as_state::AgentState;

/// Checked against 2.0.4: `AgentState(session_id="s1")` takes `id0000` as its reply id, and the
/// reply message takes the reply id without drawing one.
#[test]
fn ids_are_drawn_in_python_order() {
    let counter = Arc::new(AtomicUsize::new(0));
    let factory: as_message::IdFactory = {
        let c = counter.clone();
        Arc::new(move || format!("id{:04}", c.fetch_add(1, Ordering::SeqCst)))
    };
    as_message::with_id_factory(factory, || {
        let mut st = AgentState::for_session("s1");
        assert_eq!(st.reply_id, "id0000");
        st.append_context("Friday", vec![]);
        assert_eq!(st.context[0].id, "id0000");
        assert_eq!(as_message::generate_id(), "id0001", "appending drew no id");
        let d = AgentState::default();
        assert_eq!((d.session_id.as_str(), d.reply_id.as_str()), ("id0002", "id0003"));
    });
}
