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
/// 3. otherwise `*` is a wildcard (not crossing newlines, as in 2.0.4); a trailing ` *` also
///    matches the bare prefix (`git *` matches `git`).
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
    /// The bare stem of a trailing `*` (when it compiles), then the whole pattern; a pattern
    /// that does not compile falls back to the rule without its stars as a substring.
    Pattern { stem: Option<Arc<Regex>>, full: Result<Arc<Regex>, String> },
}

impl BashRule {
    pub(crate) fn new(rule: &str) -> Self {
        let how = if let Some(prefix) = rule.strip_suffix(":*") {
            let prefix = prefix.trim();
            RuleMatch::Prefix { bare: prefix.to_owned(), spaced: format!("{prefix} ") }
        } else if !has_unescaped_star(rule) {
            RuleMatch::Literal(rule.replace("\\\\", "\u{0}").replace("\\*", "*").replace('\u{0}', "\\"))
        } else {
            // protect escapes, escape regex metacharacters 2.0.4 escapes, turn * into .*
            let protected = rule.replace("\\\\", "\u{1}").replace("\\*", "\u{2}");
            let mut re = String::new();
            for ch in protected.chars() {
                match ch {
                    '.' | '^' | '$' | '+' | '?' | '{' | '}' | '[' | ']' | '|' | '(' | ')' => {
                        re.push('\\');
                        re.push(ch);
                    }
                    '*' => re.push_str(".*"),
                    '\u{1}' => re.push_str("\\\\"),
                    '\u{2}' => re.push_str("\\*"),
                    // a lone backslash stays as in 2.0.4; escape it for Rust's regex syntax when it
                    // would otherwise start an escape Python treats literally
                    '\\' => re.push_str("\\\\"),
                    other => re.push(other),
                }
            }
            let full = |pattern: &str| cached_regex(&format!("^(?:{pattern})$"));
            let stem = re.strip_suffix(".*").and_then(|stem| full(stem.trim_end()).ok());
            RuleMatch::Pattern { stem, full: full(&re).map_err(|_| rule.replace('*', "")) }
        };
        Self { how, shapes: std::cell::OnceCell::new(), rule: rule.to_owned() }
    }

    /// The rule as written.
    pub(crate) fn text(&self) -> &str {
        &self.rule
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
        self.shapes.get_or_init(|| rule_shapes(&self.rule)).iter().any(|shape| shapes_meet(shape, &form))
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
fn rule_shapes(rule: &str) -> Vec<Vec<Piece>> {
    let literal = |s: &str| s.chars().map(Piece::Char).collect::<Vec<_>>();
    if let Some(prefix) = rule.strip_suffix(":*") {
        let prefix = prefix.trim();
        let mut spaced = literal(prefix);
        spaced.extend([Piece::Char(' '), Piece::Any]);
        return vec![literal(prefix), spaced];
    }
    if !has_unescaped_star(rule) {
        let text = rule.replace("\\\\", "\u{0}").replace("\\*", "*").replace('\u{0}', "\\");
        let mut shape = literal(&text);
        shape.push(Piece::Any);
        return vec![shape];
    }
    let protected = rule.replace("\\\\", "\u{1}").replace("\\*", "\u{2}");
    let full: Vec<Piece> = protected
        .chars()
        .map(|c| match c {
            '*' => Piece::Any,
            '\u{1}' => Piece::Char('\\'),
            '\u{2}' => Piece::Char('*'),
            c => Piece::Char(c),
        })
        .collect();
    let mut shapes = Vec::new();
    // A trailing `*` also matches the bare prefix (`git *` matches `git`).
    if let Some((Piece::Any, stem)) = full.split_last() {
        let mut stem = stem.to_vec();
        while stem.last().is_some_and(|p| matches!(p, Piece::Char(c) if c.is_whitespace())) {
            stem.pop();
        }
        shapes.push(stem);
    }
    shapes.push(full);
    shapes
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
        ] {
            assert_eq!(could(rule, form), expect, "{rule:?} ~ {form:?}");
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
