//! Library side of the `agentscope` binary: what `xtask` and tests share with it.
//!
//! Only the schema registry lives here; the commands are in the binary (`src/main.rs`, `src/cmd/`).
//!
//! ```
//! let names: Vec<&str> = as_cli::schemas::SCHEMAS.iter().map(|s| s.name).collect();
//! assert!(names.contains(&"agent-state"));
//! let text = as_cli::schemas::render(as_cli::schemas::find("msg").unwrap());
//! assert!(text.ends_with("}\n"));
//! ```

pub mod schemas;
