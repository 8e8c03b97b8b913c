//! The Lua scripts that make each write atomic (run with `EVALSHA`, falling back to `EVAL`).
//!
//! Conventions shared by the scripts:
//! * TTL mode (`ARGV` pair `mode, ttl`): `persist` (plain `SET`, which clears a TTL exactly like
//!   a 2.0.4 writer without `key_ttl`), `sliding` (`SET … EX ttl` and `EXPIRE ttl` on every
//!   other key written, index sets included), `sliding-records` (the same on records and message
//!   lists, but index sets get no `EXPIRE`, as 2.0.4 writes them: `with_index_ttl(false)`),
//!   `keep` (`SET … KEEPTTL`). `apply_ttl` and `set_record` treat both sliding modes alike;
//!   index sets go through `index_ttl`, which expires only under `sliding`.
//! * A CAS token is a prefix of the stored record (its envelope up to `"state":`); with
//!   `exact = 1` it is the whole stored value.
//! * A cluster client (and a caller's fred pool) re-sends a command whose reply a dropped
//!   connection lost. Create and import find their own write (the record, and for an import its
//!   message list, hold exactly their values) and report success again. A state update cannot: two writers from one revision may
//!   write the same `updated_at` (and, racing on a counter, the very same bytes), so "the record
//!   already is what I write" does not prove it was this writer; a replayed update therefore
//!   reports a conflict (a conditional write's caller re-reads and finds its own state), never a
//!   false success. A replayed `save_turn` (an update carrying messages) is recognised: the
//!   record holds its value (inline) or its envelope and length (staged) and the log ends with its
//!   messages, whose ids no other turn has; it reports success without appending them again. A replayed delete reports the session as
//!   already gone. A replayed `upsert_message` follows 2.0.4's own rule (replace the log's last
//!   message when it has the same id, else append): re-sent at once it replaces its own message,
//!   but when another writer appended in between, the message is appended a second time (the log
//!   then holds it twice; `get_message` returns the newer copy).
//! * Ownership is checked on the record's envelope: the canonical `"user_id":…,"agent_id":…,`
//!   fragment at the record's first `"user_id":` within the first 4 KiB, and only when no object
//!   or array opens before it (so it is the record's own top-level field, never one quoted inside
//!   free-form data such as a config's `parameters`); else a full `cjson` decode. A quote inside
//!   a JSON string is escaped, so `"user_id":` cannot start inside an earlier string value.

use fred::types::scripts::Script;

/// Helper functions the script bodies call, each defined after the helpers it calls. A script
/// defines only the helpers it uses: Redis runs the whole source on every call, and each
/// `local function` costs a closure allocation there.
const HELPERS: &[(&str, &str)] = &[
    (
        "apply_ttl",
        r#"
-- For records and message lists: both sliding modes expire them.
local function apply_ttl(key, mode, ttl)
  if mode == 'sliding' or mode == 'sliding-records' then redis.call('EXPIRE', key, ttl) end
end
"#,
    ),
    (
        "index_ttl",
        r#"
-- For index sets: only `sliding` expires them (`sliding-records` leaves them as 2.0.4 does).
local function index_ttl(key, mode, ttl)
  if mode == 'sliding' then redis.call('EXPIRE', key, ttl) end
end
"#,
    ),
    (
        "set_record",
        r#"
local function set_record(key, value, mode, ttl)
  if mode == 'sliding' or mode == 'sliding-records' then
    redis.call('SET', key, value, 'EX', ttl)
  elseif mode == 'keep' then
    redis.call('SET', key, value, 'KEEPTTL')
  else
    redis.call('SET', key, value)
  end
end
"#,
    ),
    (
        "add_to_indexes",
        r#"
local function add_to_indexes(first, id, mode, ttl)
  for i = first, #KEYS do
    redis.call('SADD', KEYS[i], id)
    index_ttl(KEYS[i], mode, ttl)
  end
end
"#,
    ),
    (
        "check_sets",
        r#"
-- Raises (before the caller writes anything) when a key from KEYS[first] on holds another Redis
-- type than a set: a later SADD/SREM would fail halfway through the script, after its writes.
local function check_sets(first)
  for i = first, #KEYS do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= 'set' then
      return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. t .. ', not a set of session ids')
    end
  end
  return nil
end
"#,
    ),
    (
        "check_list",
        r#"
-- Raises (before the caller writes anything) when `key`, a message list, holds another Redis type:
-- LINDEX/LRANGE on it would fail halfway through the script, naming no key.
local function check_list(key)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= 'list' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. t .. ', not a list of messages')
  end
  return nil
end
"#,
    ),
    (
        "top_level_is",
        r#"
-- Whether `frag` (`"<field>":<value>,`) starts at the first `field` (`"<field>":`) of `head`, with
-- no object or array opened before it: the record's own top-level field, never one quoted in
-- free-form data (a quote inside a string is escaped, so `field` cannot start inside a string).
local function top_level_is(head, field, frag)
  local at = string.find(head, field, 1, true)
  if not at or string.sub(head, at, at + #frag - 1) ~= frag then return false end
  local nested = string.find(head, '[{[]', 2)
  return nested == nil or nested > at
end
"#,
    ),
    (
        "owner_check",
        r#"
-- 1: the record is the caller's; 0: missing or someone else's; -4: not a session record (not
-- JSON, or no string user_id/agent_id); -5: the record key holds another Redis type. Also
-- returns the record's first 4 KiB (for `schedule_is`).
local function owner_check(key, frag, user, agent)
  local head = redis.pcall('GETRANGE', key, 0, 4095)
  if type(head) == 'table' then return -5 end
  if head == '' then return 0 end
  if top_level_is(head, '"user_id":', frag) then return 1, head end
  -- Someone else's, told from the head alone when it is the compact form every writer uses
  -- (`"user_id":"…","agent_id":"…"` at the top level, no escapes): decoding a record of up to
  -- 64 MB in Lua would block the server only to answer "not yours".
  local at = string.find(head, '"user_id":"', 1, true)
  local nested = string.find(head, '[{[]', 2)
  if at and (nested == nil or nested > at) then
    local u_end = string.find(head, '"', at + 11, true)
    local a_end = u_end and string.sub(head, u_end + 1, u_end + 13) == ',"agent_id":"'
      and string.find(head, '"', u_end + 14, true)
    if a_end then
      local u = string.sub(head, at + 11, u_end - 1)
      local a = string.sub(head, u_end + 14, a_end - 1)
      if not string.find(u, '\\', 1, true) and not string.find(a, '\\', 1, true) then
        if u == user and a == agent then return 1, head end
        return 0
      end
    end
  end
  local ok, doc = pcall(cjson.decode, redis.call('GET', key))
  if not ok or type(doc) ~= 'table' or type(doc.user_id) ~= 'string' or type(doc.agent_id) ~= 'string' then
    return -4
  end
  if doc.user_id == user and doc.agent_id == agent then return 1, head end
  return 0
end
"#,
    ),
    (
        "schedule_is",
        r#"
-- Whether the record (`head`: its first 4 KiB) has source_schedule_id `want` ('' for none or
-- empty); `frag` is its canonical `"source_schedule_id":…,` fragment.
local function schedule_is(key, head, want, frag)
  if top_level_is(head, '"source_schedule_id":', frag) then return true end
  local ok, doc = pcall(cjson.decode, redis.call('GET', key))
  if not ok or type(doc) ~= 'table' then return false end
  local have = doc.source_schedule_id
  if have == nil or have == cjson.null then have = '' end
  return have == want
end
"#,
    ),
    (
        "tail_is",
        r#"
-- 1 when the log's last message has id `id` (`needle`: its canonical `"id":…`), else 0; -2 when
-- that message looks like it but is not valid JSON.
local function tail_is(key, needle, id)
  local tail = redis.call('LINDEX', key, -1)
  if not tail or not string.find(tail, needle, 1, true) then return 0 end
  local ok, doc = pcall(cjson.decode, tail)
  if not ok or type(doc) ~= 'table' then return -2 end
  if doc.id == id then return 1 end
  return 0
end
"#,
    ),
    (
        "append_log",
        r#"
-- Writes the turn's messages, `(id, json)` pairs in `ARGV` from `first` on, with upsert_message's
-- rule: the first replaces the log's last message when `same` (from `tail_is`) is 1, each later
-- one replaces its predecessor when their ids are equal; anything else is appended.
local function append_log(key, first, same)
  local prev = nil
  for i = first, #ARGV - 1, 2 do
    local replace = (prev == nil and same == 1) or (prev ~= nil and prev == ARGV[i])
    if replace then
      redis.call('LSET', key, -1, ARGV[i + 1])
    else
      redis.call('RPUSH', key, ARGV[i + 1])
    end
    prev = ARGV[i]
  end
end
"#,
    ),
    (
        "log_holds",
        r#"
-- Whether the log already ends with the turn's messages (`(id, json)` pairs in `ARGV` from `first`
-- on) exactly as `append_log` leaves them: a run of equal ids collapses into its last message.
local function log_holds(key, first)
  local want, prev = {}, nil
  for i = first, #ARGV - 1, 2 do
    if prev ~= nil and prev == ARGV[i] then want[#want] = ARGV[i + 1] else want[#want + 1] = ARGV[i + 1] end
    prev = ARGV[i]
  end
  if #want == 0 then return false end
  local tail = redis.call('LRANGE', key, -#want, -1)
  if #tail ~= #want then return false end
  for i = 1, #want do
    if tail[i] ~= want[i] then return false end
  end
  return true
end
"#,
    ),
    (
        "token_state",
        r#"
local function token_state(key, token, exact)
  local head = redis.call('GETRANGE', key, 0, #token - 1)
  if head == token and (exact == '0' or redis.call('STRLEN', key) == #token) then return 1 end
  if redis.call('EXISTS', key) == 0 then return 0 end
  return -1
end
"#,
    ),
];

/// KEYS: record, messages, agent index, [schedule index]. ARGV: value, id, mode, ttl.
/// Returns 1 (created) or 0 (a non-empty record already exists). A record that holds exactly
/// this value is this create run before (a re-sent command): 1 again. A message list left under
/// the id (its record expired first, or a 2.0.4 delete stopped halfway) belongs to no session:
/// it goes, so a new session never starts with someone else's conversation.
const CREATE: &str = r#"
if redis.call('GETRANGE', KEYS[1], 0, 0) ~= '' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
  return 0
end
local bad = check_sets(3)
if bad then return bad end
redis.call('DEL', KEYS[2])
set_record(KEYS[1], ARGV[1], ARGV[3], ARGV[4])
add_to_indexes(3, ARGV[2], ARGV[3], ARGV[4])
return 1
"#;

/// KEYS: record, messages, agent index, [schedule index]. ARGV: token, exact, id, mode, ttl, value,
/// then for `save_turn` the first message's needle and `(id, json)` pairs, oldest first.
/// The update for small records: the value travels in `ARGV` (one command, no staging key).
/// Returns 1 (written), 2 (already written: a re-sent `save_turn`, see [`UPDATE`]), 0 (missing),
/// -1 (token mismatch: someone else wrote), -2 (the log's last message is corrupt), or a
/// `WRONGTYPE` error naming the message list when a `save_turn` finds another Redis type there;
/// nothing is written unless it returns 1.
const UPDATE_INLINE: &str = r#"
if #ARGV > 6 then
  local bad = check_list(KEYS[2])
  if bad then return bad end
end
local s = token_state(KEYS[1], ARGV[1], ARGV[2])
if s == -1 and #ARGV > 6 and redis.call('GET', KEYS[1]) == ARGV[6] and log_holds(KEYS[2], 8) then return 2 end
if s ~= 1 then return s end
local bad = check_sets(3)
if bad then return bad end
local same = 0
if #ARGV > 6 then
  same = tail_is(KEYS[2], ARGV[7], ARGV[8])
  if same == -2 then return -2 end
end
set_record(KEYS[1], ARGV[6], ARGV[4], ARGV[5])
append_log(KEYS[2], 8, same)
apply_ttl(KEYS[2], ARGV[4], ARGV[5])
add_to_indexes(3, ARGV[3], ARGV[4], ARGV[5])
return 1
"#;

/// KEYS: record, staged value, messages, agent index, [schedule index]. ARGV: token, exact, id,
/// mode, ttl, the staged record's envelope (its CAS token) and its length, then for `save_turn`
/// the first message's needle and `(id, json)` pairs.
/// The new record was written to the staging key (same hash slot) just before, in the same
/// pipeline; the script moves it into place with `RENAME` (O(1)) instead of carrying a large
/// value through Lua (which costs about 3 ms per MB in Redis 7), then applies the TTL policy.
/// Returns 1 (written), 2 (already written), 0 (missing), -1 (token mismatch: someone else
/// wrote), -2 (the log's last message is corrupt), -3 (no staged value), or a `WRONGTYPE` error
/// naming the message list (as [`UPDATE_INLINE`]); nothing is written unless it returns 1, and the
/// staging key is gone whatever it returns.
///
/// 2: the token no longer matches, but the record has this write's envelope and length and the
/// log ends with exactly its messages. That is this very `save_turn` run before (a re-sent command
/// whose reply a dropped connection lost; the staging key is gone by then, renamed into the
/// record, unless the `SET` was re-sent too). The message ids tell it apart: they are generated
/// per message, so another writer's turn does not end the log with these (two writers from one
/// revision may well write the same envelope). Without messages nothing tells a re-send from a writer that wrote the same bytes
/// (two writers incrementing one counter), so a plain update still reports -1.
const UPDATE: &str = r#"
if #ARGV > 7 then
  local bad = check_list(KEYS[3])
  if bad then
    redis.call('DEL', KEYS[2])
    return bad
  end
end
local s = token_state(KEYS[1], ARGV[1], ARGV[2])
if s ~= 1 then
  local mine = s == -1 and #ARGV > 7 and token_state(KEYS[1], ARGV[6], '0') == 1
    and redis.call('STRLEN', KEYS[1]) == tonumber(ARGV[7]) and log_holds(KEYS[3], 9)
  redis.call('DEL', KEYS[2])
  if mine then return 2 end
  return s
end
if redis.call('EXISTS', KEYS[2]) == 0 then return -3 end
local bad = check_sets(4)
if bad then
  redis.call('DEL', KEYS[2])
  return bad
end
local same = 0
if #ARGV > 7 then
  same = tail_is(KEYS[3], ARGV[8], ARGV[9])
  if same == -2 then
    redis.call('DEL', KEYS[2])
    return -2
  end
end
local keep = -1
if ARGV[4] == 'keep' then keep = redis.call('PTTL', KEYS[1]) end
redis.call('RENAME', KEYS[2], KEYS[1])
if ARGV[4] == 'sliding' or ARGV[4] == 'sliding-records' then
  redis.call('EXPIRE', KEYS[1], ARGV[5])
elseif keep > 0 then
  redis.call('PEXPIRE', KEYS[1], keep)
else
  redis.call('PERSIST', KEYS[1])
end
append_log(KEYS[3], 9, same)
apply_ttl(KEYS[3], ARGV[4], ARGV[5])
add_to_indexes(4, ARGV[3], ARGV[4], ARGV[5])
return 1
"#;

/// KEYS: record, messages, agent index, [schedule index]. ARGV: owner fragment, user, agent, id,
/// the schedule id the caller read ('' for none), its canonical fragment.
/// Returns 1 (deleted), 0 (missing or owned by someone else), -1 (the schedule changed since the
/// caller read it: read again, so the right schedule index entry goes), or `owner_check`'s -4 / -5.
/// Only the owner (fixed at creation) and the schedule (moved only by an overwrite import) are
/// checked, not the whole envelope: a delete never starves under concurrent state updates.
const DELETE: &str = r#"
local owner, head = owner_check(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
if owner ~= 1 then return owner end
if not schedule_is(KEYS[1], head, ARGV[5], ARGV[6]) then return -1 end
local bad = check_sets(3)
if bad then return bad end
redis.call('DEL', KEYS[1], KEYS[2])
for i = 3, #KEYS do redis.call('SREM', KEYS[i], ARGV[4]) end
return 1
"#;

/// KEYS: record, messages, agent index, [schedule index]. ARGV: id, the record's bytes as read ('' when
/// the key held another Redis type), owner fragment, user, agent. Deletes a record the caller cannot
/// read (so could not check its owner on it) when the agent's index lists the id, the record is still
/// what the caller read, and it does not name another owner (`owner_check` on it: ours, or not a
/// session record at all). The schedule index is the one the bytes read name (the caller finds its
/// `source_schedule_id` leniently, without decoding the whole record); the bytes are checked to be
/// unchanged, so it is still the record's. Returns 1 (deleted), 0 (not this agent's), -1 (changed
/// meanwhile).
const DELETE_UNREADABLE: &str = r#"
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 0 then return 0 end
local t = redis.call('TYPE', KEYS[1])['ok']
if ARGV[2] == '' then
  if t == 'string' or t == 'none' then return -1 end
else
  if t ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[2] then return -1 end
  if owner_check(KEYS[1], ARGV[3], ARGV[4], ARGV[5]) == 0 then return 0 end
end
local bad = check_sets(3)
if bad then return bad end
redis.call('DEL', KEYS[1], KEYS[2])
for i = 3, #KEYS do redis.call('SREM', KEYS[i], ARGV[1]) end
return 1
"#;

/// KEYS: messages, record, agent index. ARGV: msg json, msg id, needle, owner fragment, user, agent,
/// mode, ttl, session id.
/// Returns 1 (appended), 2 (replaced the last), 0 (no such session), -2 (last message is corrupt),
/// or `owner_check`'s -4 / -5. A sliding TTL restarts on the record and (mode `sliding` only) on the
/// agent's index set too (2.0.4 expires only the list here), so neither the record nor its listing entry expires before
/// the conversation written after it; a missing index entry is re-added, as an update re-adds it.
/// (The schedule index, whose key the record names, is refreshed by the next state write.)
const UPSERT_MESSAGE: &str = r#"
local owner = owner_check(KEYS[2], ARGV[4], ARGV[5], ARGV[6])
if owner ~= 1 then return owner end
local bad = check_sets(3)
if bad then return bad end
local same = tail_is(KEYS[1], ARGV[3], ARGV[2])
if same == -2 then return -2 end
if same == 1 then
  redis.call('LSET', KEYS[1], -1, ARGV[1])
else
  redis.call('RPUSH', KEYS[1], ARGV[1])
end
apply_ttl(KEYS[1], ARGV[7], ARGV[8])
apply_ttl(KEYS[2], ARGV[7], ARGV[8])
add_to_indexes(3, ARGV[9], ARGV[7], ARGV[8])
return same + 1
"#;

/// KEYS: messages, record. ARGV: start, stop, owner fragment, user, agent.
/// Returns `{1, items}`, `{0}` when the session does not exist for that owner, or `{code}` with
/// `owner_check`'s -4 / -5.
const LIST_MESSAGES: &str = r#"
local owner = owner_check(KEYS[2], ARGV[3], ARGV[4], ARGV[5])
if owner ~= 1 then return {owner} end
return {1, redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2])}
"#;

/// KEYS: messages, record. ARGV: msg id, needle, owner fragment, user, agent.
/// Returns the newest message with that id, nil, or (an integer) `owner_check`'s 0 / -4 / -5, or
/// -2 when a message that may be the newest copy (it holds the id's needle) is not valid JSON:
/// never an older copy in its place. Scans from the end in chunks.
const GET_MESSAGE: &str = r#"
local owner = owner_check(KEYS[2], ARGV[3], ARGV[4], ARGV[5])
if owner ~= 1 then return owner end
local hi = redis.call('LLEN', KEYS[1]) - 1
while hi >= 0 do
  local lo = hi - 63
  if lo < 0 then lo = 0 end
  local chunk = redis.call('LRANGE', KEYS[1], lo, hi)
  for i = #chunk, 1, -1 do
    local m = chunk[i]
    if string.find(m, ARGV[2], 1, true) then
      local ok, doc = pcall(cjson.decode, m)
      if not ok or type(doc) ~= 'table' then return -2 end
      if doc.id == ARGV[1] then return m end
    end
  end
  hi = lo - 1
end
return false
"#;

/// `import_record`. KEYS: record, messages, agent index, [new schedule index], [old schedule index].
/// ARGV: value, id, mode, ttl, token ('' = the record must be absent), exact, has new schedule
/// index ('1'/'0'), then the messages (JSON, oldest first).
/// Writes what a 2.0.4 create writes (record, `SADD` to the agent and schedule index, the message
/// list, TTLs) but the record's bytes are the caller's, and the message list is replaced whole.
/// Returns 1 (written) or -1 (the record is not what the caller read: read again).
const IMPORT: &str = r#"
-- Record and message list already exactly this import's: it ran before (a re-sent command).
local function done_before()
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
  local n = #ARGV - 7
  if redis.call('LLEN', KEYS[2]) ~= n then return false end
  if n == 0 then return true end
  local items = redis.call('LRANGE', KEYS[2], 0, -1)
  for i = 1, n do
    if items[i] ~= ARGV[7 + i] then return false end
  end
  return true
end
if ARGV[5] == '' then
  if redis.call('GETRANGE', KEYS[1], 0, 0) ~= '' then
    if done_before() then return 1 end
    return -1
  end
elseif token_state(KEYS[1], ARGV[5], ARGV[6]) ~= 1 then
  if done_before() then return 1 end
  return -1
end
local bad = check_sets(3)
if bad then return bad end
local last = 3
if ARGV[7] == '1' then last = 4 end
for i = last + 1, #KEYS do redis.call('SREM', KEYS[i], ARGV[2]) end
set_record(KEYS[1], ARGV[1], ARGV[3], ARGV[4])
-- The list is replaced whole; in keep mode the new list keeps the old one's expiry.
local kept = -1
if ARGV[3] == 'keep' then kept = redis.call('PTTL', KEYS[2]) end
redis.call('DEL', KEYS[2])
for i = 8, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
if #ARGV >= 8 then
  apply_ttl(KEYS[2], ARGV[3], ARGV[4])
  if kept > 0 then redis.call('PEXPIRE', KEYS[2], kept) end
end
for i = 3, last do
  redis.call('SADD', KEYS[i], ARGV[2])
  index_ttl(KEYS[i], ARGV[3], ARGV[4])
end
return 1
"#;

/// KEYS: index, record keys… ARGV: ids… (same order). Removes ids whose record is gone; returns
/// the ids whose record key holds another Redis type (a listing reports them as errors).
const PRUNE: &str = r#"
local wrong = {}
for i = 2, #KEYS do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t == 'none' then
    redis.call('SREM', KEYS[1], ARGV[i - 1])
  elseif t ~= 'string' then
    wrong[#wrong + 1] = ARGV[i - 1]
  end
end
return wrong
"#;

/// KEYS: lock. ARGV: token, ttl ms. Extends only our own lock.
pub(crate) const LOCK_EXTEND: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"#;

/// KEYS: lock. ARGV: token. Deletes only our own lock.
pub(crate) const LOCK_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#;

/// A script with its SHA-1.
#[derive(Clone, Debug)]
pub(crate) struct Lua {
    pub(crate) source: String,
    pub(crate) script: Script,
}

impl Lua {
    /// `body` after the helpers it calls, directly or through another helper.
    fn with_prelude(body: &str) -> Self {
        let calls = |source: &str, name: &str| source.contains(&format!("{name}("));
        let mut needed = vec![false; HELPERS.len()];
        for (i, (name, _)) in HELPERS.iter().enumerate().rev() {
            needed[i] = calls(body, name)
                || HELPERS.iter().zip(&needed).skip(i + 1).any(|((_, source), &used)| used && calls(source, name));
        }
        let mut source: String = HELPERS
            .iter()
            .zip(&needed)
            .filter(|(_, used)| **used)
            .map(|((_, source), _)| source.trim_start())
            .collect();
        source.push_str(body);
        Self::plain(&source)
    }

    fn plain(source: &str) -> Self {
        Self { source: source.to_owned(), script: Script::from_lua(source.to_owned()) }
    }
}

/// All scripts, hashed once per store.
#[derive(Clone, Debug)]
pub(crate) struct Scripts {
    pub(crate) create: Lua,
    pub(crate) update: Lua,
    pub(crate) update_inline: Lua,
    pub(crate) delete: Lua,
    pub(crate) delete_unreadable: Lua,
    pub(crate) upsert_message: Lua,
    pub(crate) list_messages: Lua,
    pub(crate) get_message: Lua,
    pub(crate) prune: Lua,
    pub(crate) import: Lua,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            create: Lua::with_prelude(CREATE),
            update: Lua::with_prelude(UPDATE),
            update_inline: Lua::with_prelude(UPDATE_INLINE),
            delete: Lua::with_prelude(DELETE),
            delete_unreadable: Lua::with_prelude(DELETE_UNREADABLE),
            upsert_message: Lua::with_prelude(UPSERT_MESSAGE),
            list_messages: Lua::with_prelude(LIST_MESSAGES),
            get_message: Lua::with_prelude(GET_MESSAGE),
            prune: Lua::plain(PRUNE),
            import: Lua::with_prelude(IMPORT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_defines_exactly_the_helpers_it_calls() {
        let s = Scripts::new();
        let all = [
            ("create", &s.create, &["check_sets", "set_record", "add_to_indexes", "index_ttl"][..]),
            (
                "update",
                &s.update,
                &[
                    "check_sets",
                    "check_list",
                    "token_state",
                    "log_holds",
                    "tail_is",
                    "append_log",
                    "apply_ttl",
                    "index_ttl",
                    "add_to_indexes",
                ],
            ),
            (
                "update_inline",
                &s.update_inline,
                &[
                    "check_sets",
                    "check_list",
                    "token_state",
                    "log_holds",
                    "tail_is",
                    "append_log",
                    "set_record",
                    "apply_ttl",
                    "index_ttl",
                    "add_to_indexes",
                ],
            ),
            ("delete", &s.delete, &["check_sets", "top_level_is", "owner_check", "schedule_is"]),
            (
                "upsert_message",
                &s.upsert_message,
                &["check_sets", "top_level_is", "owner_check", "tail_is", "apply_ttl", "index_ttl", "add_to_indexes"],
            ),
            ("list_messages", &s.list_messages, &["top_level_is", "owner_check"]),
            ("get_message", &s.get_message, &["top_level_is", "owner_check"]),
            ("prune", &s.prune, &[]),
            ("delete_unreadable", &s.delete_unreadable, &["check_sets", "top_level_is", "owner_check"]),
            ("import", &s.import, &["check_sets", "token_state", "set_record", "apply_ttl", "index_ttl"]),
        ];
        for (script, lua, want) in all {
            for (name, _) in HELPERS {
                let defined = lua.source.matches(&format!("local function {name}(")).count();
                assert_eq!(defined, usize::from(want.contains(name)), "{script}: {name} defined {defined} times");
            }
            // Every helper is defined before its first call.
            for name in want {
                let def = lua.source.find(&format!("local function {name}(")).unwrap_or(usize::MAX);
                let first_call = lua.source.find(&format!("{name}(")).unwrap_or(0);
                assert!(def <= first_call, "{script}: {name} called before it is defined");
            }
        }
    }
}
