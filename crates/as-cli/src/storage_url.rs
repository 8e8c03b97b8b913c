//! `--storage URL` / `AGENTSCOPE_STORAGE`: parse the URL and open the store it names.
//!
//! | URL | store |
//! |---|---|
//! | `memory` | [`as_storage::InMemoryStorage`]: lives for one process |
//! | `sqlite:PATH` | `as_storage_sqlite::SqliteStorage` on one file (a leading `~/` is the home directory) |
//! | `redis://[:password@]host:port[/db][?layout=compat\|cluster&ttl=SECONDS]`, `rediss://…` (TLS), `redis-cluster://host:port?node=host:port…` | [`as_storage_redis::RedisStorage`] (AgentScope 2.0.4's keys by default; `layout=cluster` for Redis Cluster; `ttl` a sliding key TTL) |
//! | (none) | the default store (see [`DEFAULT_SQLITE_FILE`]) |

use std::path::PathBuf;
use std::sync::Arc;

use as_storage::SharedStorage;

use crate::exit::{CliError, CliResult, ExitKind};

/// File name of the default SQLite store, in the directory [`default_sqlite_path`] picks.
pub(crate) const DEFAULT_SQLITE_FILE: &str = "sessions.db";

/// Where the default store lives: `$AGENTSCOPE_HOME/sessions.db` when set, else
/// `$XDG_DATA_HOME/agentscope/sessions.db`, else `~/.local/share/agentscope/sessions.db`. An error
/// when no home directory is known, or AGENTSCOPE_HOME is relative: there is no default then (a
/// `./sessions.db` would be another database in every directory a command runs from).
pub(crate) fn default_sqlite_path() -> Result<PathBuf, NoDefaultStore> {
    resolve_default_sqlite_path(
        std::env::var_os("AGENTSCOPE_HOME"),
        std::env::var_os("XDG_DATA_HOME"),
        std::env::var_os("HOME"),
    )
}

/// Why there is no default store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NoDefaultStore {
    /// HOME is unset or relative, and neither AGENTSCOPE_HOME nor an absolute XDG_DATA_HOME is set.
    NoHome,
    /// AGENTSCOPE_HOME is set to this relative path. It is refused, not ignored: falling back to
    /// XDG_DATA_HOME or HOME would put the sessions where whoever set it did not want them.
    RelativeAgentscopeHome(PathBuf),
}

impl NoDefaultStore {
    /// The usage error: the cause and the fix.
    fn message(&self) -> String {
        match self {
            Self::NoHome => "no default store: no home directory is known (HOME is unset or relative, and neither \
                             AGENTSCOPE_HOME nor XDG_DATA_HOME is set); give --storage sqlite:/full/path.db (or \
                             AGENTSCOPE_STORAGE), or set AGENTSCOPE_HOME to a directory for the default store"
                .to_owned(),
            Self::RelativeAgentscopeHome(dir) => format!(
                "no default store: AGENTSCOPE_HOME is a relative path ({:?}), which would name another database in \
                 every directory a command runs from; set it to an absolute directory, or give --storage \
                 sqlite:/full/path.db (or AGENTSCOPE_STORAGE)",
                dir.display().to_string()
            ),
        }
    }

    /// What `--help` says instead of the default.
    fn help(&self) -> &'static str {
        match self {
            Self::NoHome => "none, as no home directory is known; set AGENTSCOPE_HOME or give --storage",
            Self::RelativeAgentscopeHome(_) => {
                "none, as AGENTSCOPE_HOME is a relative path; set it to an absolute directory or give --storage"
            }
        }
    }
}

/// [`default_sqlite_path`] from explicit environment values. Empty values count as unset. A relative
/// `XDG_DATA_HOME` is ignored (the XDG base directory spec); a relative `HOME` means no home is known
/// and a relative `AGENTSCOPE_HOME` is refused, as either would name another file in each working
/// directory.
fn resolve_default_sqlite_path(
    agentscope_home: Option<std::ffi::OsString>,
    xdg_data_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Result<PathBuf, NoDefaultStore> {
    let set = |v: Option<std::ffi::OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(agentscope_home) {
        if !dir.is_absolute() {
            return Err(NoDefaultStore::RelativeAgentscopeHome(dir));
        }
        return Ok(dir.join(DEFAULT_SQLITE_FILE));
    }
    if let Some(dir) = set(xdg_data_home).filter(|d| d.is_absolute()) {
        return Ok(dir.join("agentscope").join(DEFAULT_SQLITE_FILE));
    }
    set(home)
        .filter(|h| h.is_absolute())
        .map(|h| h.join(".local/share/agentscope").join(DEFAULT_SQLITE_FILE))
        .ok_or(NoDefaultStore::NoHome)
}

/// The `--storage` help text, naming the default this process would use.
pub(crate) fn storage_help() -> String {
    let default = match default_sqlite_path() {
        Ok(path) => format!("sqlite:{}; set AGENTSCOPE_HOME to move it", path.display()),
        Err(no) => no.help().to_owned(),
    };
    format!(
        "Session storage: `memory`, `sqlite:PATH`, `redis://[:password@]host:port[/db][?layout=compat|cluster&ttl=SECONDS]`, `rediss://…` \
         [default: {default}]"
    )
}

/// `command` with the resolved default in the `--storage` help (clap's derive text is static).
pub(crate) fn with_storage_help(command: clap::Command) -> clap::Command {
    command.mut_arg("storage", |a| a.help(storage_help()))
}

/// A `sqlite:` path with a leading `~/` read as the home directory `home` (the shell does not expand
/// `~` after `sqlite:`, and a directory named `~` in the working directory is never what was meant).
/// Another leading `~` (`~user/…`, a bare `~`, `~x.db`) is a usage error, as is `~/` with no home.
fn expand_home(path: &str, home: Option<std::ffi::OsString>) -> CliResult<PathBuf> {
    if !path.starts_with('~') {
        return Ok(PathBuf::from(path));
    }
    let usage = |m: String| CliError::new(ExitKind::Usage, m);
    let Some(rest) = path.strip_prefix("~/") else {
        return Err(usage(format!(
            "--storage sqlite:{path}: only a leading ~/ (your home directory) is expanded; write the full path \
             (or ./{path} for a file of that name here)"
        )));
    };
    match home.filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(rest)),
        None => Err(usage(format!(
            "--storage sqlite:{path}: HOME is not set, so ~ cannot be expanded; write the full path"
        ))),
    }
}

/// A parsed `--storage` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StorageUrl {
    /// `memory`.
    Memory,
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `redis://…` or `rediss://…`, kept whole (query options included).
    Redis(String),
}

impl StorageUrl {
    /// Parses a `--storage` value; `None` is the default store.
    pub(crate) fn parse(url: Option<&str>) -> CliResult<Self> {
        let Some(url) = url.map(str::trim) else { return Self::default_store() };
        if url == "memory" || url == "memory:" {
            return Ok(Self::Memory);
        }
        // ---- sqlite engineer: options (`?busy_timeout=…`) and path rules go here ----
        if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            if path.is_empty() {
                return Err(CliError::new(ExitKind::Usage, "--storage sqlite:PATH needs a file path"));
            }
            return Ok(Self::Sqlite(expand_home(path, std::env::var_os("HOME"))?));
        }
        if ["redis://", "rediss://", "redis-cluster://", "rediss-cluster://"].iter().any(|p| url.starts_with(p)) {
            as_storage_redis::RedisStorageConfig::from_url(url)
                .map_err(|e| CliError::new(ExitKind::Usage, format!("--storage: {}", e.message())))?;
            return Ok(Self::Redis(url.to_owned()));
        }
        Err(CliError::new(
            ExitKind::Usage,
            format!(
                "unsupported --storage {:?}: expected memory, sqlite:PATH or redis://host:port",
                as_storage_redis::redact_url(url)
            ),
        ))
    }

    /// The store used without `--storage`: SQLite at [`default_sqlite_path`]; a usage error when
    /// there is no default.
    fn default_store() -> CliResult<Self> {
        default_sqlite_path().map(Self::Sqlite).map_err(|no| CliError::new(ExitKind::Usage, no.message()))
    }

    /// Builds and opens the store and, `for_turns`, the session lock turns on it take: AgentScope's
    /// chat-run lock on Redis (shared with other machines and with Python 2.0.4), an OS file lock
    /// per session next to a SQLite database (one machine), none in memory (one process). A
    /// backend that cannot be reached is exit 6.
    pub(crate) async fn open(
        &self,
        for_turns: bool,
    ) -> CliResult<(SharedStorage, Option<Arc<dyn as_agent::SessionLock>>)> {
        let opened = |e| crate::cmd::chat::storage_error(e);
        let wait = if for_turns {
            Some(crate::run_lock::wait_from(std::env::var(crate::run_lock::WAIT_VAR).ok().as_deref())?)
        } else {
            None
        };
        match self {
            Self::Memory => {
                let storage: SharedStorage = Arc::new(as_storage::InMemoryStorage::new());
                storage.open().await.map_err(opened)?;
                Ok((storage, None))
            }
            // ---- sqlite engineer: SqliteStorage options ----
            Self::Sqlite(path) => {
                let storage: SharedStorage = Arc::new(as_storage_sqlite::SqliteStorage::new(path));
                storage.open().await.map_err(opened)?;
                // Next to the database, named after its real path (once it exists), so every
                // spelling of the path (a symlink, `./x.db`) shares the same locks.
                let mut dir = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()).into_os_string();
                dir.push(".locks");
                Ok((storage, wait.map(|w| crate::run_lock::FileRunLock::shared(dir.into(), w))))
            }
            Self::Redis(url) => {
                let redis = as_storage_redis::RedisStorage::from_url(url)
                    .map_err(|e| CliError::new(ExitKind::Usage, format!("--storage: {}", e.message())))?;
                as_storage::StorageBase::open(&redis).await.map_err(opened)?;
                let lock = match wait {
                    Some(w) => Some(crate::run_lock::RedisRunLock::shared(&redis, w).map_err(opened)?),
                    None => None,
                };
                Ok((Arc::new(redis), lock))
            }
        }
    }
}

/// Parses and opens `url` (the `--storage` value).
pub(crate) async fn open(url: Option<&str>) -> CliResult<SharedStorage> {
    Ok(StorageUrl::parse(url)?.open(false).await?.0)
}

/// [`open`] for commands that only read: a SQLite file that does not exist is not created (a
/// typo'd path would otherwise leave a fresh database behind and look like an empty store); it
/// reads as an empty store, with a note on stderr.
pub(crate) async fn open_for_reading(url: Option<&str>) -> CliResult<SharedStorage> {
    let parsed = StorageUrl::parse(url)?;
    if let StorageUrl::Sqlite(path) = &parsed
        && !path.exists()
    {
        eprintln!("note: there is no database at {} yet: nothing is stored there", path.display());
        let empty: SharedStorage = Arc::new(as_storage::InMemoryStorage::new());
        empty.open().await.map_err(crate::cmd::chat::storage_error)?;
        return Ok(empty);
    }
    Ok(parsed.open(false).await?.0)
}

/// [`open`], with the session lock turns on this store take (Redis: AgentScope's chat-run lock).
pub(crate) async fn open_for_turns(
    url: Option<&str>,
) -> CliResult<(SharedStorage, Option<Arc<dyn as_agent::SessionLock>>)> {
    StorageUrl::parse(url)?.open(true).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expect: Result<StorageUrl, ExitKind>) {
        let got = StorageUrl::parse(Some(url)).map_err(|e| e.kind());
        assert_eq!(got, expect, "{url:?}");
    }

    #[test]
    fn passwords_are_never_shown() {
        for (url, shown) in [
            ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
            ("rediss://user:pw@h", "rediss://user:***@h"),
            ("Redis://:pw@h", "Redis://:***@h"),
            // An option that is not one of ours may hold a secret under any name: its value is hidden too.
            ("valkey://pw@h?x=1", "valkey://***@h?x=***"),
            ("redis://:p@ss@h", "redis://:***@h"),
            ("redis://h:6379", "redis://h:6379"),
            ("sqlite:/tmp/a@b.db", "sqlite:/tmp/a@b.db"),
            // Passwords a URL parser chokes on (base64 often has `/`), and a typo'd scheme.
            ("redis://:s3cr/t@127.0.0.1:6379", "redis://:***@127.0.0.1:6379"),
            ("redis://u:a?b#c@h/1", "redis://u:***@h/1"),
            ("redis:/:hunter2@h", "redis:***@h"),
            ("REDIS:hunter2@h", "REDIS:***@h"),
            (":hunter2@127.0.0.1:6432", "***@127.0.0.1:6432"),
            ("user:hunter2@h", "***@h"),
        ] {
            assert_eq!(as_storage_redis::redact_url(url), shown, "{url}");
        }
        for bad in ["Valkey://:hunter2@h:6379", "redis://:hunt/er2@h:6379", "redis:/:hunter2@h"] {
            let e = StorageUrl::parse(Some(bad)).unwrap_err();
            assert!(!e.to_string().contains("hunt"), "{e}");
        }
    }

    #[test]
    fn parses_urls() {
        check("memory", Ok(StorageUrl::Memory));
        check(" memory ", Ok(StorageUrl::Memory));
        check("sqlite:/tmp/a.db", Ok(StorageUrl::Sqlite("/tmp/a.db".into())));
        check("sqlite:rel.db", Ok(StorageUrl::Sqlite("rel.db".into())));
        check("sqlite://abs/x.db", Ok(StorageUrl::Sqlite("abs/x.db".into())));
        check("redis://127.0.0.1:6379/0?ttl=60", Ok(StorageUrl::Redis("redis://127.0.0.1:6379/0?ttl=60".into())));
        check("rediss://h:1", Ok(StorageUrl::Redis("rediss://h:1".into())));
        check(
            "redis://:pw@127.0.0.1:7000/2?layout=cluster&ttl=3600",
            Ok(StorageUrl::Redis("redis://:pw@127.0.0.1:7000/2?layout=cluster&ttl=3600".into())),
        );
        check("redis-cluster://h:1?node=h:2", Ok(StorageUrl::Redis("redis-cluster://h:1?node=h:2".into())));
        check("redis://h:1?layout=weird", Err(ExitKind::Usage));
        check("redis://h:1?ttl=soon", Err(ExitKind::Usage));
        check("redis://h:1?ttl=0", Err(ExitKind::Usage));
        check("sqlite:", Err(ExitKind::Usage));
        check("ftp://x", Err(ExitKind::Usage));
        check("", Err(ExitKind::Usage));
        check("Memory", Err(ExitKind::Usage));
    }

    #[test]
    fn a_leading_tilde_is_the_home_directory() {
        for (path, home, expect) in [
            ("~/x.db", Some("/home/u"), Ok("/home/u/x.db")),
            ("~/a/b.db", Some("/home/u/"), Ok("/home/u/a/b.db")),
            ("x~/y.db", Some("/home/u"), Ok("x~/y.db")),
            ("/tmp/~/y.db", None, Ok("/tmp/~/y.db")),
            ("./~", None, Ok("./~")),
            ("~/x.db", None, Err(ExitKind::Usage)),
            ("~/x.db", Some(""), Err(ExitKind::Usage)),
            ("~other/x.db", Some("/home/u"), Err(ExitKind::Usage)),
            ("~", Some("/home/u"), Err(ExitKind::Usage)),
            ("~x.db", Some("/home/u"), Err(ExitKind::Usage)),
        ] {
            let got = expand_home(path, home.map(Into::into)).map_err(|e| e.kind());
            assert_eq!(got, expect.map(PathBuf::from), "{path} with HOME {home:?}");
        }
    }

    #[test]
    fn default_path_follows_agentscope_home_then_xdg_then_home() {
        let r = |a: Option<&str>, x: Option<&str>, h: Option<&str>| {
            resolve_default_sqlite_path(a.map(Into::into), x.map(Into::into), h.map(Into::into))
        };
        let no_home = Err(NoDefaultStore::NoHome);
        let relative = |d: &str| Err(NoDefaultStore::RelativeAgentscopeHome(d.into()));
        for (a, x, h, expect) in [
            (Some("/srv/as"), Some("/x"), Some("/home/u"), Ok("/srv/as/sessions.db")),
            (None, Some("/x/data"), Some("/home/u"), Ok("/x/data/agentscope/sessions.db")),
            (Some(""), Some(""), Some("/home/u"), Ok("/home/u/.local/share/agentscope/sessions.db")),
            (None, Some("rel"), Some("/home/u"), Ok("/home/u/.local/share/agentscope/sessions.db")),
            (Some("/srv/as"), None, None, Ok("/srv/as/sessions.db")),
            (None, Some("/x/data"), None, Ok("/x/data/agentscope/sessions.db")),
            // No home directory known: no default (never a `./sessions.db`).
            (None, None, None, no_home.clone()),
            (Some(""), Some(""), Some(""), no_home.clone()),
            (None, Some("rel"), Some("rel/home"), no_home),
            // A relative AGENTSCOPE_HOME is refused, whatever else is set.
            (Some("rel"), Some("/x/data"), Some("/home/u"), relative("rel")),
            (Some("./as"), None, None, relative("./as")),
        ] {
            assert_eq!(r(a, x, h), expect.map(PathBuf::from), "{a:?} {x:?} {h:?}");
        }
    }

    #[test]
    fn help_names_the_resolved_default() {
        let help = storage_help();
        match default_sqlite_path() {
            Ok(path) => assert!(help.contains(&format!("[default: sqlite:{}", path.display())), "{help}"),
            Err(_) => assert!(help.contains("[default: none"), "{help}"),
        }
    }

    #[test]
    fn default_is_sqlite() {
        match default_sqlite_path() {
            Ok(_) => {
                assert!(
                    matches!(StorageUrl::parse(None), Ok(StorageUrl::Sqlite(p)) if p.ends_with(DEFAULT_SQLITE_FILE))
                );
            }
            Err(_) => assert_eq!(StorageUrl::parse(None).map_err(|e| e.kind()), Err(ExitKind::Usage)),
        }
    }

    #[tokio::test]
    async fn memory_opens() {
        let s = open(Some("memory")).await.unwrap();
        assert_eq!(s.backend_name(), "memory");
    }
}
