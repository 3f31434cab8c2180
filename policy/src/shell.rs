//! Shell words for `kind: command` argument rules: a POSIX-sh tokenizer that
//! knows which parts of a word it cannot resolve.
//!
//! Flow: argument string --[`parse`]--> simple commands, each a list of
//! [`Word`]s --> [`crate::command`], which matches them against patterns.
//!
//! Quoting follows POSIX sh: `'…'` literal, `"…"` with `\` escapes, `\x`
//! outside quotes, line continuations, and bash's ANSI-C `$'…'`, which is
//! decoded (`$'\x2d\x2dforce'` *is* `--force`). Commands are split on `;`
//! `&&` `||` `|` `|&` `&` newlines `(` `)` and bare `{` `}` words.
//!
//! Refused outright (the caller turns these into deny): command
//! substitution and arithmetic (`` `…` ``, `$(…)`, `$((…))`, `$[…]`,
//! `<(…)`, `>(…)`), output redirection to anything but `/dev/null` (`>`,
//! `>>`, `>|`, `&>`, `<>`, `N>`), here-docs (`<<`), unterminated quotes or
//! `${`. Input redirection (`<`), here-strings and fd duplication (`2>&1`)
//! are fine. `#` is not a comment (stricter than sh: `ls # ; rm x` is two
//! commands).
//!
//! What the shell decides only at run time makes a word **opaque**: its
//! [`Opaque::prefix`] is the literal text before the first unknown part
//! (every word it becomes starts with it) and its [`Spread`] says how many
//! words it may become: a quoted expansion (`"$X"`, `"${X:-a b}"`) or `~`
//! is one word; an unquoted glob (`*`, `?`, `[…]`) or brace expansion
//! (`{a,b}`) is one or more words, each starting with the prefix; an
//! unquoted parameter expansion (`$X`, `${IFS}`, `$@`, and `"$@"`) is any
//! number of words of any content, because field splitting cuts its value
//! wherever it likes. `$"…"` (a translated string) is one opaque word.

/// How many words an opaque word may become at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Spread {
    /// Exactly one word, starting with the prefix.
    One,
    /// One or more words, each starting with the prefix (globs, braces).
    Prefixed,
    /// Any number of words of any content (unquoted parameter expansion).
    Any,
}

/// What is unknown about an opaque word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Opaque {
    /// Byte length of the literal text before the first unknown part.
    prefix_len: usize,
    /// How many words it may become.
    pub spread: Spread,
}

/// One word of a simple command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    /// The word as the shell sees it after quote removal; opaque parts are
    /// kept as written (`$X`, `*`).
    pub text: String,
    /// Some part was quoted or escaped (so it is not a keyword or assignment).
    pub quoted: bool,
    /// `None`: the word is exactly `text`.
    pub opaque: Option<Opaque>,
}

impl Word {
    /// The literal text every run-time value of this word starts with.
    pub fn prefix(&self) -> &str {
        match self.opaque {
            Some(o) => &self.text[..o.prefix_len],
            None => &self.text,
        }
    }

    /// `NAME=value` with a literal, unquoted `NAME=`.
    pub fn is_assignment(&self) -> bool {
        if self.quoted {
            return false;
        }
        match self.prefix().split_once('=') {
            Some((name, _)) => {
                let mut b = name.bytes();
                b.next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                    && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
            }
            None => false,
        }
    }
}

/// Split a command line into simple commands, or refuse it.
pub(crate) fn parse(line: &str) -> Result<Vec<Vec<Word>>, &'static str> {
    let mut t = Tokenizer {
        chars: line.chars().collect(),
        ..Tokenizer::default()
    };
    t.run()?;
    Ok(t.commands)
}

#[derive(Default)]
struct Tokenizer {
    chars: Vec<char>,
    i: usize,
    commands: Vec<Vec<Word>>,
    words: Vec<Word>,
    cur: String,
    in_word: bool,
    quoted: bool,
    opaque: Option<Opaque>,
    /// The previous operator was a redirection whose target is the next word.
    redirect: Option<Redirect>,
}

#[derive(Clone, Copy, PartialEq)]
enum Redirect {
    Input,
    Output,
    Dup,
}

/// Characters that end an unquoted word.
fn is_break(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>'
    )
}

impl Tokenizer {
    fn at(&self, k: usize) -> Option<char> {
        self.chars.get(k).copied()
    }

    /// Mark the word unknown from here on.
    fn unresolved(&mut self, spread: Spread) {
        self.in_word = true;
        match &mut self.opaque {
            Some(o) => o.spread = o.spread.max(spread),
            None => {
                self.opaque = Some(Opaque {
                    prefix_len: self.cur.len(),
                    spread,
                })
            }
        }
    }

    fn push(&mut self, c: char) {
        self.in_word = true;
        self.cur.push(c);
    }

    fn end_word(&mut self) -> Result<(), &'static str> {
        if !self.in_word {
            return Ok(());
        }
        let w = Word {
            text: std::mem::take(&mut self.cur),
            quoted: self.quoted,
            opaque: self.opaque.take(),
        };
        self.in_word = false;
        self.quoted = false;
        match self.redirect.take() {
            Some(Redirect::Output) if w.text != "/dev/null" || w.opaque.is_some() => {
                Err("output_redirection")
            }
            Some(Redirect::Dup)
                if w.opaque.is_some()
                    || !(w.text == "-" || w.text.bytes().all(|b| b.is_ascii_digit())) =>
            {
                Err("output_redirection")
            }
            Some(_) => Ok(()),
            None if !w.quoted && w.opaque.is_none() && (w.text == "{" || w.text == "}") => {
                self.end_command()
            }
            None => {
                self.words.push(w);
                Ok(())
            }
        }
    }

    fn end_command(&mut self) -> Result<(), &'static str> {
        self.end_word()?;
        if self.redirect.is_some() {
            return Err("unparseable_command");
        }
        if !self.words.is_empty() {
            self.commands.push(std::mem::take(&mut self.words));
        }
        Ok(())
    }

    fn run(&mut self) -> Result<(), &'static str> {
        while let Some(c) = self.at(self.i) {
            let next = self.at(self.i + 1);
            match c {
                ' ' | '\t' => self.end_word()?,
                '\n' | ';' | '(' | ')' => self.end_command()?,
                '|' => {
                    self.end_command()?;
                    if matches!(next, Some('|') | Some('&')) {
                        self.i += 1;
                    }
                }
                '&' if next == Some('>') => {
                    // `&>file` / `&>>file`: stdout and stderr to a file.
                    self.end_word()?;
                    self.i += if self.at(self.i + 2) == Some('>') {
                        2
                    } else {
                        1
                    };
                    self.redirect = Some(Redirect::Output);
                }
                '&' => {
                    self.end_command()?;
                    if next == Some('&') {
                        self.i += 1;
                    }
                }
                '<' | '>' => self.redirection(c, next)?,
                '`' => return Err("command_substitution"),
                '\\' => match next {
                    Some('\n') => self.i += 1,
                    Some(n) => {
                        self.quoted = true;
                        self.push(n);
                        self.i += 1;
                    }
                    None => return Err("unparseable_command"),
                },
                '\'' => {
                    self.quoted = true;
                    self.in_word = true;
                    let start = self.i + 1;
                    let end = self.chars[start..]
                        .iter()
                        .position(|&x| x == '\'')
                        .ok_or("unparseable_command")?;
                    self.cur.extend(&self.chars[start..start + end]);
                    self.i = start + end;
                }
                '"' => {
                    self.i += 1;
                    self.double_quoted()?;
                }
                '$' if next == Some('\'') => {
                    self.i += 2;
                    self.ansi_c()?;
                }
                '$' if next == Some('"') => {
                    // A translated string: the catalog may say anything.
                    self.unresolved(Spread::One);
                    self.i += 2;
                    self.double_quoted()?;
                }
                '$' => self.dollar(false)?,
                '*' | '?' => {
                    self.unresolved(Spread::Prefixed);
                    self.push(c);
                }
                '[' if self.closes(']', false) => {
                    self.unresolved(Spread::Prefixed);
                    self.push(c);
                }
                '{' if self.closes('}', true) => {
                    self.unresolved(Spread::Prefixed);
                    self.push(c);
                }
                '~' if !self.in_word => {
                    // `~`, `~/x`, `~user`: a home directory.
                    self.unresolved(Spread::One);
                    self.push(c);
                }
                _ => self.push(c),
            }
            self.i += 1;
        }
        self.end_command()
    }

    /// `<`, `>` and friends at `self.i`.
    fn redirection(&mut self, c: char, next: Option<char>) -> Result<(), &'static str> {
        // A word of digits right before is the fd, not an argument.
        if self.in_word
            && !self.quoted
            && self.opaque.is_none()
            && self.cur.bytes().all(|b| b.is_ascii_digit())
        {
            self.cur.clear();
            self.in_word = false;
        } else {
            self.end_word()?;
        }
        if self.redirect.is_some() {
            return Err("unparseable_command");
        }
        if next == Some('(') {
            return Err("command_substitution");
        }
        let (kind, skip) = match (c, next, self.at(self.i + 2)) {
            ('<', Some('<'), Some('<')) => (Redirect::Input, 2),
            ('<', Some('<'), _) => return Err("heredoc"),
            ('<', Some('>'), _) => (Redirect::Output, 1),
            ('<', Some('&'), _) | ('>', Some('&'), _) => (Redirect::Dup, 1),
            ('<', _, _) => (Redirect::Input, 0),
            ('>', Some('>') | Some('|'), _) => (Redirect::Output, 1),
            _ => (Redirect::Output, 0),
        };
        self.i += skip;
        self.redirect = Some(kind);
        Ok(())
    }

    /// Whether the unquoted `[` or `{` at `self.i` starts a glob bracket or
    /// a brace expansion: a closing `close` later in the same word (for
    /// braces, with a `,` or `..` inside). Otherwise it is a literal.
    fn closes(&self, close: char, brace: bool) -> bool {
        let mut depth = 0usize;
        let mut listy = false;
        let mut k = self.i + 1;
        while let Some(c) = self.at(k) {
            if is_break(c) {
                return false;
            }
            match c {
                '\\' => k += 1,
                '{' if brace => depth += 1,
                ',' if depth == 0 => listy = true,
                '.' if depth == 0 && self.at(k + 1) == Some('.') => listy = true,
                c if c == close && depth > 0 => depth -= 1,
                c if c == close => return !brace || listy,
                _ => {}
            }
            k += 1;
        }
        false
    }

    /// The body of `"…"`, with `self.i` just after the opening quote; ends
    /// on the closing quote.
    fn double_quoted(&mut self) -> Result<(), &'static str> {
        self.quoted = true;
        self.in_word = true;
        loop {
            match self.at(self.i) {
                None => return Err("unparseable_command"),
                Some('"') => return Ok(()),
                Some('`') => return Err("command_substitution"),
                Some('\\') => match self.at(self.i + 1) {
                    Some(e @ ('"' | '\\' | '$' | '`')) => {
                        self.cur.push(e);
                        self.i += 1;
                    }
                    Some('\n') => self.i += 1,
                    _ => self.cur.push('\\'),
                },
                Some('$') => {
                    self.dollar(true)?;
                }
                Some(x) => self.cur.push(x),
            }
            self.i += 1;
        }
    }

    /// A `$` at `self.i`, inside double quotes or not; leaves `self.i` on
    /// the last character it consumed.
    fn dollar(&mut self, in_quotes: bool) -> Result<(), &'static str> {
        let spread = |all: bool| {
            if in_quotes && !all {
                Spread::One
            } else {
                Spread::Any
            }
        };
        match self.at(self.i + 1) {
            Some('(') | Some('[') => Err("command_substitution"),
            Some('{') => {
                // `${…}` up to its matching brace, as one unknown part.
                let start = self.i;
                let mut depth = 0usize;
                let mut k = self.i + 1;
                loop {
                    match self.at(k) {
                        None => return Err("unparseable_command"),
                        Some('`') => return Err("command_substitution"),
                        Some('$') if self.at(k + 1) == Some('(') => {
                            return Err("command_substitution")
                        }
                        Some('\\') => k += 1,
                        Some('{') => depth += 1,
                        Some('}') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                let body: String = self.chars[start..=k].iter().collect();
                self.unresolved(spread(body.contains("[@]") || body.contains("[*]")));
                self.cur.push_str(&body);
                self.i = k;
                Ok(())
            }
            Some(n) if n.is_ascii_alphabetic() || n == '_' => {
                let mut k = self.i + 1;
                while self
                    .at(k + 1)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    k += 1;
                }
                let name: String = self.chars[self.i..=k].iter().collect();
                self.unresolved(spread(false));
                self.cur.push_str(&name);
                self.i = k;
                Ok(())
            }
            Some(n)
                if n.is_ascii_digit() || matches!(n, '?' | '$' | '!' | '#' | '*' | '@' | '-') =>
            {
                self.unresolved(spread(matches!(n, '@' | '*')));
                self.cur.push('$');
                self.cur.push(n);
                self.i += 1;
                Ok(())
            }
            _ => {
                self.push('$');
                Ok(())
            }
        }
    }

    /// The body of `$'…'` with `self.i` just after the opening quote,
    /// decoded as bash does; ends on the closing quote.
    fn ansi_c(&mut self) -> Result<(), &'static str> {
        self.quoted = true;
        self.in_word = true;
        loop {
            let c = self.at(self.i).ok_or("unparseable_command")?;
            match c {
                '\'' => return Ok(()),
                '\\' => {
                    self.i += 1;
                    let e = self.at(self.i).ok_or("unparseable_command")?;
                    let simple = match e {
                        'a' => Some('\u{7}'),
                        'b' => Some('\u{8}'),
                        'e' | 'E' => Some('\u{1b}'),
                        'f' => Some('\u{c}'),
                        'n' => Some('\n'),
                        'r' => Some('\r'),
                        't' => Some('\t'),
                        'v' => Some('\u{b}'),
                        '\\' | '\'' | '"' | '?' => Some(e),
                        _ => None,
                    };
                    if let Some(s) = simple {
                        self.cur.push(s);
                    } else if let Some(v) = self.numeric_escape(e) {
                        // bash stops the string at a NUL.
                        if v == 0 {
                            self.skip_to_quote()?;
                            return Ok(());
                        }
                        self.cur.push(char::from_u32(v).unwrap_or('\u{FFFD}'));
                    } else {
                        self.cur.push('\\');
                        self.cur.push(e);
                    }
                }
                _ => self.cur.push(c),
            }
            self.i += 1;
        }
    }

    /// `\NNN`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`, `\cX` with `self.i` on the
    /// letter (or first digit); leaves it on the last character used.
    fn numeric_escape(&mut self, e: char) -> Option<u32> {
        let (radix, max, skip) = match e {
            '0'..='7' => (8, 3, 0),
            'x' => (16, 2, 1),
            'u' => (16, 4, 1),
            'U' => (16, 8, 1),
            'c' => {
                let x = self.at(self.i + 1)?;
                self.i += 1;
                return Some(u32::from(x) & 0x1f);
            }
            _ => return None,
        };
        let start = self.i + skip;
        let mut k = start;
        let mut v: u32 = 0;
        while k < start + max {
            match self.at(k).and_then(|c| c.to_digit(radix)) {
                Some(d) => v = v.saturating_mul(radix).saturating_add(d),
                None => break,
            }
            k += 1;
        }
        if k == start {
            return None;
        }
        self.i = k - 1;
        Some(v)
    }

    fn skip_to_quote(&mut self) -> Result<(), &'static str> {
        while let Some(c) = self.at(self.i) {
            match c {
                '\'' => return Ok(()),
                '\\' => self.i += 2,
                _ => self.i += 1,
            }
        }
        Err("unparseable_command")
    }
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
