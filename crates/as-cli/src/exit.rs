//! Exit codes of the `agentscope` binary (docs: `/work/shared/guides/cli.md`) and the error type
//! every command returns.

use std::fmt;
use std::process::ExitCode;

use as_storage::{StorageError, StorageErrorKind};

/// Success.
pub(crate) const OK: u8 = 0;
/// A check or validation failed.
pub(crate) const FAILED: u8 = 1;
/// Bad command-line usage (clap uses this code too).
pub(crate) const USAGE: u8 = 2;
/// The session (or other object) does not exist.
pub(crate) const NOT_FOUND: u8 = 3;
/// A concurrent writer won.
pub(crate) const CONFLICT: u8 = 4;
/// An invalid id or input.
pub(crate) const INVALID: u8 = 5;
/// The storage or model backend is unavailable or unusable (unreachable, locked, a file that is
/// not a database, a corrupt or read-only database, a full disk).
pub(crate) const UNAVAILABLE: u8 = 6;
/// Interrupted by Ctrl-C (state saved).
pub(crate) const INTERRUPTED: u8 = 130;

/// The exit-code table, shown at the end of `--help`.
pub(crate) const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    ok
  1    a check or validation failed
  2    usage error
  3    not found
  4    conflict (a concurrent writer won, or another process kept the session busy)
  5    invalid id or input
  6    storage or model backend unavailable or unusable (down, locked, not a database, corrupt)
  130  interrupted by Ctrl-C (state saved)";

/// Why a command failed; decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum ExitKind {
    /// Exit 1.
    Failed,
    /// Exit 2.
    Usage,
    /// Exit 3.
    NotFound,
    /// Exit 4.
    Conflict,
    /// Exit 5.
    Invalid,
    /// Exit 6.
    Unavailable,
    /// Exit 130.
    Interrupted,
}

impl ExitKind {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Failed => FAILED,
            Self::Usage => USAGE,
            Self::NotFound => NOT_FOUND,
            Self::Conflict => CONFLICT,
            Self::Invalid => INVALID,
            Self::Unavailable => UNAVAILABLE,
            Self::Interrupted => INTERRUPTED,
        }
    }
}

/// A command's failure: a kind (the exit code) and a message for stderr.
///
/// An empty message means the command already printed its diagnostics (e.g. `state check`).
#[derive(Debug, thiserror::Error)]
pub(crate) struct CliError {
    kind: ExitKind,
    message: String,
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl CliError {
    /// A failure of `kind` with a message.
    pub(crate) fn new(kind: ExitKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// A failure whose diagnostics were already printed.
    pub(crate) fn silent(kind: ExitKind) -> Self {
        Self { kind, message: String::new() }
    }

    /// The kind.
    pub(crate) fn kind(&self) -> ExitKind {
        self.kind
    }

    /// Prints the message (if any) to stderr and returns the exit code.
    pub(crate) fn report(&self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("error: {}", self.message);
        }
        ExitCode::from(self.kind.code())
    }
}

impl From<StorageError> for CliError {
    fn from(e: StorageError) -> Self {
        let kind = match e.kind() {
            StorageErrorKind::NotFound => ExitKind::NotFound,
            StorageErrorKind::AlreadyExists | StorageErrorKind::Conflict => ExitKind::Conflict,
            StorageErrorKind::InvalidKey | StorageErrorKind::InvalidInput | StorageErrorKind::TooLarge => {
                ExitKind::Invalid
            }
            // `Backend` is the store itself failing (SQLite: not a database, corrupt, read-only,
            // disk full; Redis: an error reply): the store cannot be used, like an unreachable one.
            StorageErrorKind::Unavailable | StorageErrorKind::Backend => ExitKind::Unavailable,
            // The store, as configured, cannot do this (the compat key layout on a Redis Cluster,
            // an optional method a backend lacks): the fix is another `--storage` URL or other
            // arguments, and retrying the same command never helps. A usage error, not a failed check.
            StorageErrorKind::Unsupported => ExitKind::Usage,
            _ => ExitKind::Failed,
        };
        Self::new(kind, e.to_string())
    }
}

impl From<as_message::MessageError> for CliError {
    fn from(e: as_message::MessageError) -> Self {
        Self::new(ExitKind::Invalid, e.to_string())
    }
}

/// `Result` with [`CliError`].
pub(crate) type CliResult<T = ()> = Result<T, CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_cli_guide() {
        let table = [
            (ExitKind::Failed, 1),
            (ExitKind::Usage, 2),
            (ExitKind::NotFound, 3),
            (ExitKind::Conflict, 4),
            (ExitKind::Invalid, 5),
            (ExitKind::Unavailable, 6),
            (ExitKind::Interrupted, 130),
        ];
        for (kind, code) in table {
            assert_eq!(kind.code(), code, "{kind:?}");
            assert!(EXIT_CODES_HELP.contains(&format!("  {code} ")), "help lists {code}");
        }
        assert_eq!(OK, 0);
    }

    #[test]
    fn storage_errors_map_to_codes() {
        let e = StorageError::new(StorageErrorKind::NotFound, "memory", "get", "no such session");
        assert_eq!(CliError::from(e).kind(), ExitKind::NotFound);
        let e = StorageError::new(StorageErrorKind::Conflict, "memory", "put", "lost");
        assert_eq!(CliError::from(e).kind(), ExitKind::Conflict);
        let e = StorageError::new(StorageErrorKind::Unavailable, "redis", "get", "down");
        assert_eq!(CliError::from(e).kind(), ExitKind::Unavailable);
        let e = StorageError::new(StorageErrorKind::Backend, "sqlite", "open", "x.db is not an SQLite database");
        assert_eq!(CliError::from(e).kind(), ExitKind::Unavailable);
        let e = StorageError::new(StorageErrorKind::Serialization, "sqlite", "get_session", "bad record");
        assert_eq!(CliError::from(e).kind(), ExitKind::Failed);
        let e =
            StorageError::new(StorageErrorKind::Unsupported, "redis", "open", "key layout compat: use layout=cluster");
        assert_eq!(CliError::from(e).kind(), ExitKind::Usage);
    }
}
