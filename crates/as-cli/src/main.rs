//! `agentscope`: the command line of agentscope-rs.
//!
//! Each command lives in its own module under `src/cmd/`; this file only declares the
//! top-level arguments and dispatches. See `/work/shared/guides/cli.md` for the surface.

mod cmd;
mod exit;
mod provider;
mod render;
mod run_lock;
// Other top-level modules (e.g. `mod storage_url;`) go here.
mod storage_url;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::exit::{CliResult, EXIT_CODES_HELP};

/// mimalloc instead of the system allocator: loading and dropping a state is mostly small
/// allocations (a few per message), and mimalloc does them in about a third fewer instructions
/// than glibc's malloc (callgrind, parse and drop of a 1000-message state: 7.2M -> 4.7M).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Options every command sees.
#[derive(Clone, Debug, Default, clap::Args)]
pub(crate) struct GlobalArgs {
    /// Session storage: `memory`, `sqlite:PATH`, `redis://[:password@]host:port[/db]`, `rediss://…`.
    #[arg(long, global = true, env = "AGENTSCOPE_STORAGE", hide_env_values = true, value_name = "URL")]
    pub(crate) storage: Option<String>,
    /// Whether `storage` came from `AGENTSCOPE_STORAGE` rather than `--storage` (set by `main`).
    #[arg(skip)]
    pub(crate) storage_from_env: bool,
}

/// AgentScope agents in Rust: wire-compatible state, sessions and chat.
#[derive(Debug, Parser)]
#[command(name = "agentscope", version, about, after_help = top_help())]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a JSON Schema of a wire type; without NAME, list them.
    Schema(cmd::schema::SchemaArgs),
    /// Read, check and canonicalise AgentState / SessionRecord / Msg JSON files.
    #[command(
        subcommand,
        after_help = "Example:\n  agentscope state check state.json record.json\n  agentscope state fmt --kind state < state.json"
    )]
    State(cmd::state::StateCommand),
    /// Create, show, list, update and delete stored sessions.
    #[command(
        subcommand,
        after_help = "Example:\n  agentscope sessions list --user alice --agent friday\n  \
                      agentscope sessions show --user alice --agent friday --session 3f2a… --summary"
    )]
    Sessions(cmd::sessions::SessionsCommand),
    /// Chat with an agent in a persistent session (interactive, or one turn with --message).
    Chat(cmd::chat::ChatArgs),
    /// Walk through a session's lifecycle offline, each turn in a new process; pass/fail per step.
    Demo(cmd::demo::DemoArgs),
    /// One step of `demo`, run in its own process (internal).
    #[command(hide = true)]
    DemoStep(cmd::demo::DemoStepArgs),
}

/// Examples and exit codes after the top-level `--help`.
fn top_help() -> String {
    format!(
        "Examples:\n  agentscope demo\n  agentscope chat --user alice --agent friday --model openai:gpt-4o-mini\n  \
         agentscope sessions list --user alice --agent friday\n  agentscope schema agent-state\n\n{EXIT_CODES_HELP}"
    )
}

async fn dispatch(cli: Cli) -> CliResult {
    let global = cli.global;
    match cli.command {
        Command::Schema(args) => cmd::schema::run(&global, args),
        Command::State(args) => cmd::state::run(&global, args),
        Command::Sessions(args) => cmd::sessions::run(&global, args).await,
        Command::Chat(args) => cmd::chat::run(&global, args).await,
        Command::Demo(args) => cmd::demo::run(&global, args).await,
        Command::DemoStep(args) => cmd::demo::run_step(&global, args).await,
        // ---- new commands dispatch here (async ones: `cmd::x::run(&global, args).await`) ----
    }
}

/// The command line: the derived one, with the `--storage` help that names the resolved default
/// store (which clap's derive text cannot), and the demo's own (it uses neither that default nor
/// `AGENTSCOPE_STORAGE`).
fn command() -> clap::Command {
    cmd::demo::with_storage_help(storage_url::with_storage_help(<Cli as clap::CommandFactory>::command()))
}

#[tokio::main]
async fn main() -> ExitCode {
    let matches = command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // `AGENTSCOPE_STORAGE=` (exported but empty) means the default store, as an empty
    // AGENTSCOPE_HOME does; an empty `--storage ''` typed on the command line stays a usage error.
    cli.global.storage_from_env = matches.value_source("storage") == Some(clap::parser::ValueSource::EnvVariable);
    if cli.global.storage_from_env && cli.global.storage.as_deref().is_some_and(|s| s.trim().is_empty()) {
        cli.global.storage = None;
    }
    match dispatch(cli).await {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => e.report(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
        super::command().debug_assert();
    }
}
