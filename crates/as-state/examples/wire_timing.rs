//! Times AgentState serialize and parse without a benchmark harness, for CPU-time measurement
//! on a busy machine: `perf stat -e task-clock target/release/examples/wire_timing ser 1000 2000`.
//!
//! Arguments: `ser|ser-into|parse|parse-serde`, the number of messages, the number of iterations.
//! `parse` is [`as_state::state_from_json`] (the fast canonical reader), `parse-serde` the serde path
//! (`as_message::from_json`) it falls back to.

use std::hint::black_box;

use as_state::AgentState;
use as_state::test_utils::conversation_state;

/// With `--features timing-mimalloc`: mimalloc, the `agentscope` binary's allocator.
#[cfg(feature = "timing-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(op), Some(n), Some(iters)) = (args.first(), args.get(1), args.get(2)) else {
        return Err("usage: wire_timing ser|ser-into|parse|parse-serde MESSAGES ITERATIONS".into());
    };
    let n: usize = n.parse()?;
    let iters: usize = iters.parse()?;
    let state = conversation_state(n);
    let json = as_message::to_json(&state);
    let mut buf = String::new();
    let start = std::time::Instant::now();
    for _ in 0..iters {
        match op.as_str() {
            "ser" => {
                black_box(as_message::to_json(black_box(&state)));
            }
            "ser-into" => {
                buf.clear();
                as_message::WriteJson::write_json(black_box(&state), &mut buf);
                black_box(&buf);
            }
            "parse-serde" => {
                black_box(as_message::from_json::<AgentState>(black_box(&json))?);
            }
            _ => {
                black_box(as_state::state_from_json(black_box(&json))?);
            }
        }
    }
    let per = start.elapsed() / u32::try_from(iters)?;
    eprintln!("{op} {n} messages ({} bytes): {per:?} per op (wall)", json.len());
    Ok(())
}
