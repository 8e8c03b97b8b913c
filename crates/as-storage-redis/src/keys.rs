//! Key templates (`RedisStorage.KeyConfig` of AgentScope 2.0.4) and the two key layouts.

use std::fmt;

use as_storage::{StorageError, StorageErrorKind};

use crate::error::BACKEND;

/// Which key layout a store uses.
///
/// * [`KeyLayout::Compat`] (the default) is byte-for-byte AgentScope 2.0.4's layout, so Python
///   and Rust processes share sessions. Its keys of one session (record, index set, message list)
///   hash to different slots, so it works on a single Redis server (or a primary with replicas,
///   or Sentinel) but **not on Redis Cluster**: the atomic scripts touch several keys and a
///   cluster rejects them with `CROSSSLOT`. Opening a compat store against a cluster fails
///   with [`StorageErrorKind::Unsupported`] instead.
/// * [`KeyLayout::Cluster`] puts the user id in a hash tag
///   (`agentscope:user:{user-1}:session:…`), so every key of one user — records, message
///   lists, agent and schedule index sets — lives in one slot and every multi-key operation
///   stays atomic. The tradeoff: one user's data sits on one shard (users are the unit of
///   distribution; a single enormous user cannot be spread out), and the keys differ from
///   2.0.4's, so a Python process only shares them if it is configured with the same
///   templates (they are valid `str.format` templates: `{{`/`}}` are literal braces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KeyLayout {
    /// AgentScope 2.0.4's keys (single server only).
    #[default]
    Compat,
    /// Hash-tagged per user (works on Redis Cluster and on a single server).
    Cluster,
}

impl KeyLayout {
    /// The default templates of this layout.
    pub fn key_config(self) -> KeyConfig {
        match self {
            Self::Compat => KeyConfig::agentscope_2_0_4(),
            Self::Cluster => KeyConfig::cluster(),
        }
    }

    /// `"compat"` or `"cluster"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compat => "compat",
            Self::Cluster => "cluster",
        }
    }
}

impl std::str::FromStr for KeyLayout {
    type Err = StorageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "compat" => Ok(Self::Compat),
            "cluster" => Ok(Self::Cluster),
            other => Err(StorageError::new(
                StorageErrorKind::InvalidInput,
                BACKEND,
                "layout",
                format!("unknown key layout {other:?} (expected \"compat\" or \"cluster\")"),
            )),
        }
    }
}

impl fmt::Display for KeyLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Key templates, in Python `str.format` syntax (`{user_id}` is a placeholder, `{{` and `}}` are
/// literal braces). The default is exactly AgentScope 2.0.4's `RedisStorage.KeyConfig`.
///
/// ```
/// let k = as_storage_redis::KeyConfig::default();
/// assert_eq!(k.session, "agentscope:user:{user_id}:session:{session_id}");
/// assert_eq!(k.session_index, "agentscope:user:{user_id}:agent:{agent_id}:sessions");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyConfig {
    /// The session record (a string). Placeholders: `user_id`, `session_id`.
    pub session: String,
    /// The set of an agent's session ids. Placeholders: `user_id`, `agent_id`.
    pub session_index: String,
    /// The message list (oldest first). Placeholders: `user_id`, `session_id`.
    pub messages: String,
    /// The set of a schedule's session ids. Placeholders: `user_id`, `schedule_id`.
    pub schedule_session_index: String,
}

impl Default for KeyConfig {
    fn default() -> Self {
        Self::agentscope_2_0_4()
    }
}

impl KeyConfig {
    /// AgentScope 2.0.4's templates.
    pub fn agentscope_2_0_4() -> Self {
        Self {
            session: "agentscope:user:{user_id}:session:{session_id}".into(),
            session_index: "agentscope:user:{user_id}:agent:{agent_id}:sessions".into(),
            messages: "agentscope:user:{user_id}:session:{session_id}:messages".into(),
            schedule_session_index: "agentscope:user:{user_id}:schedule:{schedule_id}:sessions".into(),
        }
    }

    /// The cluster layout: 2.0.4's templates with the user id in a hash tag.
    ///
    /// ```
    /// let k = as_storage_redis::KeyConfig::cluster();
    /// assert_eq!(k.session, "agentscope:user:{{{user_id}}}:session:{session_id}");
    /// ```
    pub fn cluster() -> Self {
        Self {
            session: "agentscope:user:{{{user_id}}}:session:{session_id}".into(),
            session_index: "agentscope:user:{{{user_id}}}:agent:{agent_id}:sessions".into(),
            messages: "agentscope:user:{{{user_id}}}:session:{session_id}:messages".into(),
            schedule_session_index: "agentscope:user:{{{user_id}}}:schedule:{schedule_id}:sessions".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Var {
    User,
    Agent,
    Session,
    Schedule,
}

impl Var {
    fn name(self) -> &'static str {
        match self {
            Self::User => "{user_id}",
            Self::Agent => "{agent_id}",
            Self::Session => "{session_id}",
            Self::Schedule => "{schedule_id}",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "user_id" => Self::User,
            "agent_id" => Self::Agent,
            "session_id" => Self::Session,
            "schedule_id" => Self::Schedule,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Part {
    Lit(String),
    Var(Var),
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Template {
    parts: Vec<Part>,
}

/// Values for the placeholders.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Vars<'a> {
    pub(crate) user_id: &'a str,
    pub(crate) agent_id: &'a str,
    pub(crate) session_id: &'a str,
    pub(crate) schedule_id: &'a str,
}

fn bad_template(field: &'static str, template: &str, why: &str) -> StorageError {
    StorageError::new(
        StorageErrorKind::InvalidInput,
        BACKEND,
        "key_config",
        format!("key template {field} = {template:?}: {why}"),
    )
}

impl Template {
    fn parse(field: &'static str, template: &str, required: &[Var]) -> Result<Self, StorageError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut chars = template.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    lit.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    lit.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(bad_template(field, template, "unclosed '{'")),
                        }
                    }
                    let var = Var::parse(&name)
                        .ok_or_else(|| bad_template(field, template, &format!("unknown placeholder {{{name}}}")))?;
                    if !lit.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut lit)));
                    }
                    parts.push(Part::Var(var));
                }
                '}' => return Err(bad_template(field, template, "single '}' (write '}}' for a literal brace)")),
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        for var in required {
            if !parts.contains(&Part::Var(*var)) {
                return Err(bad_template(field, template, &format!("missing placeholder {}", var.name())));
            }
        }
        Ok(Self { parts })
    }

    pub(crate) fn render(&self, v: &Vars<'_>) -> String {
        let mut out = String::with_capacity(96);
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Var(Var::User) => out.push_str(v.user_id),
                Part::Var(Var::Agent) => out.push_str(v.agent_id),
                Part::Var(Var::Session) => out.push_str(v.session_id),
                Part::Var(Var::Schedule) => out.push_str(v.schedule_id),
            }
        }
        out
    }
}

/// `text` with the glob characters of `SCAN … MATCH` escaped, so it matches only itself.
pub(crate) fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// How to find the agent index sets of one user with `SCAN … MATCH` and read the agent id back
/// out of each key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AgentScan {
    /// The `MATCH` pattern (the template with the user filled in and `*` for the agent).
    pub(crate) pattern: String,
    /// The literal key text before the agent id.
    prefix: String,
    /// The literal key text after the agent id.
    suffix: String,
}

impl AgentScan {
    /// The agent id of a matched key (`None` when the key does not have this shape).
    pub(crate) fn agent<'k>(&self, key: &'k str) -> Option<&'k str> {
        let agent = key.strip_prefix(self.prefix.as_str())?.strip_suffix(self.suffix.as_str())?;
        (!agent.is_empty()).then_some(agent)
    }
}

/// How to find every user's agent index sets: the `session_index` template with `*` for the
/// user and the agent.
#[derive(Clone, Debug)]
pub(crate) struct UserScan {
    /// The `MATCH` pattern.
    pub(crate) pattern: String,
    prefix: String,
    middle: String,
    suffix: String,
}

impl UserScan {
    /// The user id of a matched key (`None` when the key does not have this shape). Ids cannot
    /// hold the `:` that starts the literal between user and agent, so its first occurrence ends
    /// the user id.
    pub(crate) fn user<'k>(&self, key: &'k str) -> Option<&'k str> {
        let rest = key.strip_prefix(self.prefix.as_str())?.strip_suffix(self.suffix.as_str())?;
        let at = rest.find(self.middle.as_str())?;
        let (user, agent) = (&rest[..at], &rest[at + self.middle.len()..]);
        (!user.is_empty() && !agent.is_empty()).then_some(user)
    }
}

/// The hash tag Redis Cluster uses for `key` (the whole key when there is none).
pub(crate) fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// Compiled templates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Keys {
    session: Template,
    session_index: Template,
    messages: Template,
    schedule_session_index: Template,
}

impl Keys {
    pub(crate) fn compile(config: &KeyConfig) -> Result<Self, StorageError> {
        use Var::*;
        Ok(Self {
            session: Template::parse("session", &config.session, &[User, Session])?,
            session_index: Template::parse("session_index", &config.session_index, &[User, Agent])?,
            messages: Template::parse("messages", &config.messages, &[User, Session])?,
            schedule_session_index: Template::parse(
                "schedule_session_index",
                &config.schedule_session_index,
                &[User, Schedule],
            )?,
        })
    }

    pub(crate) fn session(&self, user_id: &str, session_id: &str) -> String {
        self.session.render(&Vars { user_id, session_id, ..Vars::default() })
    }

    pub(crate) fn session_index(&self, user_id: &str, agent_id: &str) -> String {
        self.session_index.render(&Vars { user_id, agent_id, ..Vars::default() })
    }

    pub(crate) fn messages(&self, user_id: &str, session_id: &str) -> String {
        self.messages.render(&Vars { user_id, session_id, ..Vars::default() })
    }

    pub(crate) fn schedule_session_index(&self, user_id: &str, schedule_id: &str) -> String {
        self.schedule_session_index.render(&Vars { user_id, schedule_id, ..Vars::default() })
    }

    /// The scan for `user_id`'s agent index sets; `None` when the `session_index` template has
    /// placeholders other than `{user_id}` and one `{agent_id}` (the agent could not be cut out).
    pub(crate) fn agent_scan(&self, user_id: &str) -> Option<AgentScan> {
        let (mut prefix, mut suffix) = (String::new(), String::new());
        let mut seen_agent = false;
        for part in &self.session_index.parts {
            let out = if seen_agent { &mut suffix } else { &mut prefix };
            match part {
                Part::Lit(l) => out.push_str(l),
                Part::Var(Var::User) => out.push_str(user_id),
                Part::Var(Var::Agent) if !seen_agent => seen_agent = true,
                Part::Var(_) => return None,
            }
        }
        if !seen_agent {
            return None;
        }
        Some(AgentScan { pattern: format!("{}*{}", glob_escape(&prefix), glob_escape(&suffix)), prefix, suffix })
    }

    /// The scan for every user's agent index sets; `None` unless the `session_index` template
    /// holds exactly `{user_id}` then `{agent_id}`, with literal text between them.
    pub(crate) fn user_scan(&self) -> Option<UserScan> {
        let (mut prefix, mut middle, mut suffix) = (String::new(), String::new(), String::new());
        let mut seen = 0;
        for part in &self.session_index.parts {
            match (part, seen) {
                (Part::Lit(l), 0) => prefix.push_str(l),
                (Part::Lit(l), 1) => middle.push_str(l),
                (Part::Lit(l), _) => suffix.push_str(l),
                (Part::Var(Var::User), 0) | (Part::Var(Var::Agent), 1) => seen += 1,
                (Part::Var(_), _) => return None,
            }
        }
        // The user id ends where this text starts only if an id cannot hold it: it must contain
        // a character ids may not (`app:{user_id}-{agent_id}` would cut `user-1` at its `-`).
        let unambiguous =
            middle.chars().any(|c| matches!(c, ':' | '{' | '}' | '*' | '?' | '[' | ']') || c.is_whitespace());
        if seen != 2 || !unambiguous {
            return None;
        }
        let pattern = format!("{}*{}*{}", glob_escape(&prefix), glob_escape(&middle), glob_escape(&suffix));
        Some(UserScan { pattern, prefix, middle, suffix })
    }

    /// Whether all keys of one user share one hash tag that depends on the user only, so every
    /// multi-key script runs in one cluster slot.
    pub(crate) fn single_slot_per_user(&self) -> bool {
        let samples = [("u1", "a1", "s1", "h1"), ("u1", "a2", "s2", "h2")];
        let mut tags = Vec::new();
        for (u, a, s, h) in samples {
            tags.push(hash_tag(&self.session(u, s)).to_owned());
            tags.push(hash_tag(&self.session_index(u, a)).to_owned());
            tags.push(hash_tag(&self.messages(u, s)).to_owned());
            tags.push(hash_tag(&self.schedule_session_index(u, h)).to_owned());
        }
        let other_user = hash_tag(&self.session("u2", "s1")).to_owned();
        tags.windows(2).all(|w| w[0] == w[1]) && tags[0] != other_user
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(c: &KeyConfig) -> Keys {
        Keys::compile(c).unwrap()
    }

    #[test]
    fn default_keys_are_agentscope_2_0_4() {
        let k = keys(&KeyConfig::default());
        assert_eq!(k.session("user-1", "s1"), "agentscope:user:user-1:session:s1");
        assert_eq!(k.session_index("user-1", "agent-1"), "agentscope:user:user-1:agent:agent-1:sessions");
        assert_eq!(k.messages("user-1", "s1"), "agentscope:user:user-1:session:s1:messages");
        assert_eq!(k.schedule_session_index("user-1", "sched-1"), "agentscope:user:user-1:schedule:sched-1:sessions");
        assert!(!k.single_slot_per_user());
    }

    #[test]
    fn cluster_keys_share_the_user_hash_tag() {
        let k = keys(&KeyConfig::cluster());
        assert_eq!(k.session("user-1", "s1"), "agentscope:user:{user-1}:session:s1");
        assert_eq!(k.messages("user-1", "s1"), "agentscope:user:{user-1}:session:s1:messages");
        assert_eq!(hash_tag(&k.session_index("user-1", "a")), "user-1");
        assert!(k.single_slot_per_user());
    }

    #[test]
    fn bad_templates_are_rejected() {
        for (session, why) in [
            ("x:{session_id}", "missing placeholder {user_id}"),
            ("{user_id}:{session}", "unknown placeholder"),
            ("{user_id}:{session_id", "unclosed"),
            ("{user_id}}:{session_id}", "single '}'"),
        ] {
            let c = KeyConfig { session: session.into(), ..KeyConfig::default() };
            let e = Keys::compile(&c).unwrap_err();
            assert_eq!(e.kind(), StorageErrorKind::InvalidInput);
            assert!(e.to_string().contains(why), "{e}");
        }
    }

    #[test]
    fn agent_scan_patterns() {
        let k = keys(&KeyConfig::default());
        let scan = k.agent_scan("user-1").unwrap();
        assert_eq!(scan.pattern, "agentscope:user:user-1:agent:*:sessions");
        assert_eq!(scan.agent(&k.session_index("user-1", "friday")), Some("friday"));
        assert_eq!(scan.agent("agentscope:user:user-1:agent::sessions"), None);
        assert_eq!(scan.agent("agentscope:user:user-10:agent:a:sessions"), None);
        let scan = k.agent_scan(r"back\slash").unwrap();
        assert_eq!(scan.pattern, r"agentscope:user:back\\slash:agent:*:sessions");
        let c = keys(&KeyConfig::cluster());
        let scan = c.agent_scan("user-1").unwrap();
        assert_eq!(scan.pattern, "agentscope:user:{user-1}:agent:*:sessions");
        assert_eq!(hash_tag(&scan.pattern), hash_tag(&c.session_index("user-1", "a")));
        assert_eq!(scan.agent(&c.session_index("user-1", "a.b")), Some("a.b"));
        assert_eq!(glob_escape("a*b?[c]"), r"a\*b\?\[c\]");
        // A template whose agent cannot be cut out.
        let odd = KeyConfig { session_index: "x:{user_id}:{agent_id}:{session_id}".into(), ..KeyConfig::default() };
        assert!(keys(&odd).agent_scan("u").is_none());
    }

    #[test]
    fn user_scan_patterns() {
        let k = keys(&KeyConfig::default());
        let scan = k.user_scan().unwrap();
        assert_eq!(scan.pattern, "agentscope:user:*:agent:*:sessions");
        assert_eq!(scan.user(&k.session_index("user-1", "friday")), Some("user-1"));
        assert_eq!(scan.user(&k.session_index("u.x", "a")), Some("u.x"));
        assert_eq!(scan.user("agentscope:user::agent:a:sessions"), None);
        assert_eq!(scan.user("agentscope:user:u:agent::sessions"), None);
        let c = keys(&KeyConfig::cluster());
        let scan = c.user_scan().unwrap();
        assert_eq!(scan.pattern, "agentscope:user:{*}:agent:*:sessions");
        assert_eq!(scan.user(&c.session_index("user-1", "a")), Some("user-1"));
        let odd = KeyConfig { session_index: "x:{agent_id}:{user_id}".into(), ..KeyConfig::default() };
        assert!(keys(&odd).user_scan().is_none());
        let ambiguous = KeyConfig { session_index: "app:{user_id}-{agent_id}:sessions".into(), ..KeyConfig::default() };
        assert!(keys(&ambiguous).user_scan().is_none(), "user-1-a could be user 'user' or 'user-1'");
    }

    #[test]
    fn hash_tag_rules() {
        assert_eq!(hash_tag("a{b}c"), "b");
        assert_eq!(hash_tag("a{}c{d}"), "a{}c{d}");
        assert_eq!(hash_tag("abc"), "abc");
    }
}
