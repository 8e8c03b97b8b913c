//! Session addressing and id validation.

use crate::error::{Result, StorageError, StorageErrorKind};

/// Longest id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Checks that `id` is safe in every key layout: non-empty, at most 256 bytes, and free of
/// `:` `{` `}` `*` `?` `[` `]`, whitespace and control characters.
///
/// ```
/// use as_storage::validate_id;
/// assert!(validate_id("session_id", "0d65955a11824199afb64130822a68b9").is_ok());
/// assert!(validate_id("user_id", "user-1").is_ok());
/// assert!(validate_id("agent_id", "a_b.c").is_ok());
/// for bad in ["", "a:b", "{x}", "*", "a b", "x\ny", "a?", "[a]"] {
///     assert_eq!(validate_id("session_id", bad).unwrap_err().kind(), as_storage::StorageErrorKind::InvalidKey);
/// }
/// ```
pub fn validate_id(what: &'static str, id: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(StorageError::new(StorageErrorKind::InvalidKey, "storage", "validate_id", format!("{what} {id:?} {why}")))
    };
    if id.is_empty() {
        return bad("is empty");
    }
    if id.len() > MAX_ID_BYTES {
        return bad("is longer than 256 bytes");
    }
    if let Some(c) =
        id.chars().find(|c| matches!(c, ':' | '{' | '}' | '*' | '?' | '[' | ']') || c.is_whitespace() || c.is_control())
    {
        return bad(&format!("contains the forbidden character {c:?}"));
    }
    Ok(())
}

/// The owner of sessions: a user's agent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    /// User id.
    pub user_id: String,
    /// Agent id.
    pub agent_id: String,
}

impl Owner {
    /// Builds an owner (not validated; see [`Owner::validate`]).
    pub fn new(user_id: impl Into<String>, agent_id: impl Into<String>) -> Self {
        Self { user_id: user_id.into(), agent_id: agent_id.into() }
    }

    /// Checks both ids with [`validate_id`].
    pub fn validate(&self) -> Result<()> {
        validate_id("user_id", &self.user_id)?;
        validate_id("agent_id", &self.agent_id)
    }

    /// The key of one of this owner's sessions.
    pub fn session(&self, session_id: impl Into<String>) -> SessionKey {
        SessionKey { user_id: self.user_id.clone(), agent_id: self.agent_id.clone(), session_id: session_id.into() }
    }
}

/// The address of a session: `(user_id, agent_id, session_id)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// User id.
    pub user_id: String,
    /// Agent id.
    pub agent_id: String,
    /// Session id.
    pub session_id: String,
}

impl SessionKey {
    /// Builds a key (not validated; see [`SessionKey::validate`]).
    pub fn new(user_id: impl Into<String>, agent_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Self { user_id: user_id.into(), agent_id: agent_id.into(), session_id: session_id.into() }
    }

    /// Checks all three ids with [`validate_id`].
    pub fn validate(&self) -> Result<()> {
        validate_id("user_id", &self.user_id)?;
        validate_id("agent_id", &self.agent_id)?;
        validate_id("session_id", &self.session_id)
    }

    /// The owner part.
    pub fn owner(&self) -> Owner {
        Owner { user_id: self.user_id.clone(), agent_id: self.agent_id.clone() }
    }
}

impl std::fmt::Display for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.user_id, self.agent_id, self.session_id)
    }
}
