//! [`RedisStorageConfig`]: where to connect and how keys, TTLs and timeouts behave.

use std::time::Duration;

use as_storage::{StorageError, StorageErrorKind};
use fred::types::config::{Config as FredConfig, ServerConfig};

use crate::error::err;
use crate::keys::{KeyConfig, KeyLayout};

/// What happens to key TTLs on writes.
///
/// AgentScope 2.0.4 has two behaviours, selected by `key_ttl`: with it, every write is followed
/// by `EXPIRE key_ttl` (a sliding TTL); without it, a plain `SET` (which removes any TTL). Both
/// processes sharing a Redis must use the same policy (spec §7.9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TtlPolicy {
    /// No TTL: records are written with a plain `SET` (clearing a TTL, like 2.0.4 without `key_ttl`).
    #[default]
    Persist,
    /// 2.0.4's `key_ttl`, made atomic: `SET … EX` on records, `EXPIRE` on the message list and on
    /// the index sets (which 2.0.4 never expires; [`RedisStorageConfig::with_index_ttl`]`(false)`
    /// leaves them alone) on every write. Whole seconds, kept within
    /// 1 s ..= 100 years ([`MAX_KEY_TTL`]): Redis refuses an expiry past its clock's range, and a
    /// refused `EXPIRE` would come after the record was already written.
    Sliding(Duration),
    /// `SET … KEEPTTL`: never add, change or remove a TTL (for keys whose expiry someone else manages).
    Keep,
}

/// The longest sliding TTL written (100 years; also the longest lock expiry); a longer
/// [`TtlPolicy::Sliding`] is cut to it.
pub const MAX_KEY_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl TtlPolicy {
    /// The TTL mode and seconds passed to the scripts. Without `index_ttl`, a sliding TTL is
    /// `sliding-records`: records and message lists expire, index sets are left alone.
    pub(crate) fn script_args(self, index_ttl: bool) -> (&'static str, u64) {
        match self {
            Self::Persist => ("persist", 0),
            Self::Sliding(d) => {
                let mode = if index_ttl { "sliding" } else { "sliding-records" };
                (mode, d.as_secs().clamp(1, MAX_KEY_TTL.as_secs()))
            }
            Self::Keep => ("keep", 0),
        }
    }
}

#[derive(Clone)]
pub(crate) enum Connection {
    /// A fred config built from a URL or host/port. `host_port` is the first node, for the
    /// automatic switch to a cluster client.
    Owned { config: Box<FredConfig>, host_port: (String, u16) },
}

/// Never prints the password (fred's `Config` derives `Debug` with it in clear), nor a user name
/// given without one: as in [`redact_url`], a URL's user part without `:` (`redis://hunter2@h`,
/// which fred reads as the user name) may be a password typed without its colon. Next to a
/// password the user name is no secret, and is shown (as `redact_url` shows `user:***`).
impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Owned { config, host_port } => {
                let mut config = config.clone();
                if config.password.is_some() {
                    config.password = Some("***".to_owned());
                } else if config.username.is_some() {
                    config.username = Some("***".to_owned());
                }
                f.debug_struct("Owned").field("config", &config).field("host_port", host_port).finish()
            }
        }
    }
}

/// How a [`crate::RedisStorage`] connects and behaves.
///
/// ```
/// use std::time::Duration;
/// use as_storage_redis::{KeyLayout, RedisStorageConfig, TtlPolicy};
/// let c = RedisStorageConfig::from_url("redis://:secret@127.0.0.1:6380/2?layout=cluster&ttl=3600").unwrap();
/// assert_eq!(c.layout, KeyLayout::Cluster);
/// assert_eq!(c.key_ttl, TtlPolicy::Sliding(Duration::from_secs(3600)));
/// assert_eq!(c.database(), Some(2));
/// let c = RedisStorageConfig::host_port("localhost", 6379).with_db(1).with_password("pw");
/// assert_eq!(c.database(), Some(1));
/// ```
#[derive(Clone, Debug)]
pub struct RedisStorageConfig {
    pub(crate) connection: Connection,
    /// Key layout (default: AgentScope 2.0.4's keys).
    pub layout: KeyLayout,
    /// Templates overriding the layout's defaults.
    pub key_config: Option<KeyConfig>,
    /// TTL policy (2.0.4's `key_ttl`).
    pub key_ttl: TtlPolicy,
    /// Whether a [`TtlPolicy::Sliding`] TTL is also put on the index sets (default `true`); see
    /// [`RedisStorageConfig::with_index_ttl`].
    pub index_ttl: bool,
    /// Longest time one storage call may take before it fails with `Unavailable` (default 5 s).
    pub timeout: Duration,
    /// Longest time `open` waits for the first connection (default 5 s).
    pub connect_timeout: Duration,
    /// Connections in the pool (default 2).
    pub pool_size: usize,
    /// Largest record or message accepted, in bytes (default [`as_storage::DEFAULT_MAX_RECORD_BYTES`]).
    pub max_record_bytes: usize,
}

impl Default for RedisStorageConfig {
    fn default() -> Self {
        Self::host_port("localhost", 6379)
    }
}

fn bad_url(url: &str, why: impl std::fmt::Display) -> StorageError {
    err(StorageErrorKind::InvalidInput, "config", format!("invalid Redis URL {}: {why}", redact_url(url)))
}

/// `url` fit to print (errors, logs, a CLI's output): the password of a `scheme://user:password@host…`
/// URL becomes `***` (all of the user part when it has no `:`), also when the rest of the URL is not
/// one this crate accepts: the user part runs to the *last* `@`, so a password holding `/`, `?`, `#`
/// or `@` (a URL that does not even parse) is hidden whole. A Redis-family scheme missing a slash
/// (`redis:/:pw@h`, a typo) is treated the same way. Query options show their values only when
/// their (decoded) name is one of the options [`RedisStorageConfig::from_url`] knows to hold none
/// (`layout`, `ttl`, `index_ttl`, `timeout_ms`, `pool_size`, `node`); every other value becomes `***`, so a
/// password under any name (`pwd=`, `auth=`, `sentinel%50assword=`) is never shown.
///
/// ```
/// use as_storage_redis::redact_url;
/// assert_eq!(redact_url("redis://:hunter2@h:6379/0"), "redis://:***@h:6379/0");
/// assert_eq!(
///     redact_url("redis-sentinel://h:26379/0?sentinelServiceName=m&sentinelPassword=hunter2&ttl=9"),
///     "redis-sentinel://h:26379/0?sentinelServiceName=***&sentinelPassword=***&ttl=9"
/// );
/// assert_eq!(redact_url("redis://:s3cr/t@h:6379"), "redis://:***@h:6379");
/// assert_eq!(redact_url("Valkey://hunter2@h"), "Valkey://***@h");
/// assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
/// assert_eq!(redact_url(":hunter2@h:6379"), "***@h:6379");
/// ```
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, _)) = url.split_once(':')
        && ["sqlite", "memory", "file"].contains(&scheme.to_ascii_lowercase().as_str())
    {
        // Another store's URL (`sqlite:/a@b.db?x`): nothing secret in it.
        return url.to_owned();
    }
    redact_query(&redact_userinfo(url))
}

/// The query options of ours that hold nothing secret: [`redact_query`] shows their values.
const PLAIN_OPTIONS: [&str; 6] = ["layout", "ttl", "index_ttl", "timeout_ms", "pool_size", "node"];

/// The query options of `url`, each value hidden (`name=***`) unless the option is one of
/// [`PLAIN_OPTIONS`] (its name percent-decoded first); an option with no `=` is hidden whole.
fn redact_query(url: &str) -> String {
    let Some(q) = url.find('?') else { return url.to_owned() };
    let (base, query) = url.split_at(q + 1);
    let (query, fragment) = query.split_at(query.find('#').unwrap_or(query.len()));
    let plain = |name: &str| {
        let decoded = url::form_urlencoded::parse(name.as_bytes()).next().map(|(n, _)| n.into_owned());
        decoded.is_some_and(|n| PLAIN_OPTIONS.contains(&n.as_str()))
    };
    let options: Vec<String> = query
        .split('&')
        .map(|option| match option.split_once('=') {
            Some((name, _)) if !plain(name) => format!("{name}=***"),
            None if !option.is_empty() => "***".to_owned(),
            _ => option.to_owned(),
        })
        .collect();
    format!("{base}{}{fragment}", options.join("&"))
}

/// [`redact_url`]'s user part.
fn redact_userinfo(url: &str) -> String {
    let (head, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => match url.split_once(':') {
            Some((scheme, _)) if is_redis_scheme(scheme) => url.split_at(scheme.len() + 1),
            // No scheme (`:pw@host:6379`, `user:pw@host`): whatever precedes an `@` may be a password.
            _ => return url.rfind('@').map_or_else(|| url.to_owned(), |at| format!("***{}", &url[at..])),
        },
    };
    let Some(at) = rest.rfind('@') else { return url.to_owned() };
    let (userinfo, host) = rest.split_at(at);
    let shown = match userinfo.split_once(':') {
        Some((user, _)) if !user.contains(['/', '?', '#']) => format!("{user}:***"),
        _ => "***".to_owned(),
    };
    format!("{head}{shown}{host}")
}

/// A scheme of the Redis family (any case), as people type it.
fn is_redis_scheme(scheme: &str) -> bool {
    let s = scheme.to_ascii_lowercase();
    s.starts_with("redis") || s.starts_with("valkey")
}

impl RedisStorageConfig {
    /// `RedisStorage(host, port)` of 2.0.4: database 0, no password, no TLS.
    pub fn host_port(host: impl Into<String>, port: u16) -> Self {
        let host = host.into();
        let config = FredConfig { server: ServerConfig::new_centralized(host.clone(), port), ..FredConfig::default() };
        Self::with_connection(Connection::Owned { config: Box::new(config), host_port: (host, port) })
    }

    fn with_connection(connection: Connection) -> Self {
        Self {
            connection,
            layout: KeyLayout::Compat,
            key_config: None,
            key_ttl: TtlPolicy::Persist,
            index_ttl: true,
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            pool_size: 2,
            max_record_bytes: as_storage::DEFAULT_MAX_RECORD_BYTES,
        }
    }

    /// Parses `redis://[user:password@]host[:port][/db]`, `rediss://…` (TLS with the system
    /// roots), `redis-cluster://host:port?node=host:port&…` (cluster), plus these query
    /// parameters of ours: `layout=compat|cluster`, `ttl=SECONDS` (sliding TTL),
    /// `index_ttl=true|false|1|0` (see [`Self::with_index_ttl`]), `timeout_ms=N`, `pool_size=N`.
    pub fn from_url(url: &str) -> Result<Self, StorageError> {
        let mut parsed = url::Url::parse(url).map_err(|e| bad_url(url, e))?;
        let scheme = parsed.scheme().to_owned();
        let known = [
            "redis",
            "rediss",
            "redis-cluster",
            "rediss-cluster",
            "valkey",
            "valkeys",
            "valkey-cluster",
            "valkeys-cluster",
        ];
        if !known.contains(&scheme.as_str()) {
            return Err(bad_url(url, format!("unsupported scheme {scheme:?}")));
        }
        let mut layout = None;
        let mut ttl = None;
        let mut index_ttl = None;
        let mut timeout = None;
        let mut pool_size = None;
        let mut rest = Vec::new();
        for (k, v) in parsed.query_pairs() {
            let num = |what: &str| {
                v.parse::<u64>().map_err(|_| bad_url(url, format!("{what} must be a whole number, not {v:?}")))
            };
            match k.as_ref() {
                "layout" => layout = Some(v.parse::<KeyLayout>()?),
                "ttl" => ttl = Some(num("ttl")?),
                "index_ttl" => {
                    index_ttl = Some(match v.as_ref() {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => return Err(bad_url(url, format!("index_ttl must be true, false, 1 or 0, not {v:?}"))),
                    });
                }
                "timeout_ms" => timeout = Some(num("timeout_ms")?),
                "pool_size" => pool_size = Some(num("pool_size")?),
                // fred's own (cluster nodes).
                "node" => rest.push((k.into_owned(), v.into_owned())),
                // fred reads these only with a `*-sentinel` scheme and its `sentinel-client` feature,
                // neither of which this crate uses: accepted, they would be dropped without a word
                // (a `redis://` URL to a Sentinel then fails every command).
                "sentinelServiceName" | "sentinelUsername" | "sentinelPassword" => {
                    return Err(bad_url(
                        url,
                        "Redis Sentinel is not supported by a URL: build a fred client or pool with its \
                         `sentinel-client` feature and pass it to RedisStorage::from_client or from_pool",
                    ));
                }
                // A bare word (`?hunter2`) may be a secret pasted in the wrong place: not echoed.
                _ if v.is_empty() => {
                    return Err(bad_url(
                        url,
                        "an option without a value (known: layout, ttl, index_ttl, timeout_ms, pool_size, node)",
                    ));
                }
                // A misspelt option (`?tll=60`) would otherwise be ignored without a word.
                other => {
                    return Err(bad_url(
                        url,
                        format!(
                            "unknown option {other:?} (known: layout, ttl, index_ttl, timeout_ms, pool_size, node)"
                        ),
                    ));
                }
            }
        }
        if rest.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(rest);
        }
        let host = parsed.host_str().ok_or_else(|| bad_url(url, "missing host"))?.to_owned();
        let port = parsed.port().unwrap_or(6379);
        let config = FredConfig::from_url(parsed.as_str()).map_err(|e| bad_url(url, e.details()))?;
        let mut c = Self::with_connection(Connection::Owned { config: Box::new(config), host_port: (host, port) });
        if let Some(l) = layout {
            c.layout = l;
        }
        match ttl {
            Some(0) => return Err(bad_url(url, "ttl must be positive")),
            Some(s) => c.key_ttl = TtlPolicy::Sliding(Duration::from_secs(s)),
            None => {}
        }
        if let Some(on) = index_ttl {
            c.index_ttl = on;
        }
        if let Some(ms) = timeout {
            c.timeout = Duration::from_millis(ms.max(1));
            c.connect_timeout = c.timeout;
        }
        if let Some(n) = pool_size {
            c.pool_size = usize::try_from(n).unwrap_or(1).max(1);
        }
        Ok(c)
    }

    fn fred_mut(&mut self) -> &mut FredConfig {
        match &mut self.connection {
            Connection::Owned { config, .. } => config,
        }
    }

    /// Selects database `db` (2.0.4's `db`).
    pub fn with_db(mut self, db: u8) -> Self {
        self.fred_mut().database = Some(db);
        self
    }

    /// Sets the password (2.0.4's `password`).
    pub fn with_password(mut self, password: impl Into<String>) -> Self {
        self.fred_mut().password = Some(password.into());
        self
    }

    /// Sets the ACL user name.
    pub fn with_username(mut self, username: impl Into<String>) -> Self {
        self.fred_mut().username = Some(username.into());
        self
    }

    /// Uses TLS with the system's root certificates.
    pub fn with_tls(mut self) -> Result<Self, StorageError> {
        let connector = fred::types::config::TlsConnector::default_rustls()
            .map_err(|e| err(StorageErrorKind::InvalidInput, "config", format!("TLS: {}", e.details())))?;
        self.fred_mut().tls = Some(connector.into());
        Ok(self)
    }

    /// Sets the key layout.
    pub fn with_layout(mut self, layout: KeyLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Overrides the key templates.
    pub fn with_key_config(mut self, keys: KeyConfig) -> Self {
        self.key_config = Some(keys);
        self
    }

    /// Sliding TTL on every write (2.0.4's `key_ttl`).
    pub fn with_key_ttl(mut self, ttl: Duration) -> Self {
        self.key_ttl = TtlPolicy::Sliding(ttl);
        self
    }

    /// Sets the TTL policy.
    pub fn with_ttl_policy(mut self, policy: TtlPolicy) -> Self {
        self.key_ttl = policy;
        self
    }

    /// Whether a [`TtlPolicy::Sliding`] TTL also expires the index sets (the agent's and the
    /// schedule's `…:sessions` sets); default `true`. Other policies ignore it.
    ///
    /// `false` is for a fleet that mixes Rust and AgentScope Python 2.0.4 writers under `key_ttl`:
    /// records and message lists still get the sliding TTL on every write, exactly as with `true`,
    /// but index sets are written without one, exactly as 2.0.4 writes them, so an agent whose
    /// sessions only Python writes never loses its index set while its records live. The
    /// trade-off is 2.0.4's: the index sets never expire and keep the ids of expired sessions
    /// (they grow as in 2.0.4); a listing prunes the ids whose record is gone. It does not remove
    /// a TTL an index set already has (from an earlier write with `true`). URL option:
    /// `index_ttl=false`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use as_storage_redis::RedisStorageConfig;
    /// let c = RedisStorageConfig::host_port("localhost", 6379)
    ///     .with_key_ttl(Duration::from_secs(3600))
    ///     .with_index_ttl(false);
    /// assert!(!c.index_ttl);
    /// let c = RedisStorageConfig::from_url("redis://localhost:6379/0?ttl=3600&index_ttl=false").unwrap();
    /// assert!(!c.index_ttl);
    /// ```
    pub fn with_index_ttl(mut self, index_ttl: bool) -> Self {
        self.index_ttl = index_ttl;
        self
    }

    /// Sets the per-call timeout (and the connect timeout).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.connect_timeout = timeout;
        self
    }

    /// Sets the pool size (at least 1).
    pub fn with_pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// Sets the record size limit.
    pub fn with_max_record_bytes(mut self, n: usize) -> Self {
        self.max_record_bytes = n;
        self
    }

    /// The selected database, if any.
    pub fn database(&self) -> Option<u8> {
        match &self.connection {
            Connection::Owned { config, .. } => config.database,
        }
    }

    /// Whether the connection uses TLS.
    pub fn uses_tls(&self) -> bool {
        match &self.connection {
            Connection::Owned { config, .. } => config.tls.is_some(),
        }
    }

    /// Whether the configured server is a cluster (from the URL scheme or `node=` parameters).
    pub fn is_clustered(&self) -> bool {
        match &self.connection {
            Connection::Owned { config, .. } => config.server.is_clustered(),
        }
    }

    /// The effective key templates.
    pub fn effective_key_config(&self) -> KeyConfig {
        self.key_config.clone().unwrap_or_else(|| self.layout.key_config())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let c = RedisStorageConfig::from_url("redis://127.0.0.1:7000").unwrap();
        assert_eq!(c.layout, KeyLayout::Compat);
        assert_eq!(c.key_ttl, TtlPolicy::Persist);
        assert!(!c.uses_tls() && !c.is_clustered());
        let c = RedisStorageConfig::from_url("rediss://u:p@example.com/3?timeout_ms=250&pool_size=4").unwrap();
        assert!(c.uses_tls());
        assert_eq!(c.database(), Some(3));
        assert_eq!(c.timeout, Duration::from_millis(250));
        assert_eq!(c.pool_size, 4);
        let c =
            RedisStorageConfig::from_url("redis-cluster://127.0.0.1:7000?node=127.0.0.1:7001&layout=cluster").unwrap();
        assert!(c.is_clustered());
        assert_eq!(c.layout, KeyLayout::Cluster);
        assert_eq!(c.effective_key_config(), KeyConfig::cluster());
    }

    #[test]
    fn index_ttl_option() {
        assert!(RedisStorageConfig::from_url("redis://h?ttl=60").unwrap().index_ttl, "default: true");
        for (v, want) in [("true", true), ("1", true), ("false", false), ("0", false)] {
            let c = RedisStorageConfig::from_url(&format!("redis://h?ttl=60&index_ttl={v}")).unwrap();
            assert_eq!(c.index_ttl, want, "{v}");
            assert_eq!(c.key_ttl, TtlPolicy::Sliding(Duration::from_secs(60)));
        }
        assert!(!RedisStorageConfig::host_port("h", 6379).with_index_ttl(false).index_ttl);
        for v in ["no", "yes", "TRUE", "2", "", "off"] {
            let url = format!("redis://:hunter2@h?ttl=60&index_ttl={v}");
            let e = RedisStorageConfig::from_url(&url).unwrap_err();
            assert_eq!(e.kind(), StorageErrorKind::InvalidInput, "{v}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
            if !v.is_empty() {
                assert!(e.to_string().contains(&format!("index_ttl={v}")), "a plain option's value is shown: {e}");
            }
        }
        assert_eq!(redact_url("redis://h/0?index_ttl=false&pwd=x"), "redis://h/0?index_ttl=false&pwd=***");
        let sliding = TtlPolicy::Sliding(Duration::from_secs(60));
        assert_eq!(sliding.script_args(true), ("sliding", 60));
        assert_eq!(sliding.script_args(false), ("sliding-records", 60));
        assert_eq!(TtlPolicy::Keep.script_args(false), ("keep", 0));
        assert_eq!(TtlPolicy::Persist.script_args(false), ("persist", 0));
    }

    #[test]
    fn bad_urls_are_invalid_input_without_the_password() {
        for url in [
            "http://x",
            "redis://:hunter2@h?layout=weird",
            "redis://:hunter2@h?tll=60",
            "redis://:hunter2@h?ttl=-5",
            "redis://:hunter2@h?ttl=abc",
            "redis://:hunter2@h?ttl=0",
            "not a url",
            "redis://h:6379/0?sentinelPassword=hunter2&ttl=x",
            "redis://h:6379/0?ttl=x&SENTINELPASSWORD=hunter2#frag",
            "redis://h?pwd=hunter2",
            "redis://h?auth=hunter2",
            "redis://h?hunter2",
            "redis://h?sentinel%50assword=hunter2&ttl=x",
            "redis://h:26379/0?sentinelServiceName=hunter2",
            "redis-sentinel://h:26379/0?sentinelServiceName=m&sentinelPassword=hunter2",
        ] {
            let e = RedisStorageConfig::from_url(url).unwrap_err();
            assert_eq!(e.kind(), StorageErrorKind::InvalidInput, "{url}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }

    /// A user part without `:` (`redis://hunter2@h`) may be a password typed without its colon:
    /// fred reads it as the user name, and Debug hides it as [`redact_url`] does; with a password,
    /// the user name is shown (it is not the secret then) and the password hidden.
    #[test]
    fn debug_hides_a_user_name_without_password() {
        let shown = format!("{:?}", RedisStorageConfig::from_url("redis://hunter2@h").unwrap());
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(redact_url("redis://hunter2@h"), "redis://***@h");
        let shown = format!("{:?}", RedisStorageConfig::from_url("redis://app:hunter2@h").unwrap());
        assert!(!shown.contains("hunter2") && shown.contains("\"app\""), "{shown}");
        assert_eq!(redact_url("redis://app:hunter2@h"), "redis://app:***@h");
    }

    #[test]
    fn secrets_in_query_options_are_hidden() {
        for (url, shown) in [
            ("redis://h/0?sentinelPassword=pw&ttl=1", "redis://h/0?sentinelPassword=***&ttl=1"),
            ("redis://:pw@h/0?ttl=1&auth_token=t#f", "redis://:***@h/0?ttl=1&auth_token=***#f"),
            ("redis://h/0?my_secret=s&layout=cluster", "redis://h/0?my_secret=***&layout=cluster"),
            ("redis://h/0?pwd=s&t%74l=5", "redis://h/0?pwd=***&t%74l=5"),
            ("redis://h/0?hunter2&ttl=5", "redis://h/0?***&ttl=5"),
            ("redis://h/0?ttl=1&node=h2:6380", "redis://h/0?ttl=1&node=h2:6380"),
            ("sqlite:/tmp/a.db?password=x", "sqlite:/tmp/a.db?password=x"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
