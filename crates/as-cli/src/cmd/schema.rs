//! `agentscope schema [NAME]`.

use super::outln;
use as_cli::schemas::{SCHEMAS, find, render};

use crate::GlobalArgs;
use crate::exit::{CliError, CliResult, ExitKind};

/// Arguments of `schema`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  agentscope schema\n  agentscope schema session-record > session-record.schema.json"
)]
pub(crate) struct SchemaArgs {
    /// The schema to print (`agent-state`, `msg`, `session-record`, …); omit to list them.
    name: Option<String>,
}

/// Prints one schema, or the list.
pub(crate) fn run(_global: &GlobalArgs, args: SchemaArgs) -> CliResult {
    match args.name {
        None => {
            for e in SCHEMAS {
                outln!("{:<16}{}", e.name, e.about)?;
            }
            Ok(())
        }
        Some(name) => {
            let entry = find(&name).ok_or_else(|| {
                let names: Vec<&str> = SCHEMAS.iter().map(|e| e.name).collect();
                CliError::new(ExitKind::NotFound, format!("no schema named {name:?}; known: {}", names.join(", ")))
            })?;
            super::out(format_args!("{}", render(entry)))
        }
    }
}
