//! The file layout, its version table and forward migrations.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{SqliteError, SqliteErrorKind};

/// `PRAGMA application_id` of agentscope session files (`"ASSE"`).
pub(crate) const APPLICATION_ID: i64 = 0x4153_5345;

/// The version table. Present in every file this crate has initialised.
pub(crate) const VERSION_TABLE: &str = "agentscope_schema";

/// One forward migration: applied once, in order, inside a write transaction.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) description: &'static str,
    pub(crate) sql: &'static str,
}

/// Every migration this code knows, oldest first. Never edit a shipped one; append a new one.
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    description: "sessions and messages",
    sql: r#"
CREATE TABLE sessions (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_sort TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    source TEXT NOT NULL,
    source_schedule_id TEXT,
    team_id TEXT,
    name TEXT NOT NULL,
    config TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    size INTEGER NOT NULL,
    record TEXT NOT NULL,
    UNIQUE (user_id, id)
);
CREATE INDEX sessions_by_owner ON sessions (user_id, agent_id, created_sort DESC, id DESC);
CREATE INDEX sessions_by_schedule ON sessions (user_id, source_schedule_id) WHERE source_schedule_id IS NOT NULL;
CREATE TABLE messages (
    session_pk INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    msg_id TEXT NOT NULL,
    msg TEXT NOT NULL,
    PRIMARY KEY (session_pk, seq)
);
CREATE INDEX messages_by_id ON messages (session_pk, msg_id, seq);
"#,
}];

/// The schema version this code writes.
pub(crate) fn latest_version(migrations: &[Migration]) -> i64 {
    migrations.last().map_or(0, |m| m.version)
}

/// Checks that the file is empty or ours, then applies the missing migrations.
///
/// * A file with tables but no version table is someone else's: `ForeignDatabase`, untouched.
/// * A version above the newest known one: `SchemaTooNew`, untouched.
pub(crate) fn migrate(
    conn: &mut Connection,
    migrations: &[Migration],
    map: &dyn Fn(rusqlite::Error) -> SqliteError,
) -> Result<i64, SqliteError> {
    let latest = latest_version(migrations);
    // Fast path without the write lock: already current.
    if let Some(v) = current_version(conn, map)?
        && v == latest
    {
        return Ok(v);
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(map)?;
    // Re-check under the lock: another process may have migrated meanwhile.
    let current = match preflight(&tx, migrations, map)? {
        Some(v) => v,
        None => {
            tx.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID};
                 CREATE TABLE {VERSION_TABLE} (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL);"
            ))
            .map_err(map)?;
            0
        }
    };
    for m in migrations.iter().filter(|m| m.version > current) {
        tx.execute_batch(m.sql).map_err(map)?;
        tx.execute(
            &format!("INSERT INTO {VERSION_TABLE} (version, description, applied_at) VALUES (?1, ?2, ?3)"),
            rusqlite::params![m.version, m.description, as_message::now_iso()],
        )
        .map_err(map)?;
        tracing::debug!(version = m.version, description = m.description, "applied sqlite migration");
    }
    tx.commit().map_err(map)?;
    Ok(latest)
}

/// Read-only checks: `Ok(Some(version))` for one of our files, `Ok(None)` for an empty database,
/// `ForeignDatabase` for someone else's, `SchemaTooNew` for a newer one of ours.
pub(crate) fn preflight(
    conn: &Connection,
    migrations: &[Migration],
    map: &dyn Fn(rusqlite::Error) -> SqliteError,
) -> Result<Option<i64>, SqliteError> {
    let latest = latest_version(migrations);
    // One read snapshot for every check below: outside a transaction each statement would see
    // its own, and a file another process creates meanwhile would look half made (tables but
    // no version table yet: "someone else's"). Dropping the read transaction rolls it back.
    let _snapshot = if conn.is_autocommit() { Some(conn.unchecked_transaction().map_err(map)?) } else { None };
    match current_version(conn, map)? {
        Some(current) if current > latest => Err(too_new(current, latest)),
        Some(current) => Ok(Some(current)),
        None => {
            // Every schema object counts (a file of views or triggers is someone's too), except
            // SQLite's own `sqlite_…` ones (`_` escaped: unescaped it matches any character).
            let objects: i64 = conn
                .query_row("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'", [], |r| {
                    r.get(0)
                })
                .map_err(map)?;
            let application_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(map)?;
            if objects > 0 || (application_id != 0 && application_id != APPLICATION_ID) {
                return Err(SqliteError::new(
                    SqliteErrorKind::ForeignDatabase,
                    format!(
                        "the file is an SQLite database with {objects} schema object(s) and application_id \
                         {application_id} but no {VERSION_TABLE} table; it was not made by agentscope and is left \
                         untouched"
                    ),
                ));
            }
            Ok(None)
        }
    }
}

/// Fails with `SchemaTooNew` when the file's schema is newer than `migrations` know (checked
/// again on every use of a pooled connection: another process may have migrated the file).
pub(crate) fn check_known(
    conn: &Connection,
    migrations: &[Migration],
    map: &dyn Fn(rusqlite::Error) -> SqliteError,
) -> Result<(), SqliteError> {
    let latest = latest_version(migrations);
    match max_version(conn, map)? {
        Some(current) if current > latest => Err(too_new(current, latest)),
        _ => Ok(()),
    }
}

fn too_new(current: i64, latest: i64) -> SqliteError {
    SqliteError::new(
        SqliteErrorKind::SchemaTooNew,
        format!(
            "the file has schema version {current} but this build knows only up to {latest}; \
             upgrade agentscope to open it"
        ),
    )
}

/// The highest version in the version table (`None` when it is empty). The statement is cached:
/// a pooled connection runs it again every [`crate::SqliteOptions::schema_recheck`].
fn max_version(conn: &Connection, map: &dyn Fn(rusqlite::Error) -> SqliteError) -> Result<Option<i64>, SqliteError> {
    let mut stmt = conn.prepare_cached(&format!("SELECT max(version) FROM {VERSION_TABLE}")).map_err(map)?;
    stmt.query_row([], |r| r.get(0)).map_err(map)
}

/// The highest applied version, or `None` when the version table is missing.
pub(crate) fn current_version(
    conn: &Connection,
    map: &dyn Fn(rusqlite::Error) -> SqliteError,
) -> Result<Option<i64>, SqliteError> {
    let has_table: Option<i64> = conn
        .query_row("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1", [VERSION_TABLE], |r| r.get(0))
        .optional()
        .map_err(map)?;
    if has_table.is_none() {
        return Ok(None);
    }
    let v = max_version(conn, map)?;
    Ok(Some(v.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(e: rusqlite::Error) -> SqliteError {
        SqliteError::from_rusqlite(e, std::path::Path::new(":memory:"))
    }

    const V2: &[Migration] = &[
        Migration { version: 1, description: "t", sql: "CREATE TABLE t (a INTEGER);" },
        Migration { version: 2, description: "t.b", sql: "ALTER TABLE t ADD COLUMN b TEXT NOT NULL DEFAULT 'x';" },
    ];

    #[test]
    fn fresh_file_gets_every_migration_once() {
        let mut c = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut c, MIGRATIONS, &map).unwrap(), latest_version(MIGRATIONS));
        assert_eq!(migrate(&mut c, MIGRATIONS, &map).unwrap(), latest_version(MIGRATIONS));
        let rows: i64 = c.query_row("SELECT count(*) FROM agentscope_schema", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, MIGRATIONS.len() as i64);
        let app: i64 = c.query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
        assert_eq!(app, APPLICATION_ID);
    }

    #[test]
    fn forward_migration_keeps_data() {
        let mut c = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut c, &V2[..1], &map).unwrap(), 1);
        c.execute("INSERT INTO t (a) VALUES (7)", []).unwrap();
        assert_eq!(migrate(&mut c, V2, &map).unwrap(), 2);
        let (a, b): (i64, String) = c.query_row("SELECT a, b FROM t", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert_eq!((a, b.as_str()), (7, "x"));
        assert_eq!(current_version(&c, &map).unwrap(), Some(2));
    }

    #[test]
    fn newer_file_is_refused_untouched() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c, V2, &map).unwrap();
        let err = migrate(&mut c, &V2[..1], &map).unwrap_err();
        assert_eq!(err.kind(), SqliteErrorKind::SchemaTooNew);
        assert!(err.message().contains("schema version 2"), "{err}");
        assert_eq!(current_version(&c, &map).unwrap(), Some(2));
    }

    #[test]
    fn foreign_database_is_refused_untouched() {
        let cases = [
            "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');",
            // `sqlite_%` unescaped would take this for one of SQLite's own tables.
            "CREATE TABLE sqliteman_notes (body TEXT);",
            "CREATE VIEW answer AS SELECT 42;",
            // No schema at all, but another application's id.
            "PRAGMA application_id = 42;",
        ];
        for setup in cases {
            let mut c = Connection::open_in_memory().unwrap();
            c.execute_batch(setup).unwrap();
            let before: i64 = c.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).unwrap();
            let err = migrate(&mut c, MIGRATIONS, &map).unwrap_err();
            assert_eq!(err.kind(), SqliteErrorKind::ForeignDatabase, "{setup}");
            assert_eq!(current_version(&c, &map).unwrap(), None, "{setup}");
            let n: i64 = c.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).unwrap();
            assert_eq!(n, before, "{setup}: untouched");
        }
        // Our own application id on an empty file (a create interrupted before its first table) is ours.
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID};")).unwrap();
        assert_eq!(migrate(&mut c, MIGRATIONS, &map).unwrap(), latest_version(MIGRATIONS));
    }
}
