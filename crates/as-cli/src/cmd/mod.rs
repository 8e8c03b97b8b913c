//! One module per top-level command. Add `pub(crate) mod <command>;` here and a variant in `main.rs`.

pub(crate) mod admin;
pub(crate) mod chat;
pub(crate) mod demo;
pub(crate) mod schema;
pub(crate) mod sessions;
pub(crate) mod state;

use crate::exit::{CliError, CliResult, ExitKind};

/// The bytes of an input file; `None` or `-` reads stdin. An input that cannot be read (missing
/// included) is exit 5, invalid input, for every command that reads one (exit 3 is for stored
/// things: sessions, schema names).
pub(crate) fn read_input(file: Option<&std::path::Path>) -> CliResult<Vec<u8>> {
    use std::io::Read as _;
    match file {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::read(p).map_err(|e| CliError::new(ExitKind::Invalid, format!("cannot read {}: {e}", p.display())))
        }
        _ => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::new(ExitKind::Invalid, format!("cannot read stdin: {e}")))?;
            Ok(buf)
        }
    }
}

/// Writes to stdout; a closed or failing stdout (`… | head -1`) is exit 1, not a panic.
pub(crate) fn out(args: std::fmt::Arguments<'_>) -> CliResult {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_fmt(args).and_then(|()| stdout.flush()).map_err(stdout_error)
}

/// A failed write to stdout: exit 1. A reader that went away (`… | head -1`) is no news to the
/// person who piped it, so that case says nothing.
pub(crate) fn stdout_error(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::silent(ExitKind::Failed)
    } else {
        CliError::new(ExitKind::Failed, format!("cannot write the output: {e}"))
    }
}

/// `println!` through [`out`]: `outln!(...)?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cmd::out(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;
