//! Shell command lines for `kind: command` argument rules.
//!
//! Flow: argument string --[`parse`]--> simple commands (argv words) -->
//! [`CommandMatcher::evaluate`]: every simple command must pass on its own,
//! the worst outcome wins, so `git status; rm -rf /` cannot ride on an
//! allowed `git status`.
//!
//! The tokenizer follows POSIX sh quoting: `'…'` literal, `"…"` with `\`
//! escapes, `\x` outside quotes, line continuations. It splits commands on
//! `;` `&&` `||` `|` `|&` `&` newlines `(` `)` and bare `{` `}` words.
//! Refused outright (deny, whatever the patterns say): command substitution
//! (`` `…` ``, `$(…)`, `$((…))`, `<(…)`, `>(…)`), output redirection to
//! anything but `/dev/null` (`>`, `>>`, `>|`, `&>`, `<>`, `N>`), here-docs
//! (`<<`), unterminated quotes, more than 3 nested `sh -c`, and a command
//! whose name is a parameter expansion (`$X args`). Input redirection (`<`),
//! here-strings and fd duplication (`2>&1`) are fine. `#` is not a comment
//! (so `ls # ; rm x` is judged as two commands: stricter than sh).
//!
//! Patterns are argv prefixes (`git status` matches `git status -s`, not
//! `git statusx`). A word containing an unquoted or double-quoted `$`
//! expansion is opaque and equals no pattern word.
//! - `allow` matches the command *as written*, including `A=b` env prefixes
//!   (so `GIT_SSH_COMMAND=… git fetch` needs its own allow entry).
//! - `deny` and `check` match the *effective* command too: env prefixes,
//!   wrappers (`env sudo doas nohup nice timeout command builtin exec xargs
//!   stdbuf time !`, shell keywords `if then else elif do while until`) are
//!   peeled off, `/bin/rm` also reads as `rm`, and `find … -exec CMD` and
//!   `sh|bash|zsh|dash -c 'CMD'` bodies are evaluated as commands of their own.

use crate::args::{Outcome, Reasons};
use mcp_warden_crds::policy::ArgumentOutcome;

/// One word of a simple command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub text: String,
    /// Contains a parameter expansion: its runtime value is unknown.
    pub opaque: bool,
    /// Some part was quoted or escaped (so it is not a keyword or assignment).
    pub quoted: bool,
}

impl Word {
    fn is_assignment(&self) -> bool {
        if self.quoted {
            return false;
        }
        match self.text.split_once('=') {
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

const MAX_NESTING: usize = 3;

/// Split a command line into simple commands, or refuse it.
pub(crate) fn parse(line: &str) -> Result<Vec<Vec<Word>>, &'static str> {
    Tokenizer::default().run(line)
}

#[derive(Default)]
struct Tokenizer {
    commands: Vec<Vec<Word>>,
    words: Vec<Word>,
    cur: String,
    in_word: bool,
    opaque: bool,
    quoted: bool,
    /// The previous operator was a redirection whose target is the next word.
    redirect: Option<Redirect>,
}

#[derive(Clone, Copy, PartialEq)]
enum Redirect {
    Input,
    Output,
    Dup,
}

impl Tokenizer {
    fn end_word(&mut self) -> Result<(), &'static str> {
        if !self.in_word {
            return Ok(());
        }
        let w = Word {
            text: std::mem::take(&mut self.cur),
            opaque: self.opaque,
            quoted: self.quoted,
        };
        self.in_word = false;
        self.opaque = false;
        self.quoted = false;
        match self.redirect.take() {
            Some(Redirect::Output) if w.text != "/dev/null" || w.opaque => {
                Err("output_redirection")
            }
            Some(Redirect::Dup)
                if !(w.text == "-" || w.text.bytes().all(|b| b.is_ascii_digit())) =>
            {
                Err("output_redirection")
            }
            Some(_) => Ok(()),
            None if !w.quoted && (w.text == "{" || w.text == "}") => self.end_command(),
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

    fn push(&mut self, c: char) {
        self.in_word = true;
        self.cur.push(c);
    }

    fn run(mut self, line: &str) -> Result<Vec<Vec<Word>>, &'static str> {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match c {
                ' ' | '\t' => self.end_word()?,
                '\n' | ';' | '(' | ')' => self.end_command()?,
                '|' => {
                    self.end_command()?;
                    if matches!(next, Some('|') | Some('&')) {
                        i += 1;
                    }
                }
                '&' => {
                    if next == Some('>') {
                        // `&>file` / `&>>file`: stdout and stderr to a file.
                        self.end_word()?;
                        i += if chars.get(i + 2) == Some(&'>') { 2 } else { 1 };
                        self.redirect = Some(Redirect::Output);
                    } else {
                        self.end_command()?;
                        if next == Some('&') {
                            i += 1;
                        }
                    }
                }
                '<' | '>' => {
                    // A word of digits right before is the fd, not an argument.
                    if self.in_word
                        && !self.quoted
                        && !self.opaque
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
                    let (kind, skip) = match (c, next, chars.get(i + 2).copied()) {
                        ('<', Some('<'), Some('<')) => (Redirect::Input, 2),
                        ('<', Some('<'), _) => return Err("heredoc"),
                        ('<', Some('>'), _) => (Redirect::Output, 1),
                        ('<', Some('&'), _) | ('>', Some('&'), _) => (Redirect::Dup, 1),
                        ('<', _, _) => (Redirect::Input, 0),
                        ('>', Some('>') | Some('|'), _) => (Redirect::Output, 1),
                        _ => (Redirect::Output, 0),
                    };
                    i += skip;
                    self.redirect = Some(kind);
                }
                '`' => return Err("command_substitution"),
                '\\' => match next {
                    Some('\n') => i += 1,
                    Some(n) => {
                        self.quoted = true;
                        self.push(n);
                        i += 1;
                    }
                    None => return Err("unparseable_command"),
                },
                '\'' => {
                    self.quoted = true;
                    self.in_word = true;
                    let end = chars[i + 1..]
                        .iter()
                        .position(|&x| x == '\'')
                        .ok_or("unparseable_command")?;
                    self.cur.extend(&chars[i + 1..i + 1 + end]);
                    i += end + 1;
                }
                '"' => {
                    self.quoted = true;
                    self.in_word = true;
                    i += 1;
                    loop {
                        match chars.get(i) {
                            None => return Err("unparseable_command"),
                            Some('"') => break,
                            Some('`') => return Err("command_substitution"),
                            Some('\\') => match chars.get(i + 1) {
                                Some(&e @ ('"' | '\\' | '$' | '`')) => {
                                    self.cur.push(e);
                                    i += 1;
                                }
                                Some('\n') => i += 1,
                                _ => self.cur.push('\\'),
                            },
                            Some('$') => self.dollar(chars.get(i + 1).copied())?,
                            Some(&x) => self.cur.push(x),
                        }
                        i += 1;
                    }
                }
                '$' => {
                    if next == Some('\'') {
                        // ANSI-C quoting: escapes we do not evaluate, so opaque.
                        self.quoted = true;
                        self.opaque = true;
                        self.in_word = true;
                        let mut j = i + 2;
                        loop {
                            match chars.get(j) {
                                None => return Err("unparseable_command"),
                                Some('\\') => j += 2,
                                Some('\'') => break,
                                Some(&x) => {
                                    self.cur.push(x);
                                    j += 1
                                }
                            }
                        }
                        i = j;
                    } else {
                        self.in_word = true;
                        self.dollar(next)?;
                    }
                }
                // Unquoted glob and brace characters expand at run time.
                '*' | '?' | '[' | '{' => {
                    self.opaque = true;
                    self.push(c);
                }
                _ => self.push(c),
            }
            i += 1;
        }
        self.end_command()?;
        Ok(self.commands)
    }

    /// A `$` inside or outside double quotes.
    fn dollar(&mut self, next: Option<char>) -> Result<(), &'static str> {
        match next {
            Some('(') => Err("command_substitution"),
            Some(n)
                if n.is_ascii_alphanumeric()
                    || matches!(n, '_' | '{' | '?' | '$' | '!' | '#' | '*' | '@' | '-') =>
            {
                self.opaque = true;
                self.cur.push('$');
                Ok(())
            }
            _ => {
                self.cur.push('$');
                Ok(())
            }
        }
    }
}

/// Compiled `command` patterns of one argument rule.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandMatcher {
    allow: Vec<Vec<String>>,
    check: Vec<Vec<String>>,
    deny: Vec<Vec<String>>,
}

/// Parse one pattern into the argv prefix it stands for.
pub(crate) fn compile_pattern(p: &str) -> Result<Vec<String>, String> {
    let mut cmds = parse(p).map_err(|r| format!("not a plain command ({r})"))?;
    if cmds.len() != 1 {
        return Err("must be exactly one command, without ; && || | &".into());
    }
    let words = cmds.pop().unwrap_or_default();
    if words.iter().any(|w| w.opaque) {
        return Err("must not contain $ expansions, globs or braces".into());
    }
    Ok(words.into_iter().map(|w| w.text).collect())
}

impl CommandMatcher {
    pub(crate) fn new(
        allow: Vec<Vec<String>>,
        check: Vec<Vec<String>>,
        deny: Vec<Vec<String>>,
    ) -> Self {
        CommandMatcher { allow, check, deny }
    }

    /// Judge a whole command line.
    pub(crate) fn evaluate(&self, line: &str, otherwise: ArgumentOutcome) -> Outcome {
        self.evaluate_at(line, otherwise, 0)
    }

    fn evaluate_at(&self, line: &str, otherwise: ArgumentOutcome, depth: usize) -> Outcome {
        if depth > MAX_NESTING {
            return Outcome::deny("unparseable_command");
        }
        let commands = match parse(line) {
            Ok(c) => c,
            Err(reason) => return Outcome::deny(reason),
        };
        let mut worst = Outcome::PASS;
        for words in &commands {
            worst = worst.worse(self.one(words, otherwise, depth));
            if worst.action == ArgumentOutcome::Deny {
                break;
            }
        }
        worst
    }

    fn one(&self, words: &[Word], otherwise: ArgumentOutcome, depth: usize) -> Outcome {
        let mut variants: Vec<&[Word]> = vec![words];
        let mut nested: Vec<String> = Vec::new();
        effective(words, &mut variants, &mut nested);
        let hit = |patterns: &[Vec<String>]| {
            variants.iter().any(|v| {
                patterns
                    .iter()
                    .any(|p| prefix(p, v) || basename_prefix(p, v))
            })
        };
        let mut out = if hit(&self.deny) {
            Outcome::deny("command_denied")
        } else if hit(&self.check) {
            Outcome::check("command_needs_approval")
        } else if variants.iter().any(|v| v.first().is_some_and(|w| w.opaque)) {
            Outcome::deny("dynamic_command")
        } else if self.allow.iter().any(|p| prefix(p, words)) {
            Outcome::PASS
        } else {
            Outcome::otherwise(otherwise, Reasons::COMMAND)
        };
        for body in &nested {
            if out.action == ArgumentOutcome::Deny {
                break;
            }
            out = out.worse(self.evaluate_at(body, otherwise, depth + 1));
        }
        out
    }
}

fn prefix(pattern: &[String], argv: &[Word]) -> bool {
    pattern.len() <= argv.len()
        && pattern
            .iter()
            .zip(argv)
            .all(|(p, w)| !w.opaque && *p == w.text)
}

/// `/usr/bin/rm -rf` read as `rm -rf` (for deny and check only).
fn basename_prefix(pattern: &[String], argv: &[Word]) -> bool {
    let Some((first, rest)) = argv.split_first() else {
        return false;
    };
    let Some(base) = first.text.rsplit_once('/').map(|(_, b)| b) else {
        return false;
    };
    !first.opaque
        && pattern.len() <= argv.len()
        && pattern.first().is_some_and(|p| p == base)
        && pattern[1..]
            .iter()
            .zip(rest)
            .all(|(p, w)| !w.opaque && *p == w.text)
}

const WRAPPERS: &[&str] = &[
    "env", "sudo", "doas", "nohup", "nice", "timeout", "command", "builtin", "exec", "xargs",
    "stdbuf", "time", "!", "if", "then", "else", "elif", "do", "while", "until",
];
/// Wrapper options that take a separate value word.
const OPTION_VALUES: &[(&str, &[&str])] = &[
    (
        "sudo",
        &["-u", "-g", "-U", "-C", "-h", "-p", "-r", "-t", "-D", "-R"],
    ),
    ("doas", &["-u", "-C"]),
    (
        "env",
        &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
    ),
    ("nice", &["-n", "--adjustment"]),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    (
        "xargs",
        &[
            "-I",
            "-n",
            "-P",
            "-L",
            "-d",
            "-E",
            "-s",
            "-a",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
        ],
    ),
    ("stdbuf", &["-i", "-o", "-e"]),
];
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash", "busybox"];

/// Collect the effective commands hidden behind prefixes and wrappers.
fn effective<'w>(words: &'w [Word], variants: &mut Vec<&'w [Word]>, nested: &mut Vec<String>) {
    let mut rest = words;
    while let Some(first) = rest.first() {
        let name = first.text.rsplit('/').next().unwrap_or("");
        if first.is_assignment() {
            rest = &rest[1..];
        } else if !first.quoted && WRAPPERS.contains(&name) {
            rest = &rest[1..];
            // Options of the wrapper, and `timeout`'s / `nice -n`'s value.
            while let Some(w) = rest.first() {
                let t = w.text.as_str();
                let numeric = t.chars().next().is_some_and(|c| c.is_ascii_digit());
                if t.starts_with('-') && t != "--" {
                    // Skip the option, and its value when it takes one.
                    let takes_value = OPTION_VALUES
                        .iter()
                        .any(|(cmd, opts)| *cmd == name && opts.contains(&t));
                    rest = &rest[if takes_value { 2 } else { 1 }.min(rest.len())..];
                } else if w.is_assignment() || (numeric && name == "timeout") {
                    rest = &rest[1..];
                } else {
                    break;
                }
            }
            if rest.first().is_some_and(|w| w.text == "--") {
                rest = &rest[1..];
            }
        } else {
            break;
        }
        if !rest.is_empty() {
            variants.push(rest);
        }
    }
    let Some(first) = rest.first() else { return };
    let name = first.text.rsplit('/').next().unwrap_or("");
    if SHELLS.contains(&name) {
        if let Some(pos) = rest.iter().position(|w| {
            w.text == "-c"
                || (w.text.starts_with('-') && w.text.ends_with('c') && !w.text.starts_with("--"))
        }) {
            if let Some(body) = rest.get(pos + 1) {
                nested.push(body.text.clone());
            }
        }
    } else if name == "eval" {
        nested.push(
            rest[1..]
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
    } else if name == "find" {
        for (i, w) in rest.iter().enumerate() {
            if matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
                && i + 1 < rest.len()
            {
                let end = rest[i + 1..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(rest.len(), |e| i + 1 + e);
                variants.push(&rest[i + 1..end]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argvs(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .unwrap()
            .into_iter()
            .map(|c| c.into_iter().map(|w| w.text).collect())
            .collect()
    }

    fn m(allow: &[&str], check: &[&str], deny: &[&str]) -> CommandMatcher {
        let c = |v: &[&str]| v.iter().map(|p| compile_pattern(p).unwrap()).collect();
        CommandMatcher::new(c(allow), c(check), c(deny))
    }

    fn judge(m: &CommandMatcher, line: &str) -> (ArgumentOutcome, &'static str) {
        let o = m.evaluate(line, ArgumentOutcome::Deny);
        (o.action, o.reason)
    }

    #[test]
    fn quotes_and_escapes_make_words() {
        assert_eq!(
            argvs(r#"git commit -m "a b" 'c d' e\ f"#),
            [["git", "commit", "-m", "a b", "c d", "e f"]]
        );
        assert_eq!(argvs("echo \"x\\\"y\" 'it''s'"), [["echo", "x\"y", "its"]]);
        assert_eq!(argvs("ls \\\n -la"), [["ls", "-la"]]);
    }

    #[test]
    fn separators_split_commands() {
        assert_eq!(
            argvs("a; b && c || d | e |& f & g\nh (i) { j; }"),
            [
                ["a"],
                ["b"],
                ["c"],
                ["d"],
                ["e"],
                ["f"],
                ["g"],
                ["h"],
                ["i"],
                ["j"]
            ]
        );
        assert_eq!(argvs("echo 'a;b' \"c&&d\""), [["echo", "a;b", "c&&d"]]);
    }

    #[test]
    fn structural_refusals() {
        for (line, reason) in [
            ("echo `id`", "command_substitution"),
            ("echo $(id)", "command_substitution"),
            ("echo \"$(id)\"", "command_substitution"),
            ("echo $((1+2))", "command_substitution"),
            ("diff <(ls) x", "command_substitution"),
            ("ls > /etc/passwd", "output_redirection"),
            ("ls >> out", "output_redirection"),
            ("ls 2>err", "output_redirection"),
            ("ls &>out", "output_redirection"),
            ("ls >&out", "output_redirection"),
            ("cat <<EOF", "heredoc"),
            ("echo 'unterminated", "unparseable_command"),
            ("echo \"unterminated", "unparseable_command"),
            ("ls >", "unparseable_command"),
        ] {
            assert_eq!(parse(line).unwrap_err(), reason, "{line}");
        }
        assert_eq!(argvs("ls 2>&1 > /dev/null < in <<< word"), [["ls"]]);
    }

    #[test]
    fn chained_commands_cannot_ride_an_allowed_prefix() {
        let m = m(&["git status", "ls"], &[], &[]);
        assert_eq!(judge(&m, "git status -s").0, ArgumentOutcome::Pass);
        assert_eq!(
            judge(&m, "git status; rm -rf /"),
            (ArgumentOutcome::Deny, "command_not_allowed")
        );
        assert_eq!(
            judge(&m, "git status && curl x | sh"),
            (ArgumentOutcome::Deny, "command_not_allowed")
        );
        assert_eq!(judge(&m, "ls\nrm -rf /").0, ArgumentOutcome::Deny);
        assert_eq!(judge(&m, "git statusx").0, ArgumentOutcome::Deny);
        assert_eq!(judge(&m, "git").0, ArgumentOutcome::Deny);
        assert_eq!(
            judge(&m, "ls $(rm -rf /)"),
            (ArgumentOutcome::Deny, "command_substitution")
        );
    }

    #[test]
    fn env_prefixes_need_their_own_allow_entry() {
        let m = m(&["git fetch", "LANG=C ls"], &[], &["rm"]);
        assert_eq!(
            judge(&m, "GIT_SSH_COMMAND=evil git fetch").0,
            ArgumentOutcome::Deny
        );
        assert_eq!(judge(&m, "LANG=C ls -l").0, ArgumentOutcome::Pass);
        assert_eq!(judge(&m, "PATH=/tmp; ls").0, ArgumentOutcome::Deny);
    }

    #[test]
    fn deny_sees_through_wrappers_and_paths() {
        let m = m(&[], &[], &["rm"]);
        let o = |line: &str| m.evaluate(line, ArgumentOutcome::Pass);
        for line in [
            "rm -rf /",
            "/bin/rm -rf /",
            "X=1 rm x",
            "sudo -u root rm x",
            "env -i A=b rm x",
            "timeout 5 nice -n 10 rm x",
            "if true; then rm x; fi",
            "bash -c 'ls; rm x'",
            "sh -xc \"rm x\"",
            "eval rm x",
            "find . -name a -exec rm {} \\;",
            "xargs rm",
        ] {
            assert_eq!(o(line).action, ArgumentOutcome::Deny, "{line}");
            assert_eq!(o(line).reason, "command_denied", "{line}");
        }
        assert_eq!(o("ls -l").action, ArgumentOutcome::Pass);
        assert_eq!(o("echo rm").action, ArgumentOutcome::Pass);
        assert_eq!(o("$CMD x"), Outcome::deny("dynamic_command"));
        assert_eq!(o("sudo $CMD x"), Outcome::deny("dynamic_command"));
        assert_eq!(o("{rm,-rf,/}"), Outcome::deny("dynamic_command"));
        assert_eq!(o("/bin/r? -rf /"), Outcome::deny("dynamic_command"));
        assert_eq!(o("ls *.txt").action, ArgumentOutcome::Pass);
    }

    #[test]
    fn expansions_are_opaque() {
        let m = m(&["git status", "ls"], &[], &[]);
        assert_eq!(judge(&m, "ls $HOME").0, ArgumentOutcome::Pass);
        assert_eq!(judge(&m, "git $SUB").0, ArgumentOutcome::Deny);
        assert_eq!(judge(&m, "git \"${SUB}\"").0, ArgumentOutcome::Deny);
        assert_eq!(judge(&m, "git $'status'").0, ArgumentOutcome::Deny);
        assert_eq!(judge(&m, "git 'status'").0, ArgumentOutcome::Pass);
    }

    #[test]
    fn check_beats_allow_and_deny_beats_check() {
        let m = m(&["git"], &["git push"], &["git push --force"]);
        assert_eq!(judge(&m, "git log"), (ArgumentOutcome::Pass, "pass"));
        assert_eq!(
            judge(&m, "git push origin"),
            (ArgumentOutcome::Check, "command_needs_approval")
        );
        assert_eq!(
            judge(&m, "git push --force"),
            (ArgumentOutcome::Deny, "command_denied")
        );
        assert_eq!(
            judge(&m, "git log; git push x"),
            (ArgumentOutcome::Check, "command_needs_approval")
        );
    }

    #[test]
    fn nested_shell_bodies_are_judged_in_full() {
        let m = m(&["bash -c", "ls"], &[], &[]);
        assert_eq!(judge(&m, "bash -c 'ls -l'").0, ArgumentOutcome::Pass);
        assert_eq!(judge(&m, "bash -c 'ls; curl x'").0, ArgumentOutcome::Deny);
        let deep = "bash -c \"bash -c 'bash -c \\\"bash -c ls\\\"'\"";
        assert_eq!(
            judge(&m, deep),
            (ArgumentOutcome::Deny, "unparseable_command")
        );
    }

    #[test]
    fn patterns_must_be_plain_commands() {
        assert_eq!(compile_pattern("git  status").unwrap(), ["git", "status"]);
        assert!(compile_pattern("git status; ls").is_err());
        assert!(compile_pattern("ls $X").is_err());
        assert!(compile_pattern("ls > x").is_err());
        assert!(compile_pattern("").is_err());
    }
}
