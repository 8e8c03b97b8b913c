//! A command's words as bash reads them, for the deny and ask rules that must fail closed.
//!
//! [`pattern_words`] reads a segment's words the way bash does before it runs them: quotes and
//! escapes removed, brace expansions expanded (`{r,}m` is the two words `rm m`), and every piece
//! whose text is only known when the command runs replaced by a stand-in:
//!
//! * [`UNKNOWN`] (any text, blanks included) for an unquoted parameter, command or arithmetic
//!   expansion, which may split into several words (`$x`, `${x:-rm}`, `$(…)`, `` `…` ``);
//! * [`UNKNOWN_WORD`] (any text without blanks) for what stays one word: a quoted expansion
//!   (`"$x"`), a `$'…'` or `$"…"` string, a process substitution, a `~user` prefix, and what a
//!   glob's `*`, `?` and `[…]` match;
//! * [`MORE_WORDS`] after a word with a glob, which may match several files (any text after the
//!   word, but not part of a program's name: `./bin/*.sh` runs a program whose name ends in `.sh`).
//!
//! A word a brace expansion made is marked with [`BRACED`], so that a program named by one
//! (`{r,}m`, `r{m,}`, `{rm,-rf,x}`) is taken as unknown too.

/// Stands for any text (blanks included) that is only known when the command runs.
pub(super) const UNKNOWN: char = '\u{E000}';
/// [`UNKNOWN`] as a string.
pub(super) const UNKNOWN_STR: &str = "\u{E000}";
/// Ends a word that a brace expansion made.
pub(super) const BRACED: char = '\u{E001}';
/// Stands for text without blanks that is only known when the command runs.
pub(super) const UNKNOWN_WORD: char = '\u{E002}';
/// [`UNKNOWN_WORD`] as a string.
pub(super) const UNKNOWN_WORD_STR: &str = "\u{E002}";
/// Stands for more words after a word with a glob.
pub(super) const MORE_WORDS: char = '\u{E003}';
/// The stand-ins for any text.
pub(super) const ANY_TEXT: &[char] = &[UNKNOWN, MORE_WORDS];
/// The stand-ins for any text without blanks.
pub(super) const ANY_WORD: &[char] = &[UNKNOWN_WORD];
/// Every stand-in.
pub(super) const STAND_INS: &[char] = &[UNKNOWN, UNKNOWN_WORD, MORE_WORDS];

/// At most this many words come out of one segment's brace expansions; a word that would make
/// more is read as [`UNKNOWN`].
const MAX_WORDS: usize = 1024;

/// A word longer than this (in bytes) that holds an unquoted `{` (one bash may brace-expand) is
/// read as [`UNKNOWN`] rather than expanded. Braces in quotes, escaped or in `${…}` do not count: a
/// long `bash -c '…'` script holding `${x}` is read as written.
const MAX_BRACED_WORD: usize = 4096;

/// At most this many bytes come out of one brace expansion; one that would make more is read as
/// [`UNKNOWN`].
const MAX_EXPANSION_BYTES: usize = 1 << 20;

/// Nested quotes and expansions deeper than this are read as running to the end of the text.
const MAX_DEPTH: usize = 64;

/// Where the quoted string or expansion that starts at `i` ends (the index after it), if one
/// starts there: `'…'`, `"…"`, `$'…'`, `$"…"`, `$(…)`, `$((…))`, `${…}`, `$[…]`, `` `…` ``,
/// `<(…)`, `>(…)`. One left open ends with the text.
fn construct_end(chars: &[char], i: usize, depth: usize) -> Option<usize> {
    let next = chars.get(i + 1).copied();
    let end = match (chars.get(i)?, next) {
        _ if depth > MAX_DEPTH => chars.len(),
        ('\'', _) => quote_end(chars, i + 1, '\'', false),
        ('"', _) => double_end(chars, i + 1, depth),
        ('$', Some('\'')) => quote_end(chars, i + 2, '\'', true),
        ('$', Some('"')) => double_end(chars, i + 2, depth),
        ('$' | '<' | '>', Some('(')) => group_end(chars, i + 2, ('(', ')'), depth),
        ('$', Some('{')) => group_end(chars, i + 2, ('{', '}'), depth),
        ('$', Some('[')) => group_end(chars, i + 2, ('[', ']'), depth),
        ('`', _) => quote_end(chars, i + 1, '`', true),
        _ => return None,
    };
    Some(end)
}

fn quote_end(chars: &[char], from: usize, close: char, escapes: bool) -> usize {
    let mut j = from;
    while let Some(&c) = chars.get(j) {
        if escapes && c == '\\' {
            j += 2;
        } else if c == close {
            return j + 1;
        } else {
            j += 1;
        }
    }
    chars.len()
}

/// The end of a double-quoted string whose text starts at `from` (expansions in it included).
fn double_end(chars: &[char], from: usize, depth: usize) -> usize {
    let mut j = from;
    while let Some(&c) = chars.get(j) {
        match c {
            '\\' => j += 2,
            '"' => return j + 1,
            '`' => j = construct_end(chars, j, depth + 1).unwrap_or(j + 1),
            '$' if matches!(chars.get(j + 1), Some('(' | '{' | '[')) => {
                j = construct_end(chars, j, depth + 1).unwrap_or(j + 1);
            }
            _ => j += 1,
        }
    }
    chars.len()
}

/// The end of a group whose text starts at `from`: quotes and expansions in it are skipped; when
/// that leaves the group open (an apostrophe in a here-document), the parentheses are simply
/// counted, as the segment splitter does.
fn group_end(chars: &[char], from: usize, (open, close): (char, char), depth: usize) -> usize {
    let mut level = 1usize;
    let mut j = from;
    while let Some(&c) = chars.get(j) {
        if c == '\\' {
            j += 2;
            continue;
        }
        if c == open {
            level += 1;
        } else if c == close {
            level -= 1;
            if level == 0 {
                return j + 1;
            }
        } else if let Some(end) = construct_end(chars, j, depth + 1) {
            j = end;
            continue;
        }
        j += 1;
    }
    let mut level = 1usize;
    for (k, &c) in chars.iter().enumerate().skip(from) {
        if c == open {
            level += 1;
        } else if c == close {
            level -= 1;
            if level == 0 {
                return k + 1;
            }
        }
    }
    chars.len()
}

/// Whether a `#` after `prev` starts a word (and so a comment).
fn word_start(prev: Option<char>) -> bool {
    prev.is_none_or(|p| p.is_whitespace() || matches!(p, ';' | '&' | '|' | '(' | ')' | '<' | '>'))
}

/// `text` without its comments (a `#` that starts a word, outside quotes, up to the newline).
pub(super) fn strip_comments(text: &str) -> String {
    if !text.contains('#') {
        return text.to_owned();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            out.extend(chars.get(i..(i + 2).min(chars.len())).unwrap_or_default());
            i += 2;
        } else if let Some(end) = construct_end(&chars, i, 0) {
            out.extend(&chars[i..end]);
            i = end;
        } else if c == '#' && word_start(i.checked_sub(1).map(|p| chars[p])) {
            while chars.get(i).is_some_and(|&c| c != '\n') {
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The words of a segment as written (quotes, escapes and expansions kept), split at unquoted blanks.
fn raw_words(segment: &str) -> Vec<String> {
    let chars: Vec<char> = segment.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            cur.extend(chars.get(i..(i + 2).min(chars.len())).unwrap_or_default());
            i += 2;
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            i += 1;
        } else if let Some(end) = construct_end(&chars, i, 0) {
            cur.extend(&chars[i..end]);
            i = end;
        } else {
            cur.push(c);
            i += 1;
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// For each `{` of a word, the index of the `}` that closes it and whether it holds a comma outside
/// nested braces, quotes and expansions (`None` when it is never closed), found in one pass (a
/// scan from each unclosed `{` to the end would take quadratic time).
fn brace_closes(chars: &[char]) -> Vec<Option<(usize, bool)>> {
    let mut closes = vec![None; chars.len()];
    let mut open: Vec<(usize, bool)> = Vec::new();
    let mut j = 0;
    while let Some(&c) = chars.get(j) {
        match c {
            '\\' => j += 1,
            '{' => open.push((j, false)),
            '}' => {
                if let Some((at, comma)) = open.pop()
                    && let Some(slot) = closes.get_mut(at)
                {
                    *slot = Some((j, comma));
                }
            }
            ',' => {
                if let Some(top) = open.last_mut() {
                    top.1 = true;
                }
            }
            _ => {
                if let Some(end) = construct_end(chars, j, 0) {
                    j = end;
                    continue;
                }
            }
        }
        j += 1;
    }
    closes
}

/// Whether a word holds a `{` outside quotes and expansions, not escaped: only such a brace may be
/// expanded.
fn unquoted_brace(chars: &[char]) -> bool {
    let mut j = 0;
    while let Some(&c) = chars.get(j) {
        match c {
            '\\' => j += 2,
            '{' => return true,
            _ => j = construct_end(chars, j, 0).unwrap_or(j + 1),
        }
    }
    false
}

/// The parts of a brace expression's text split at its top-level commas.
fn brace_parts(amble: &[char]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut level = 0usize;
    let mut start = 0;
    let mut j = 0;
    while let Some(&c) = amble.get(j) {
        match c {
            '\\' => j += 1,
            '{' => level += 1,
            '}' => level = level.saturating_sub(1),
            ',' if level == 0 => {
                parts.push(amble[start..j].iter().collect());
                start = j + 1;
            }
            _ => {
                if let Some(end) = construct_end(amble, j, 0) {
                    j = end;
                    continue;
                }
            }
        }
        j += 1;
    }
    parts.push(amble[start.min(amble.len())..].iter().collect());
    parts
}

/// The words of a sequence expression `x..y[..step]` (integers, or single letters), as bash makes
/// them; `None` when the text is no sequence (bash then leaves the braces alone), or `Some(None)`
/// when it would make more than `budget` words.
fn sequence(amble: &str, budget: usize) -> Option<Option<Vec<String>>> {
    let parts: Vec<&str> = amble.split("..").collect();
    let (from, to, step) = match parts.as_slice() {
        [a, b] => (*a, *b, None),
        [a, b, s] => (*a, *b, Some(s.parse::<i64>().ok()?)),
        _ => return None,
    };
    let step = step.map_or(1, |s: i64| s.unsigned_abs().max(1));
    let letter = |s: &str| {
        let mut cs = s.chars();
        cs.next().filter(|c| c.is_ascii_alphabetic() && cs.next().is_none())
    };
    let (a, b, width, letters) = match (from.parse::<i64>(), to.parse::<i64>(), letter(from), letter(to)) {
        (Ok(a), Ok(b), _, _) => {
            let padded = |s: &str| {
                let digits = s.trim_start_matches('-');
                digits.len() > 1 && digits.starts_with('0')
            };
            let width = if padded(from) || padded(to) { from.len().max(to.len()) } else { 0 };
            (a, b, width, false)
        }
        (_, _, Some(a), Some(b)) => (i64::from(u32::from(a)), i64::from(u32::from(b)), 0, true),
        _ => return None,
    };
    // `{-9223372036854775808..9223372036854775807}` has 2^64 words: more than any budget.
    let Some(count) = (a.abs_diff(b) / step).checked_add(1) else { return Some(None) };
    if count > budget as u64 || count.saturating_mul(width as u64) > MAX_EXPANSION_BYTES as u64 {
        return Some(None);
    }
    let mut out = Vec::new();
    let mut v = a;
    for _ in 0..count {
        out.push(if letters {
            u32::try_from(v).ok().and_then(char::from_u32).map(String::from).unwrap_or_default()
        } else {
            format!("{v:0width$}")
        });
        let delta = i64::try_from(step).unwrap_or(i64::MAX);
        v = if a <= b { v.saturating_add(delta) } else { v.saturating_sub(delta) };
    }
    Some(Some(out))
}

/// A word as written after bash's brace expansion (`a{b,c}d` is `abd acd`, `{1..3}` is `1 2 3`;
/// braces in quotes, escaped or in `${…}` are left alone); `None` when it would make more than
/// `budget` words (what is left of the budget is reduced by the words made).
pub(super) fn brace_expand(word: &str, budget: &mut usize) -> Option<Vec<String>> {
    brace_expand_at(word, budget, 0)
}

fn brace_expand_at(word: &str, budget: &mut usize, depth: usize) -> Option<Vec<String>> {
    if !word.contains('{') {
        return Some(vec![word.to_owned()]);
    }
    let chars: Vec<char> = word.chars().collect();
    if !unquoted_brace(&chars) {
        return Some(vec![word.to_owned()]);
    }
    if depth > MAX_DEPTH || word.len() > MAX_BRACED_WORD {
        return None;
    }
    let closes = brace_closes(&chars);
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            i += 2;
            continue;
        }
        if let Some(end) = construct_end(&chars, i, 0) {
            i = end;
            continue;
        }
        if c != '{' {
            i += 1;
            continue;
        }
        let Some((close, comma)) = closes.get(i).copied().flatten() else {
            i += 1;
            continue;
        };
        let amble = &chars[i + 1..close];
        let parts = if comma {
            let mut parts = Vec::new();
            for part in brace_parts(amble) {
                parts.extend(brace_expand_at(&part, budget, depth + 1)?);
            }
            parts
        } else {
            match sequence(&amble.iter().collect::<String>(), *budget) {
                Some(Some(parts)) => parts,
                Some(None) => return None,
                None => {
                    i += 1;
                    continue;
                }
            }
        };
        let pre: String = chars[..i].iter().collect();
        let post = brace_expand_at(&chars[close + 1..].iter().collect::<String>(), budget, depth + 1)?;
        let total = parts.len().saturating_mul(post.len());
        let longest = |v: &[String]| v.iter().map(String::len).max().unwrap_or(0);
        let bytes = total.saturating_mul(pre.len().saturating_add(longest(&parts)).saturating_add(longest(&post)));
        if total > *budget || bytes > MAX_EXPANSION_BYTES {
            return None;
        }
        *budget -= total;
        let mut out = Vec::with_capacity(total);
        for p in &parts {
            for q in &post {
                out.push(format!("{pre}{p}{q}"));
            }
        }
        return Some(out);
    }
    Some(vec![word.to_owned()])
}

/// The text between a construct's opening (`open` characters long) and its closing character,
/// when it was closed.
fn inner(chars: &[char], start: usize, open: usize, end: usize, close: char) -> String {
    let body_end = if end > start + open && chars.get(end - 1) == Some(&close) { end - 1 } else { end };
    chars.get(start + open..body_end).unwrap_or_default().iter().collect()
}

fn push_unknown(out: &mut String, stand_in: char) {
    if !out.ends_with(stand_in) && !out.ends_with(UNKNOWN) {
        out.push(stand_in);
    }
}

/// Reads a `$` expansion at `i` (`$(…)`, `${…}`, `$[…]`, `$name`, `$1`, `$@` …) as `stand_in`;
/// the index after it, or `None` for a `$` that is just a character.
fn dollar(chars: &[char], i: usize, out: &mut String, stand_in: char) -> Option<usize> {
    let next = *chars.get(i + 1)?;
    let end = if matches!(next, '(' | '{' | '[') {
        construct_end(chars, i, 0)?
    } else if next.is_ascii_alphabetic() || next == '_' {
        i + 1 + chars[i + 1..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').count()
    } else if next.is_ascii_digit() || matches!(next, '@' | '*' | '#' | '?' | '-' | '$' | '!') {
        i + 2
    } else {
        return None;
    };
    push_unknown(out, stand_in);
    Some(end)
}

/// The length of a leading `name=`, `name+=` or `name[subscript]=` (an assignment), if any.
fn assignment_prefix(chars: &[char]) -> Option<usize> {
    let name = chars.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').count();
    if name == 0 || chars[0].is_ascii_digit() {
        return None;
    }
    let mut j = name;
    if chars.get(j) == Some(&'[') {
        j += chars[j..].iter().position(|&c| c == ']')? + 1;
    }
    if chars.get(j) == Some(&'+') {
        j += 1;
    }
    (chars.get(j) == Some(&'=')).then_some(j + 1)
}

/// A raw word after quote removal, with what is only known at run time read as a stand-in (see the
/// module docs); the bodies of process substitutions (`<(…)`, `>(…)`) go to `bodies` (the segment splitter already
/// finds those of `$(…)` and backquotes).
pub(super) fn unquote(raw: &str, bodies: &mut Vec<String>) -> String {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    let mut glob = false;
    if let Some(len) = assignment_prefix(&chars) {
        out.extend(&chars[..len]);
        i = len;
    } else if chars.first() == Some(&'~') {
        // `~`, `~+`, `~-`, `~user`: a directory only known when it runs.
        let end = chars.iter().position(|&c| c == '/').unwrap_or(chars.len());
        if chars[1..end].iter().all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '+')) {
            push_unknown(&mut out, UNKNOWN_WORD);
            i = end;
        }
    }
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        match c {
            '\\' => {
                if let Some(n) = next.filter(|&n| n != '\n') {
                    out.push(n);
                }
                i += 2;
            }
            '\'' => {
                let end = quote_end(&chars, i + 1, '\'', false);
                out.push_str(&inner(&chars, i, 1, end, '\''));
                i = end;
            }
            '"' => i = unquote_double(&chars, i + 1, &mut out),
            '$' if matches!(next, Some('\'' | '"')) => {
                push_unknown(&mut out, UNKNOWN_WORD);
                i = construct_end(&chars, i, 0).unwrap_or(chars.len());
            }
            '$' => match dollar(&chars, i, &mut out, UNKNOWN) {
                Some(end) => i = end,
                None => {
                    out.push(c);
                    i += 1;
                }
            },
            '<' | '>' if next == Some('(') => {
                let end = construct_end(&chars, i, 0).unwrap_or(chars.len());
                bodies.push(inner(&chars, i, 2, end, ')'));
                push_unknown(&mut out, UNKNOWN_WORD);
                i = end;
            }
            '`' => {
                push_unknown(&mut out, UNKNOWN);
                i = quote_end(&chars, i + 1, '`', true);
            }
            '*' | '?' => {
                push_unknown(&mut out, UNKNOWN_WORD);
                glob = true;
                i += 1;
            }
            '[' => {
                let mut j = i + 1;
                if matches!(chars.get(j), Some('!' | '^')) {
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    j += 1;
                }
                match chars[j.min(chars.len())..].iter().position(|&c| c == ']') {
                    Some(p) => {
                        push_unknown(&mut out, UNKNOWN_WORD);
                        glob = true;
                        i = j + p + 1;
                    }
                    None => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    if glob {
        out.push(MORE_WORDS);
    }
    out
}

/// Reads the inside of a double-quoted string that starts at `from` into `out`; the index after it.
fn unquote_double(chars: &[char], from: usize, out: &mut String) -> usize {
    let mut j = from;
    while let Some(&c) = chars.get(j) {
        match c {
            '"' => return j + 1,
            '\\' => {
                match chars.get(j + 1) {
                    Some('\n') => {}
                    Some(&n) if matches!(n, '$' | '`' | '"' | '\\') => out.push(n),
                    Some(&n) => {
                        out.push('\\');
                        out.push(n);
                    }
                    None => out.push('\\'),
                }
                j += 2;
            }
            '$' => match dollar(chars, j, out, UNKNOWN_WORD) {
                Some(end) => j = end,
                None => {
                    out.push(c);
                    j += 1;
                }
            },
            '`' => {
                push_unknown(out, UNKNOWN_WORD);
                j = quote_end(chars, j + 1, '`', true);
            }
            _ => {
                out.push(c);
                j += 1;
            }
        }
    }
    chars.len()
}

/// A segment's words as bash reads them (see the module docs), and for each whether it was
/// written plainly (no quote, escape, expansion or brace expansion: only such a word can be a
/// reserved word or a `case` pattern).
pub(super) fn pattern_words(segment: &str, bodies: &mut Vec<String>) -> (Vec<String>, Vec<bool>) {
    let mut words = Vec::new();
    let mut plain = Vec::new();
    let mut budget = MAX_WORDS;
    for raw in raw_words(segment) {
        match brace_expand(&raw, &mut budget) {
            Some(alts) if alts.len() == 1 && alts[0] == raw => {
                plain.push(!raw.contains(['\'', '"', '\\', '$', '`']));
                words.push(unquote(&raw, bodies));
            }
            Some(alts) => {
                // Bash drops the empty words an expansion makes (`{,}rm` is `rm`).
                for alt in alts.iter().filter(|a| !a.is_empty()) {
                    let mut word = unquote(alt, bodies);
                    word.push(BRACED);
                    words.push(word);
                    plain.push(false);
                }
            }
            None => {
                words.push(format!("{UNKNOWN}{BRACED}"));
                plain.push(false);
            }
        }
    }
    (words, plain)
}

/// Readings of an unanalysable command for the word-sequence fallback, in which quotes cannot
/// split a word (`r''m`, `"r"m` and `\rm` read `rm`): with every quote and backslash removed and
/// brace expansions expanded (`{r,}m` reads `rm m`), and the same with each word that holds a brace
/// expansion read as one expansion (`$`, which stands for any word).
pub(super) fn joined_readings(command: &str) -> [String; 2] {
    let bare: String = command.chars().filter(|c| !matches!(c, '\'' | '"' | '\\')).collect();
    let mut expanded = Vec::new();
    let mut opaque = Vec::new();
    let mut budget = MAX_WORDS;
    for word in bare.split_whitespace() {
        match brace_expand(word, &mut budget) {
            Some(alts) if alts.len() == 1 && alts[0] == word => {
                expanded.push(word.to_owned());
                opaque.push(word.to_owned());
            }
            Some(alts) => {
                expanded.extend(alts);
                opaque.push("$".to_owned());
            }
            None => {
                expanded.push("$".to_owned());
                opaque.push("$".to_owned());
            }
        }
    }
    [expanded.join(" "), opaque.join(" ")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_too_long_to_count_is_over_budget() {
        // 2^64 words: the count overflows u64 (it panicked in debug builds).
        assert_eq!(sequence("-9223372036854775808..9223372036854775807", MAX_WORDS), Some(None));
        assert_eq!(sequence("9223372036854775807..-9223372036854775808", MAX_WORDS), Some(None));
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand("{-9223372036854775808..9223372036854775807}", &mut budget), None);
    }

    #[test]
    fn expansions_are_bounded_in_bytes() {
        // 1024 words, each padded to the 2001-digit width of the first endpoint.
        assert_eq!(sequence(&format!("{}1..1024", "0".repeat(2000)), MAX_WORDS), Some(None));
        assert_eq!(sequence("001..003", MAX_WORDS), Some(Some(vec!["001".into(), "002".into(), "003".into()])));
        // Each of 1024 words is 2 KB long.
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand(&format!("{}{{1..1024}}", "x".repeat(2000)), &mut budget), None);
    }

    #[test]
    fn an_over_long_braced_word_is_unknown() {
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand(&format!("{{r,}}m{}", "x".repeat(MAX_BRACED_WORD)), &mut budget), None);
        let (words, _) = pattern_words(&format!("{{r,}}m -rf {}", "{".repeat(100_000)), &mut Vec::new());
        assert_eq!(words.last().map(String::as_str), Some(format!("{UNKNOWN}{BRACED}").as_str()));
        // Without braces it is read as written.
        let long = "x".repeat(MAX_BRACED_WORD + 1);
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand(&long, &mut budget), Some(vec![long.clone()]));
        // Only unquoted braces count: quoted, escaped and `${…}` ones are not expanded by bash, so a
        // long word holding only those is read as written; one with an unquoted brace is unknown.
        let x = "x".repeat(MAX_BRACED_WORD);
        for (word, unknown) in [
            (format!("'{x} ${{y}} {{a,b}}'"), false),
            (format!("\"{x} ${{y}} {{a,b}}\""), false),
            (format!("{x}${{y}}"), false),
            (format!("{x}\\{{a,b\\}}"), false),
            (format!("$'{x} {{a,b}}'"), false),
            (format!("'{x}'{{a,b}}"), true),
            (format!("{{a,b}}'{x}'"), true),
            (format!("{x}{{"), true),
        ] {
            let mut budget = MAX_WORDS;
            let expect = if unknown { None } else { Some(vec![word.clone()]) };
            assert_eq!(brace_expand(&word, &mut budget), expect, "{}", &word[word.len() - 20..]);
        }
    }

    #[test]
    fn braces_are_matched_in_one_pass() {
        let chars: Vec<char> = "{ {a,b}x{c}}{".chars().collect();
        let closes = brace_closes(&chars);
        assert_eq!(closes[0], Some((11, false)));
        assert_eq!(closes[2], Some((6, true)));
        assert_eq!(closes[8], Some((10, false)));
        assert_eq!(closes[12], None);
        // An escaped brace and one in an expansion are not matched.
        let chars: Vec<char> = r"{a\},${x}}".chars().collect();
        assert_eq!(brace_closes(&chars)[0], Some((9, true)));
        // Unclosed braces before a closed one: as bash reads them.
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand(&format!("{}{{a,b}}", "{".repeat(3000)), &mut budget).map(|v| v.len()), Some(2));
    }

    /// Expected values from GNU bash 5.2 (`printf '[%s]' WORD`).
    #[test]
    fn brace_expansion_follows_bash() {
        for (word, expect) in [
            ("{rm,-rf,/tmp/x}", vec!["rm", "-rf", "/tmp/x"]),
            ("{r,}m", vec!["rm", "m"]),
            ("r{m,}", vec!["rm", "r"]),
            ("x{,}y", vec!["xy", "xy"]),
            ("{a,$(echo b,c)}", vec!["a", "$(echo b,c)"]),
            ("{a,`echo b,c`}", vec!["a", "`echo b,c`"]),
            ("{a,\"b,c\"}", vec!["a", "\"b,c\""]),
            ("{a\\,b}", vec!["{a\\,b}"]),
            ("{x{a,b}", vec!["{xa", "{xb"]),
            ("{a,{b,c}", vec!["{a,b", "{a,c"]),
            ("a{b,c}d{e", vec!["abd{e", "acd{e"]),
            ("{01..03}", vec!["01", "02", "03"]),
            ("{a..e..2}", vec!["a", "c", "e"]),
            ("{3..1}", vec!["3", "2", "1"]),
            ("{a..1}", vec!["{a..1}"]),
            ("{!..#}", vec!["{!..#}"]),
            ("{-01..1}", vec!["-01", "000", "001"]),
            ("{a,b}{c,d}", vec!["ac", "ad", "bc", "bd"]),
            ("{${x,,},b}", vec!["${x,,}", "b"]),
            ("${x,b}", vec!["${x,b}"]),
            ("{a,${x:-q,r}}", vec!["a", "${x:-q,r}"]),
            ("\"{a,b}\"{c,d}", vec!["\"{a,b}\"c", "\"{a,b}\"d"]),
            ("{a,b}}", vec!["a}", "b}"]),
            ("{{a,b}", vec!["{a", "{b"]),
            ("x{}y", vec!["x{}y"]),
            ("x{a}y", vec!["x{a}y"]),
            ("{a..c..0}", vec!["a", "b", "c"]),
            ("{r..r}m", vec!["rm"]),
        ] {
            let mut budget = MAX_WORDS;
            assert_eq!(
                brace_expand(word, &mut budget),
                Some(expect.iter().map(|s| (*s).to_owned()).collect()),
                "{word}"
            );
        }
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand("{1..100000}", &mut budget), None);
        let mut budget = MAX_WORDS;
        assert_eq!(brace_expand(&"{a,b}".repeat(11), &mut budget), None);
    }

    #[test]
    fn unknown_text_is_marked() {
        let (u, w, m) = (UNKNOWN, UNKNOWN_WORD, MORE_WORDS);
        for (raw, expect) in [
            ("r''m", "rm".to_owned()),
            ("\"r\"m", "rm".to_owned()),
            ("\\rm", "rm".to_owned()),
            ("$'\\x72m'", format!("{w}")),
            ("r$'m'", format!("r{w}")),
            ("$\"rm\"", format!("{w}")),
            ("$(echo rm)", format!("{u}")),
            ("`echo rm`", format!("{u}")),
            ("${x:-rm}", format!("{u}")),
            ("r${u}m", format!("r{u}m")),
            ("\"$X\"", format!("{w}")),
            ("\"a$X$(b)`c`\"", format!("a{w}")),
            ("$X\"$Y\"", format!("{u}")),
            ("/bin/r?", format!("/bin/r{w}{m}")),
            ("r[m]", format!("r{w}{m}")),
            ("'*'", "*".to_owned()),
            ("[", "[".to_owned()),
            ("~root/rm", format!("{w}/rm")),
            ("'$x'", "$x".to_owned()),
            ("\"\\d\\$\"", "\\d$".to_owned()),
            ("a[0]=x", "a[0]=x".to_owned()),
            ("$", "$".to_owned()),
        ] {
            assert_eq!(unquote(raw, &mut Vec::new()), expect, "{raw}");
        }
        let mut bodies = Vec::new();
        assert_eq!(unquote("<(rm -rf x)", &mut bodies), format!("{w}"));
        assert_eq!(bodies, ["rm -rf x"]);
    }

    #[test]
    fn comments_end_at_the_newline() {
        assert_eq!(strip_comments("ls # it's\nrm x"), "ls \nrm x");
        assert_eq!(strip_comments("echo a#b '#c' \"#d\" ${#x} $# \\#e"), "echo a#b '#c' \"#d\" ${#x} $# \\#e");
        assert_eq!(strip_comments("echo $'\\'' # x\ny"), "echo $'\\'' \ny");
        assert_eq!(strip_comments("echo a >#b"), "echo a >");
    }
}
