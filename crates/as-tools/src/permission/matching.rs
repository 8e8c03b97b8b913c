//! Rule matching: Python `fnmatch` for paths, and the Bash command rule forms.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;

/// Compiled rule patterns, shared by every check (rules are few and checked on every call).
/// Bounded: cleared when it grows past 1024 entries.
type Compiled = Result<Arc<Regex>, regex::Error>;

/// Values are `Arc`ed: cloning a `Regex` itself would also drop its internal match caches.
fn cached_regex(pattern: &str) -> Compiled {
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(hit) = map.get(pattern) {
        return hit.clone();
    }
    if map.len() >= 1024 {
        map.clear();
    }
    let compiled = Regex::new(pattern).map(Arc::new);
    map.insert(pattern.to_owned(), compiled.clone());
    compiled
}

/// Python's `fnmatch.fnmatch` on POSIX: case-sensitive, whole-string, `*` matches anything
/// **including `/` and newlines** (so `**` equals `*`), `?` one character, `[seq]`/`[!seq]`
/// sets; an unclosed `[` is literal.
///
/// ```
/// use as_tools::fnmatch;
/// assert!(fnmatch("src/a/b.py", "src/**"));
/// assert!(fnmatch("src/", "src/**"));
/// assert!(fnmatch("/etc/passwd", "*passwd"));
/// assert!(!fnmatch("SRC/a", "src/*"));
/// assert!(fnmatch("a[b", "a[b"));
/// ```
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    match cached_regex(&fnmatch_translate(pattern)) {
        Ok(re) => re.is_match(name),
        Err(_) => name == pattern,
    }
}

/// A pattern compiled for [`fnmatch`] once, to match many names without the shared cache.
#[derive(Debug)]
pub(crate) struct CompiledGlob {
    pattern: String,
    regex: Option<Regex>,
}

impl CompiledGlob {
    pub(crate) fn new(pattern: &str) -> Self {
        Self { pattern: pattern.to_owned(), regex: Regex::new(&fnmatch_translate(pattern)).ok() }
    }

    /// [`fnmatch`]`(name, pattern)`.
    pub(crate) fn is_match(&self, name: &str) -> bool {
        match &self.regex {
            Some(re) => re.is_match(name),
            None => name == self.pattern,
        }
    }
}

fn fnmatch_translate(pat: &str) -> String {
    let chars: Vec<char> = pat.chars().collect();
    let mut out = String::from("(?s)^(?:");
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' => {
                while i < chars.len() && chars[i] == '*' {
                    i += 1;
                }
                out.push_str(".*");
            }
            '?' => out.push('.'),
            '[' => {
                let mut j = i;
                if j < chars.len() && chars[j] == '!' {
                    j += 1;
                }
                if j < chars.len() && chars[j] == ']' {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    out.push_str("\\[");
                } else {
                    let mut body: String = chars[i..j].iter().collect();
                    i = j + 1;
                    let negate = body.starts_with('!');
                    if negate {
                        body.remove(0);
                    }
                    let mut class = String::from("[");
                    if negate {
                        class.push('^');
                    }
                    for (k, ch) in body.chars().enumerate() {
                        match ch {
                            '\\' | '[' | '&' | '~' | '|' => {
                                class.push('\\');
                                class.push(ch);
                            }
                            '^' if k == 0 && !negate => class.push_str("\\^"),
                            _ => class.push(ch),
                        }
                    }
                    class.push(']');
                    out.push_str(&class);
                }
            }
            other => out.push_str(&regex::escape(&other.to_string())),
        }
    }
    out.push_str(")$");
    out
}

/// Whether a Bash rule (2.0.4 `BashTool.match_rule`) matches `command` as a whole:
///
/// 1. `prefix:*` matches `prefix` itself or `prefix ` followed by anything;
/// 2. without an unescaped `*`, the (unescaped) rule must be a substring;
/// 3. otherwise the rule is 2.0.4's regex (`.^$+?{}[]|()` escaped, `*` a wildcard not crossing
///    newlines, `\\` and `\*` literal, any other backslash kept: `\s`, `\d`, `\w`, `\b` are
///    classes and a boundary); a trailing ` *` also matches the bare prefix (`git *` matches `git`).
///    A regex Python cannot compile falls back to the rule without its stars as a substring, except
///    in the bare prefix, where 2.0.4 raises: such a rule matches nothing here (a deny or ask list
///    treats it as matching every command).
///
/// The engine-facing [`crate::builtin::BashTool`] additionally checks each command segment
/// (see [`split_command_segments`]), which fixes 2.0.4's miss of `rm -rf x\necho` by a deny
/// rule `rm -rf *`.
pub fn bash_rule_matches(rule: &str, command: &str) -> bool {
    BashRule::new(rule).matches(command)
}

/// A Bash rule prepared once to be matched against many commands: [`bash_rule_matches`] and
/// [`bash_rule_could_match`] without building the rule's pattern for every command.
#[derive(Debug)]
pub(crate) struct BashRule {
    how: RuleMatch,
    /// [`rule_shapes`], made on first use.
    shapes: std::cell::OnceCell<Vec<Vec<Piece>>>,
    rule: String,
}

#[derive(Debug)]
enum RuleMatch {
    /// `prefix:*`: the prefix itself, or the prefix and a space.
    Prefix { bare: String, spaced: String },
    /// No unescaped `*`: a substring.
    Literal(String),
    /// The bare stem of a trailing `*`, then the whole pattern; a pattern Python cannot compile
    /// falls back to the rule without its stars as a substring.
    Pattern { stem: Option<Arc<Regex>>, full: Result<Arc<Regex>, String> },
    /// 2.0.4 raises: the stem it tries first for a trailing `*` is a regex Python cannot compile,
    /// outside its `try` (`rm \q *`, `x\ *`). The check fails and the call never runs, so a deny
    /// or ask rule like this matches every command and an allow rule none ([`BashRule::raises`]).
    Raises,
}

/// A character of a rule after 2.0.4's escapes are read: `\\` first, then `\*` (left to right,
/// without overlapping, as `str.replace` does).
#[derive(Clone, Copy, Debug, PartialEq)]
enum RuleChar {
    Char(char),
    /// `\\`: a backslash.
    Backslash,
    /// `\*`: a star.
    Star,
}

fn rule_chars(rule: &str) -> Vec<RuleChar> {
    let mut first = Vec::new();
    let mut chars = rule.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.next_if_eq(&'\\').is_some() {
            first.push(RuleChar::Backslash);
        } else {
            first.push(RuleChar::Char(c));
        }
    }
    let mut out = Vec::with_capacity(first.len());
    let mut it = first.into_iter().peekable();
    while let Some(t) = it.next() {
        if t == RuleChar::Char('\\') && it.next_if_eq(&RuleChar::Char('*')).is_some() {
            out.push(RuleChar::Star);
        } else {
            out.push(t);
        }
    }
    out
}

/// The regex 2.0.4 makes of a rule with an unescaped `*`: `.^$+?{}[]|()` escaped, `*` as `.*`,
/// `\\` and `\*` kept as escapes, and every other backslash left as it is (Python syntax).
fn python_pattern(chars: &[RuleChar]) -> String {
    let mut out = String::new();
    for t in chars {
        match *t {
            RuleChar::Char('*') => out.push_str(".*"),
            RuleChar::Char(c) if ".^$+?{}[]|()".contains(c) => {
                out.push('\\');
                out.push(c);
            }
            RuleChar::Char(c) => out.push(c),
            RuleChar::Backslash => out.push_str("\\\\"),
            RuleChar::Star => out.push_str("\\*"),
        }
    }
    out
}

/// Python's `str.isspace` for one character (it also counts `\x1c`–`\x1f`).
pub(crate) fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

impl BashRule {
    pub(crate) fn new(rule: &str) -> Self {
        let how = if let Some(prefix) = rule.strip_suffix(":*") {
            let prefix = prefix.trim();
            RuleMatch::Prefix { bare: prefix.to_owned(), spaced: format!("{prefix} ") }
        } else if !has_unescaped_star(rule) {
            let text = rule_chars(rule)
                .into_iter()
                .map(|t| match t {
                    RuleChar::Char(c) => c,
                    RuleChar::Backslash => '\\',
                    RuleChar::Star => '*',
                })
                .collect();
            RuleMatch::Literal(text)
        } else {
            let pattern = python_pattern(&rule_chars(rule));
            let full = |python: &str| {
                python_regex_to_rust(python).ok().and_then(|rust| cached_regex(&format!("^(?:{rust})$")).ok())
            };
            // 2.0.4 tries the stem (the pattern without a trailing `.*` and the blanks before it)
            // outside its `try`: a stem Python refuses raises.
            match pattern.strip_suffix(".*").map(|stem| full(stem.trim_end_matches(py_space))) {
                Some(None) => RuleMatch::Raises,
                stem => RuleMatch::Pattern {
                    stem: stem.flatten(),
                    full: full(&pattern).ok_or_else(|| rule.replace('*', "")),
                },
            }
        };
        Self { how, shapes: std::cell::OnceCell::new(), rule: rule.to_owned() }
    }

    /// Whether 2.0.4 raises on this rule (see [`RuleMatch::Raises`]): [`BashRule::matches`] is false
    /// for it, and a deny or ask list must treat it as matching.
    pub(crate) fn raises(&self) -> bool {
        matches!(self.how, RuleMatch::Raises)
    }

    /// [`bash_rule_matches`]`(rule, command)`.
    pub(crate) fn matches(&self, command: &str) -> bool {
        match &self.how {
            RuleMatch::Prefix { bare, spaced } => command == bare || command.starts_with(spaced.as_str()),
            RuleMatch::Literal(literal) => command.contains(literal.as_str()),
            RuleMatch::Pattern { stem, full } => {
                stem.as_ref().is_some_and(|re| re.is_match(command))
                    || match full {
                        Ok(re) => re.is_match(command),
                        Err(without_stars) => command.contains(without_stars.as_str()),
                    }
            }
            RuleMatch::Raises => false,
        }
    }

    /// Whether this rule could match `form`, a command in which a character of `any_text` stands for
    /// any text and one of `any_word` for any text without blanks, both only known when it runs (an
    /// expansion, a glob): whether some text for those parts makes
    /// [`bash_rule_matches`] true, with two differences that only make it match more often: the rule's
    /// `*` also crosses newlines, and a rule without `*` (2.0.4 matches it as a substring) has to be
    /// able to **start** the command. The substring form exists for commands with something before them
    /// (`sudo npm install`, `cd x && npm install`), which the caller has already taken apart; anywhere
    /// in the command it would let any unknown argument match (`echo $HOME` against `npm install`).
    pub(crate) fn could_match(&self, form: &str, any_text: &[char], any_word: &[char]) -> bool {
        let form = form_pieces(form, any_text, any_word);
        self.shapes.get_or_init(|| rule_shapes(&self.how, &self.rule)).iter().any(|shape| shapes_meet(shape, &form))
    }

    /// The rule as words to look for in a command that cannot be read, where its regex escapes
    /// (2.0.4 keeps them) are loosened: `\s` and `\b` a blank, any other a `*` (any text in a
    /// word); `None` when it cannot be told (a rule 2.0.4 raises on, or one whose backslash
    /// unescapes a metacharacter): such a rule is taken to occur.
    pub(crate) fn loose_text(&self) -> Option<String> {
        match &self.how {
            RuleMatch::Prefix { .. } | RuleMatch::Literal(_) => Some(self.rule.clone()),
            RuleMatch::Raises => None,
            RuleMatch::Pattern { .. } => Some(
                pattern_tokens(&self.rule)?
                    .into_iter()
                    .map(|t| match t {
                        PatternToken::Text(c) => c,
                        PatternToken::Escape(Some('s' | 'b')) => ' ',
                        PatternToken::Star | PatternToken::Escape(_) => '*',
                    })
                    .collect(),
            ),
        }
    }
}

/// One piece of a shape: a character, any text, or any text without blanks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Piece {
    Char(char),
    Any,
    AnyWord,
}

impl Piece {
    /// Whether this piece of the command (any text, or any text without blanks) can make what
    /// `rule` (a piece of the rule) stands for.
    fn covers(self, rule: Piece) -> bool {
        match (self, rule) {
            (Piece::Any, _) => true,
            (Piece::AnyWord, Piece::Char(c)) => !c.is_whitespace(),
            (Piece::AnyWord, _) => true,
            (Piece::Char(_), _) => false,
        }
    }
}

/// [`BashRule::could_match`] of a rule given as text.
#[cfg(test)]
fn bash_rule_could_match(rule: &str, form: &str, any_text: &[char], any_word: &[char]) -> bool {
    BashRule::new(rule).could_match(form, any_text, any_word)
}

/// A command as a shape: each character of `any_text` any text, of `any_word` any word.
fn form_pieces(form: &str, any_text: &[char], any_word: &[char]) -> Vec<Piece> {
    form.chars()
        .map(|c| match c {
            c if any_text.contains(&c) => Piece::Any,
            c if any_word.contains(&c) => Piece::AnyWord,
            c => Piece::Char(c),
        })
        .collect()
}

/// The texts a rule matches, as shapes (see [`bash_rule_matches`] for the forms).
fn rule_shapes(how: &RuleMatch, rule: &str) -> Vec<Vec<Piece>> {
    let literal = |s: &str| s.chars().map(Piece::Char).collect::<Vec<_>>();
    let stem_of = |full: &[Piece]| {
        let mut stem = full.split_last().map(|(_, s)| s.to_vec()).unwrap_or_default();
        while stem.last().is_some_and(|p| matches!(p, Piece::Char(c) if py_space(*c))) {
            stem.pop();
        }
        stem
    };
    match how {
        RuleMatch::Prefix { bare, .. } => {
            let mut spaced = literal(bare);
            spaced.extend([Piece::Char(' '), Piece::Any]);
            vec![literal(bare), spaced]
        }
        RuleMatch::Literal(text) => {
            let mut shape = literal(text);
            shape.push(Piece::Any);
            vec![shape]
        }
        RuleMatch::Raises => vec![vec![Piece::Any]],
        RuleMatch::Pattern { full, .. } => {
            // A regex escape the rule keeps (`\s`, `\d`) stands for any text here, which only makes
            // the shape match more; one that unescapes a metacharacter (`\(`, `\|`) makes a regex
            // whose shape is not read: any text.
            let Some(pieces) = pattern_pieces(rule) else { return vec![vec![Piece::Any]] };
            let mut shapes = Vec::new();
            // A trailing `*` also matches the bare prefix (`git *` matches `git`).
            if pieces.last() == Some(&Piece::Any) {
                shapes.push(stem_of(&pieces));
            }
            match full {
                Ok(_) => shapes.push(pieces),
                // 2.0.4 falls back to the rule without its stars as a substring.
                Err(without_stars) => {
                    let mut shape = literal(without_stars);
                    shape.push(Piece::Any);
                    shapes.push(shape);
                }
            }
            shapes
        }
    }
}

/// The pieces of a rule with `*` ([`rule_shapes`]): `*` any text, a regex escape (`\s`) any
/// text; `None` when a backslash unescapes one of the metacharacters 2.0.4 escapes.
fn pattern_pieces(rule: &str) -> Option<Vec<Piece>> {
    Some(
        pattern_tokens(rule)?
            .into_iter()
            .map(|t| match t {
                PatternToken::Text(c) => Piece::Char(c),
                PatternToken::Star | PatternToken::Escape(_) => Piece::Any,
            })
            .collect(),
    )
}

/// A token of a rule with `*`, read as 2.0.4's regex reads it ([`python_pattern`]).
#[derive(Clone, Copy, Debug, PartialEq)]
enum PatternToken {
    /// A character that stands for itself (`\\` and `\*` included).
    Text(char),
    /// An unescaped `*`: any text.
    Star,
    /// A regex escape 2.0.4 keeps (`\s`, `\d`, `\b`, …): the escaped character, `None` for a
    /// backslash that ends the rule.
    Escape(Option<char>),
}

/// The tokens of a rule with `*`, shared by [`pattern_pieces`] and [`BashRule::loose_text`];
/// `None` when a backslash unescapes one of the metacharacters 2.0.4 escapes (`\(`, `\|`): the
/// regex's shape is then not read.
fn pattern_tokens(rule: &str) -> Option<Vec<PatternToken>> {
    let mut out = Vec::new();
    let mut chars = rule_chars(rule).into_iter();
    while let Some(t) = chars.next() {
        out.push(match t {
            RuleChar::Char('*') => PatternToken::Star,
            RuleChar::Char('\\') => match chars.next() {
                Some(RuleChar::Char(c)) if ".^$+?{}[]|()".contains(c) => return None,
                Some(RuleChar::Char(c)) => PatternToken::Escape(Some(c)),
                Some(RuleChar::Backslash) => PatternToken::Escape(Some('\\')),
                Some(RuleChar::Star) => PatternToken::Escape(Some('*')),
                None => PatternToken::Escape(None),
            },
            RuleChar::Char(c) => PatternToken::Text(c),
            RuleChar::Backslash => PatternToken::Text('\\'),
            RuleChar::Star => PatternToken::Text('*'),
        });
    }
    Some(out)
}

/// Whether some text fits both a rule's shape `a` (characters and `Any`) and a command's shape `b`:
/// a walk over `b`, keeping the positions in `a` that the text so far can reach.
fn shapes_meet(a: &[Piece], b: &[Piece]) -> bool {
    let n = a.len();
    let mut reach = vec![false; n + 1];
    let mut next = vec![false; n + 1];
    reach[0] = true;
    for &piece in b {
        let unknown = !matches!(piece, Piece::Char(_));
        // Without taking `piece`: `a`'s `Any` may match nothing, or `piece` (unknown text) makes `a[i]`.
        for i in 0..n {
            if reach[i] && (a[i] == Piece::Any || piece.covers(a[i])) {
                reach[i + 1] = true;
            }
        }
        next.fill(false);
        for i in 0..=n {
            if !reach[i] {
                continue;
            }
            // `piece` (unknown text) makes nothing more, or `a`'s `Any` makes it.
            if unknown || a.get(i) == Some(&Piece::Any) {
                next[i] = true;
            }
            if let (Some(Piece::Char(x)), Piece::Char(y)) = (a.get(i), piece)
                && *x == y
            {
                next[i + 1] = true;
            }
        }
        if !next.contains(&true) {
            return false;
        }
        std::mem::swap(&mut reach, &mut next);
    }
    for i in 0..n {
        if reach[i] && a[i] == Piece::Any {
            reach[i + 1] = true;
        }
    }
    reach[n]
}

/// A Python (`re`, str pattern) regex as Rust's `regex` reads it, or `Err` where Python raises
/// `re.error` (a bad escape such as `\q`, an unterminated set or group, nothing to repeat, an
/// invalid group reference) or uses what Rust's regex lacks (lookaround, backreferences, named
/// or flag groups, possessive quantifiers), which is treated as a pattern Python cannot compile.
/// Escapes are translated (`\Z` is `\z`, `\s` also counts `\x1c`–`\x1f` as Python does, octal
/// `\0`/`\101`, `\x`, `\u`, `\U`), every literal is escaped for Rust, and a `{` that starts no
/// valid repeat is literal, as in Python.
fn python_regex_to_rust(pattern: &str) -> Result<String, ()> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let (mut i, mut depth) = (0, 0usize);
    // Whether the last item can take a repeat, and whether it already has one (and is lazy).
    let (mut repeatable, mut repeated, mut lazy) = (false, false, false);
    while let Some(&c) = chars.get(i) {
        i += 1;
        let quantifier = match c {
            '*' | '+' | '?' => Some(c.to_string()),
            '{' => repeat_braces(&chars, &mut i),
            _ => None,
        };
        if let Some(q) = quantifier {
            if repeated {
                // `*?` is lazy; a second repeat (`**`, `*??`) or a possessive `*+` is not read.
                if q != "?" || lazy {
                    return Err(());
                }
                lazy = true;
            } else if !repeatable {
                return Err(());
            } else {
                repeated = true;
            }
            out.push_str(&q);
            continue;
        }
        (repeated, lazy) = (false, false);
        repeatable = true;
        match c {
            '\\' => {
                let escape = python_escape(&chars, &mut i, false)?;
                out.push_str(&escape.text);
                repeatable = !escape.boundary;
            }
            '[' => out.push_str(&python_class(&chars, &mut i)?),
            '(' => {
                if chars.get(i) == Some(&'?') {
                    if chars.get(i + 1) != Some(&':') {
                        return Err(());
                    }
                    i += 2;
                    out.push_str("(?:");
                } else {
                    out.push('(');
                }
                depth += 1;
                repeatable = false;
            }
            ')' => {
                depth = depth.checked_sub(1).ok_or(())?;
                out.push(')');
            }
            '|' | '^' | '$' => {
                out.push(c);
                repeatable = false;
            }
            '.' => out.push('.'),
            _ => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    if depth > 0 {
        return Err(());
    }
    Ok(out)
}

/// A `{m}`, `{m,}`, `{,n}`, `{m,n}` or `{,}` repeat starting after the `{` at `chars[*i - 1]`, as
/// Rust writes it (moving `i` past it); `None` (the `{` is literal, as in Python) otherwise.
fn repeat_braces(chars: &[char], i: &mut usize) -> Option<String> {
    let digits = |from: usize| chars[from.min(chars.len())..].iter().take_while(|c| c.is_ascii_digit()).count();
    let lo_len = digits(*i);
    let lo: String = chars[*i..*i + lo_len].iter().collect();
    let mut j = *i + lo_len;
    let hi = if chars.get(j) == Some(&',') {
        let hi_len = digits(j + 1);
        let hi: String = chars[j + 1..j + 1 + hi_len].iter().collect();
        j += 1 + hi_len;
        Some(hi)
    } else {
        None
    };
    if chars.get(j) != Some(&'}') || (lo.is_empty() && hi.is_none()) {
        return None;
    }
    *i = j + 1;
    let lo_value = if lo.is_empty() { "0".to_owned() } else { lo };
    Some(match hi {
        None => format!("{{{lo_value}}}"),
        Some(hi) => format!("{{{lo_value},{hi}}}"),
    })
}

/// What a Python escape is, as Rust writes it.
struct Escape {
    text: String,
    /// The character it stands for, if it is one (a range may end at it).
    literal: Option<u32>,
    /// A zero-width assertion (`\b`, `\B`, `\A`, `\Z`): nothing may repeat it.
    boundary: bool,
}

/// The character `value` as an [`Escape`] (a surrogate, which Python matches as a character no
/// Rust string holds, matches nothing).
fn code_point(value: u32) -> Result<Escape, ()> {
    let text = match char::from_u32(value) {
        Some(c) => regex::escape(&c.to_string()),
        None if (0xD800..=0xDFFF).contains(&value) => r"[^\x00-\x{10FFFF}]".to_owned(),
        None => return Err(()),
    };
    Ok(Escape { text, literal: Some(value), boundary: false })
}

/// Python's escape after the backslash at `chars[*i - 1]` (moving `i` past it), in a set or not.
fn python_escape(chars: &[char], i: &mut usize, in_set: bool) -> Result<Escape, ()> {
    let c = *chars.get(*i).ok_or(())?;
    *i += 1;
    let hex = |i: &mut usize, n: usize| -> Result<u32, ()> {
        let digits = chars.get(*i..*i + n).ok_or(())?;
        if !digits.iter().all(char::is_ascii_hexdigit) {
            return Err(());
        }
        *i += n;
        u32::from_str_radix(&digits.iter().collect::<String>(), 16).map_err(|_| ())
    };
    let octal = |i: &mut usize, first: char| -> Result<Escape, ()> {
        let mut text = first.to_string();
        while text.len() < 3 && chars.get(*i).is_some_and(|c| ('0'..='7').contains(c)) {
            text.push(chars[*i]);
            *i += 1;
        }
        let value = u32::from_str_radix(&text, 8).map_err(|_| ())?;
        if value > 0o377 {
            return Err(());
        }
        code_point(value)
    };
    let class = |text: &str| Ok(Escape { text: text.to_owned(), literal: None, boundary: false });
    let boundary = |text: &str| Ok(Escape { text: text.to_owned(), literal: None, boundary: true });
    match c {
        'd' | 'D' | 'w' | 'W' => class(&format!("\\{c}")),
        's' if in_set => class(r"\s\x1c-\x1f"),
        's' => class(r"[\s\x1c-\x1f]"),
        'S' if in_set => class(r"\S"),
        'S' => class(r"[^\s\x1c-\x1f]"),
        'b' if in_set => code_point(0x08),
        'b' | 'B' | 'A' if !in_set => boundary(&format!("\\{c}")),
        'Z' if !in_set => boundary(r"\z"),
        'a' => code_point(0x07),
        'f' => code_point(0x0C),
        'n' => code_point(0x0A),
        'r' => code_point(0x0D),
        't' => code_point(0x09),
        'v' => code_point(0x0B),
        'x' => code_point(hex(i, 2)?),
        'u' => code_point(hex(i, 4)?),
        'U' => code_point(hex(i, 8)?),
        '0' => octal(i, '0'),
        '1'..='7' if in_set => octal(i, c),
        // Three octal digits are a character; anything else is a group reference (not read).
        '1'..='7'
            if chars.get(*i).is_some_and(|d| ('0'..='7').contains(d))
                && chars.get(*i + 1).is_some_and(|d| ('0'..='7').contains(d)) =>
        {
            octal(i, c)
        }
        c if c.is_ascii_alphanumeric() => Err(()),
        c => code_point(u32::from(c)),
    }
}

/// A Python set (`[…]`) after the `[` at `chars[*i - 1]` (moving `i` past its `]`), as a Rust
/// class: a leading `^` negates, a `]` first is literal, `a-z` ranges (of single characters, in
/// order), escapes as in [`python_escape`], every other character literal.
fn python_class(chars: &[char], i: &mut usize) -> Result<String, ()> {
    let mut out = String::from("[");
    if chars.get(*i) == Some(&'^') {
        out.push('^');
        *i += 1;
    }
    let start = *i;
    let member = |i: &mut usize| -> Result<Escape, ()> {
        let c = *chars.get(*i).ok_or(())?;
        *i += 1;
        if c == '\\' { python_escape(chars, i, true) } else { code_point(u32::from(c)) }
    };
    loop {
        match chars.get(*i) {
            None => return Err(()),
            Some(']') if *i != start => {
                *i += 1;
                break;
            }
            Some(_) => {}
        }
        let low = member(i)?;
        if chars.get(*i) == Some(&'-') && chars.get(*i + 1).is_some_and(|c| *c != ']') {
            *i += 1;
            let high = member(i)?;
            match (low.literal, high.literal) {
                (Some(l), Some(h)) if l <= h => out.push_str(&format!("{}-{}", low.text, high.text)),
                _ => return Err(()),
            }
        } else {
            out.push_str(&low.text);
        }
    }
    out.push(']');
    Ok(out)
}

fn has_unescaped_star(rule: &str) -> bool {
    let mut chars = rule.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' => return true,
            _ => {}
        }
    }
    false
}

/// Splits a shell command into the simple commands it runs: on newlines, `;`, `&&`, `||`, `|`
/// and `&` outside quotes, plus the bodies of `$(...)` and backquote substitutions (also inside
/// double quotes). Segments are trimmed; empty ones dropped.
///
/// ```
/// assert_eq!(as_tools::split_command_segments("rm -rf x\necho hi"), ["rm -rf x", "echo hi"]);
/// assert_eq!(as_tools::split_command_segments("git commit -m 'a; b' && ls"), ["git commit -m 'a; b'", "ls"]);
/// assert_eq!(as_tools::split_command_segments("echo $(rm -rf /)"), ["echo $(rm -rf /)", "rm -rf /"]);
/// ```
pub fn split_command_segments(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    split_into(command, &mut out, 0);
    out
}

/// [`split_command_segments`] without the bodies of substitutions: the segments of the text
/// itself.
pub(crate) fn split_top_level_segments(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    split_into(command, &mut out, MAX_NESTING);
    out
}

/// Commands inside commands are read to this depth: here the bodies of substitutions; in Bash's
/// checks also a wrapper's or `xargs`'s command, a `-c` string, a function body, `find -exec` and a
/// process substitution, where a deeper command is read as any command (deny and ask rules match
/// it, allow rules do not see it).
pub(crate) const MAX_NESTING: usize = 8;

/// Adds the segments of `command` to `out`, and those of its substitutions' bodies to a depth of
/// [`MAX_NESTING`].
fn split_into(command: &str, out: &mut Vec<String>, depth: usize) {
    let chars: Vec<char> = command.chars().collect();
    let mut cur = String::new();
    let mut subs: Vec<String> = Vec::new();
    let mut i = 0;
    let (mut single, mut double) = (false, false);
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        let t = cur.trim();
        if !t.is_empty() {
            out.push(t.to_owned());
        }
        cur.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        if single {
            cur.push(c);
            if c == '\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        match c {
            '\\' if i + 1 < chars.len() => {
                cur.push(c);
                cur.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '\'' if !double => single = true,
            '"' => double = !double,
            '$' if !double && chars.get(i + 1) == Some(&'\'') => {
                // `$'…'`: a backslash escapes the next character, `\'` included.
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(chars.len());
                cur.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                // find the matching parenthesis
                let mut level = 0usize;
                let mut j = i + 1;
                while j < chars.len() {
                    match chars[j] {
                        '(' => level += 1,
                        ')' => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let body: String = chars[(i + 2).min(chars.len())..j.min(chars.len())].iter().collect();
                subs.push(body);
                let end = (j + 1).min(chars.len());
                cur.extend(&chars[i..end]);
                i = end;
                continue;
            }
            '`' => {
                let rest = &chars[i + 1..];
                let end = rest.iter().position(|&ch| ch == '`').map_or(chars.len(), |p| i + 1 + p);
                subs.push(chars[i + 1..end].iter().collect());
                let stop = (end + 1).min(chars.len());
                cur.extend(&chars[i..stop]);
                i = stop;
                continue;
            }
            '\n' | ';' if !double => {
                flush(&mut cur, out);
                i += 1;
                continue;
            }
            '&' | '|' if !double && !is_redirection_amp(&chars, i) => {
                flush(&mut cur, out);
                i += 1;
                while i < chars.len() && (chars[i] == '&' || chars[i] == '|') {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    flush(&mut cur, out);
    if depth < MAX_NESTING {
        for s in subs {
            split_into(&s, out, depth + 1);
        }
    }
}

/// `>&`, `<&`, `>|` and `&>` belong to a redirection, not a command separator.
fn is_redirection_amp(chars: &[char], i: usize) -> bool {
    (i > 0 && matches!(chars[i - 1], '>' | '<')) || (chars[i] == '&' && chars.get(i + 1) == Some(&'>'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_cases() {
        for (name, pat, expect) in [
            ("src/a/b.py", "src/**", true),
            ("src/", "src/**", true),
            ("src", "src/**", false),
            ("a.py", "*.py", true),
            ("dir/a.py", "*.py", true),
            ("a\nb", "a*b", true),
            ("ab", "a?", true),
            ("abc", "a?", false),
            ("a1", "a[0-9]", true),
            ("ax", "a[!0-9]", true),
            ("a1", "a[!0-9]", false),
            ("a.b", "a.b", true),
            ("axb", "a.b", false),
            ("(x)", "(x)", true),
        ] {
            assert_eq!(fnmatch(name, pat), expect, "{name} ~ {pat}");
        }
    }

    #[test]
    fn bash_rule_forms() {
        for (rule, cmd, expect) in [
            ("npm run:*", "npm run test", true),
            ("npm run:*", "npm run", true),
            ("npm run:*", "npm running", false),
            ("npm install", "npm install express", true),
            ("npm install", "sudo npm install", true),
            ("npm install", "npm i", false),
            ("git *", "git", true),
            ("git *", "git status", true),
            ("git *", "gitk", false),
            ("rm -rf *", "rm -rf x", true),
            ("rm -rf *", "rm -rf x\necho", false), // 2.0.4: `.` does not cross newlines
            ("echo \\*", "echo *", true),
            ("ls *.txt", "ls a.txt", true),
            ("ls *.txt", "ls a_txt", false),
            ("a\\\\b", "a\\b", true),
        ] {
            assert_eq!(bash_rule_matches(rule, cmd), expect, "{rule:?} ~ {cmd:?}");
        }
    }

    #[test]
    fn rules_could_match_commands_with_unknown_parts() {
        // `A` stands for any text, `W` for any text without blanks.
        let could = |rule: &str, form: &str| bash_rule_could_match(rule, form, &['A'], &['W']);
        for (rule, form, expect) in [
            ("rm:*", "A", true),
            ("rm:*", "A -rf x", true),
            ("rm:*", "W -rf x", true),
            ("rm:*", "rW x", true),
            ("rm:*", "W.sh", false),
            ("rm:*", "echo A", false),
            ("rm -rf *", "rm A x", true),
            ("rm -rf *", "rm W x", true),
            ("rm -rf *", "rm -r A", false),
            ("rm -rf *", "rm W.oA", false),
            ("rm -rf *", "rm WA", true),
            ("rm -rf *", "W -rf x", true),
            ("rm -rf *", "W x", false),
            ("git push:*", "git A", true),
            ("git push:*", "A status", true),
            ("git push:*", "W status", false),
            ("git push:*", "git commit -m W", false),
            ("git *", "W", true),
            ("npm install", "A", true),
            ("npm install", "npm A", true),
            ("npm install", "echo A", false),
            ("* --force", "git push W", true),
            ("* --force", "git push W x", false),
            ("echo \\*", "echo W", true),
            ("echo \\*", "echo x", false),
            // A regex escape the rule keeps stands for any text; one that unescapes a
            // metacharacter makes the whole rule any text.
            ("rm\\s-rf *", "rm -rf A", true),
            ("rm\\s-rf *", "rm --rf A", true),
            ("rm\\s-rf *", "rm-rf A", true),
            ("rm\\s-rf *", "mv -rf A", false),
            ("ls \\( *", "echo x", true),
        ] {
            assert_eq!(could(rule, form), expect, "{rule:?} ~ {form:?}");
        }
    }

    #[test]
    fn rules_loosened_for_commands_that_cannot_be_read() {
        for (rule, loose) in [
            ("git push:*", Some("git push:*")),
            ("npm install", Some("npm install")),
            ("rm\\s-rf *", Some("rm -rf *")),
            ("rm\\b-rf *", Some("rm -rf *")),
            ("rm\\d *", Some("rm* *")),
            ("echo \\* *", Some("echo * *")),
            ("a\\\\b *", Some("a\\b *")),
            ("ls \\( *", None),
            ("x\\|y *", None),
        ] {
            assert_eq!(BashRule::new(rule).loose_text().as_deref(), loose, "{rule:?}");
        }
    }

    #[test]
    fn segments() {
        assert_eq!(split_command_segments("a | b || c & d;e\n\nf"), ["a", "b", "c", "d", "e", "f"]);
        assert_eq!(split_command_segments("echo \"x; y\" ; z"), ["echo \"x; y\"", "z"]);
        assert_eq!(split_command_segments("echo `rm -rf /`"), ["echo `rm -rf /`", "rm -rf /"]);
        assert_eq!(split_command_segments("echo a\\;b"), ["echo a\\;b"]);
        assert_eq!(split_command_segments("ls 2>&1 | wc -l"), ["ls 2>&1", "wc -l"]);
        assert_eq!(split_command_segments("make &> log & echo"), ["make &> log", "echo"]);
        // In `$'…'` a backslash escapes the quote.
        assert_eq!(split_command_segments("echo $'\\''; rm x"), ["echo $'\\''", "rm x"]);
    }
}
