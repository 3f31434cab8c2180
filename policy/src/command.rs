//! `kind: command` argument rules: shell command lines judged against
//! `allow`, `check` and `deny` patterns.
//!
//! Flow: argument string --[`crate::shell::parse`]--> simple commands -->
//! [`CommandMatcher::evaluate`]: every simple command must pass on its own,
//! the outcomes join (args.rs: the strictest wins, with every reason), so `git status; rm -rf /` cannot ride on an
//! allowed `git status`. Structural refusals (command substitution, output
//! redirection, …) are listed in [`crate::shell`].
//!
//! **Allow patterns are exact.** `git status` allows exactly `git status`;
//! a last word `*` allows any further arguments: `git log *` allows
//! `git log -n 5 src`. So an author who writes `git diff` does not hand out
//! `git diff --output=FILE`, and `pytest` does not hand out `pytest -p
//! PLUGIN`. Allow patterns match the command *as written*, including `A=b`
//! env prefixes (so `GIT_SSH_COMMAND=… git fetch` needs its own entry), and
//! every word a pattern names must be a literal: an opaque word (see
//! [`crate::shell`]) where a pattern needs a literal is not allowed; under
//! the `*` any word goes.
//!
//! **Deny and check patterns** are a command prefix — the name and the
//! words up to the first option, in order, with options allowed between
//! them (`docker --debug run` reads as `docker run`) — plus the options
//! (and any words after the first option), which may appear *anywhere*
//! after the prefix: `git push --force` matches `git push origin --force`
//! and `git push -v --force=x`; `git diff --output` matches every
//! `git diff` that writes a file, whatever the allow pattern. A pattern
//! made only of options (`--output`) applies to every command. Options match the way
//! programs read them: `--output` also matches `--output=F` and the
//! abbreviations `--outp`, `--out`; `-p` matches `-p`, `-pX` and clusters
//! `-vp`; `-rf` matches `-rf`, `-fr`, `-rfv` (list `-r` to catch `-r -f`
//! too). A trailing `*` in a deny or check pattern changes nothing. They
//! match the *effective* command too: env prefixes and wrappers (`env sudo
//! doas nohup nice timeout command builtin exec xargs stdbuf time !`, shell
//! keywords `if then else elif do while until`) are peeled off, `/bin/rm`
//! also reads as `rm`, and `find … -exec CMD`, `sh|bash|…  -c 'CMD'` and
//! `eval` bodies are judged as commands of their own.
//!
//! **Opaque words** count against the caller: an opaque word matches a
//! deny or check pattern word whenever some run-time value of it could
//! (`git push ${IFS}--force` is denied by `git push --force`, so is
//! `git $X`), and a command whose name is opaque (`$CMD x`) is denied
//! (`dynamic_command`).
//!
//! Precedence per simple command: deny, check, dynamic name, allow, else
//! the rule's `otherwise`.

use crate::args::{Outcome, Reasons};
use crate::shell::{parse, Spread, Word};
use mcp_warden_crds::policy::ArgumentOutcome;

const MAX_NESTING: usize = 3;

/// An allow pattern: exact words, then maybe anything.
#[derive(Debug, Clone)]
pub(crate) struct AllowPattern {
    words: Vec<String>,
    /// Ends in `*`: any further arguments.
    rest: bool,
}

/// A deny or check pattern.
#[derive(Debug, Clone)]
pub(crate) struct RulePattern {
    /// The command name; `None` for an options-only pattern (every command).
    name: Option<String>,
    /// Words right after the name, up to the first option, in place.
    prefix: Vec<String>,
    /// Options and words from the first option on, anywhere after the name.
    anywhere: Vec<Anywhere>,
}

#[derive(Debug, Clone)]
enum Anywhere {
    /// `--name` (without the dashes).
    Long(String),
    /// `-abc` (without the dash).
    Short(String),
    /// A plain word.
    Word(String),
}

/// Compiled `command` patterns of one argument rule.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandMatcher {
    allow: Vec<AllowPattern>,
    check: Vec<RulePattern>,
    deny: Vec<RulePattern>,
}

/// The words of one pattern, and whether it ends in an unquoted `*`.
fn pattern_words(p: &str) -> Result<(Vec<String>, bool), String> {
    let mut cmds = parse(p).map_err(|r| format!("not a plain command ({r})"))?;
    if cmds.len() != 1 {
        return Err("must be exactly one command, without ; && || | &".into());
    }
    let mut words = cmds.pop().unwrap_or_default();
    let rest = words
        .last()
        .is_some_and(|w| !w.quoted && w.text == "*" && w.opaque.is_some());
    if rest {
        words.pop();
    }
    if words.is_empty() {
        return Err("must name a command".into());
    }
    if words.iter().any(|w| w.opaque.is_some()) {
        return Err(
            "must not contain $ expansions, globs, braces or ~ (a `*` may only be the last word: any further arguments)"
                .into(),
        );
    }
    Ok((words.into_iter().map(|w| w.text).collect(), rest))
}

/// Parse an allow pattern.
pub(crate) fn compile_allow(p: &str) -> Result<AllowPattern, String> {
    let (words, rest) = pattern_words(p)?;
    Ok(AllowPattern { words, rest })
}

fn is_option(w: &str) -> bool {
    w.len() > 1 && w.starts_with('-') && w != "--"
}

/// Parse a deny or check pattern.
pub(crate) fn compile_rule(p: &str) -> Result<RulePattern, String> {
    let (words, _) = pattern_words(p)?;
    let mut it = words.into_iter().peekable();
    let name = match it.peek() {
        Some(w) if is_option(w) => None,
        _ => it.next(),
    };
    let mut prefix = Vec::new();
    while let Some(w) = it.next_if(|w| !is_option(w)) {
        prefix.push(w);
    }
    let mut anywhere = Vec::new();
    for w in it {
        if let Some(long) = w.strip_prefix("--").filter(|_| is_option(&w)) {
            if long.contains('=') {
                return Err(format!(
                    "write the option without a value: `--{}` matches every value",
                    long.split('=').next().unwrap_or("")
                ));
            }
            anywhere.push(Anywhere::Long(long.to_string()));
        } else if is_option(&w) {
            anywhere.push(Anywhere::Short(w[1..].to_string()));
        } else {
            anywhere.push(Anywhere::Word(w));
        }
    }
    Ok(RulePattern {
        name,
        prefix,
        anywhere,
    })
}

impl AllowPattern {
    fn matches(&self, argv: &[Word]) -> bool {
        let n = self.words.len();
        (argv.len() == n || (self.rest && argv.len() > n))
            && self
                .words
                .iter()
                .zip(argv)
                .all(|(p, w)| w.opaque.is_none() && *p == w.text)
    }
}

/// Whether some run-time value of `w` could be the literal word `target`.
fn could_be(w: &Word, target: &str) -> bool {
    match w.opaque {
        None => w.text == target,
        Some(o) if o.spread == Spread::Any => true,
        Some(_) => target.starts_with(w.prefix()),
    }
}

impl Anywhere {
    /// Whether `w` is (or some run-time value of it could be) this option or word.
    fn matched_by(&self, w: &Word) -> bool {
        if w.opaque.is_some_and(|o| o.spread == Spread::Any) {
            return true;
        }
        let known = w.prefix();
        let opaque = w.opaque.is_some();
        match self {
            Anywhere::Word(t) => could_be(w, t),
            Anywhere::Long(name) => match known.strip_prefix("--") {
                Some(given) => {
                    // `--given[=…]` is the option or an abbreviation of it;
                    // an unknown tail before any `=` may add letters.
                    let (given, open) = match given.split_once('=') {
                        Some((g, _)) => (g, false),
                        None => (given, opaque),
                    };
                    (open || !given.is_empty()) && name.starts_with(given)
                }
                None => opaque && (known.is_empty() || known == "-"),
            },
            Anywhere::Short(letters) => {
                if known.starts_with("--") {
                    return false;
                }
                let Some(body) = known.strip_prefix('-') else {
                    return opaque && known.is_empty();
                };
                let cluster = body.bytes().all(|b| b.is_ascii_alphanumeric());
                if opaque {
                    return cluster;
                }
                !body.is_empty()
                    && (body.starts_with(letters.as_str())
                        || (cluster && letters.chars().all(|c| body.contains(c))))
            }
        }
    }
}

impl RulePattern {
    /// Whether the command `argv` (one reading of it) could match.
    fn matches(&self, argv: &[Word]) -> bool {
        let Some((first, rest)) = argv.split_first() else {
            return false;
        };
        if let Some(name) = &self.name {
            if first.opaque.is_some() {
                return false; // judged as `dynamic_command`
            }
            let base = first.text.rsplit('/').next().unwrap_or("");
            if first.text != *name && base != name {
                return false;
            }
        }
        let mut ends = Vec::new();
        prefix_ends(&self.prefix, rest, 0, &mut ends);
        ends.iter().any(|&e| {
            self.anywhere
                .iter()
                .all(|a| rest[e..].iter().any(|w| a.matched_by(w)))
        })
    }
}

/// Where the rest of `argv` can begin once its words from `i` on are read
/// as `pattern`, word for word: an opaque word stands for as many words as
/// it may become (and the rest may begin at it, since it may go on), and
/// literal options may come between the pattern's words (`docker --debug
/// run` is read as `docker run`). Pushes each possible start to `out`.
fn prefix_ends(pattern: &[String], argv: &[Word], i: usize, out: &mut Vec<usize>) {
    let Some((p, more)) = pattern.split_first() else {
        out.push(i);
        return;
    };
    let Some(w) = argv.get(i) else { return };
    match w.opaque.map(|o| o.spread) {
        None => {
            if w.text == *p {
                prefix_ends(more, argv, i + 1, out);
            } else if is_option(&w.text) {
                prefix_ends(pattern, argv, i + 1, out);
            }
        }
        Some(Spread::One) => {
            if could_be(w, p) {
                prefix_ends(more, argv, i + 1, out);
            }
        }
        // Its first word starts with the prefix; the others can be anything.
        Some(Spread::Any) => {
            if p.starts_with(w.prefix()) {
                out.push(i);
            }
        }
        // One or more words, each starting with the prefix.
        Some(Spread::Prefixed) => {
            if could_be(w, p) {
                prefix_ends(more, argv, i + 1, out);
                prefix_ends(more, argv, i, out);
            }
        }
    }
}

impl CommandMatcher {
    /// Compile the three lists; problems go to `errors` as `(field, index, message)`.
    pub(crate) fn compile(
        allow: &[String],
        check: &[String],
        deny: &[String],
        errors: &mut Vec<(&'static str, usize, String)>,
    ) -> Self {
        let mut m = CommandMatcher::default();
        for (j, p) in allow.iter().enumerate() {
            match compile_allow(p) {
                Ok(a) => m.allow.push(a),
                Err(e) => errors.push(("allow", j, e)),
            }
        }
        for (field, list, out) in [("check", check, &mut m.check), ("deny", deny, &mut m.deny)] {
            for (j, p) in list.iter().enumerate() {
                match compile_rule(p) {
                    Ok(r) => out.push(r),
                    Err(e) => errors.push((field, j, e)),
                }
            }
        }
        m
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
        commands.iter().fold(Outcome::PASS, |acc, words| {
            acc.join(self.one(words, otherwise, depth))
        })
    }

    fn one(&self, words: &[Word], otherwise: ArgumentOutcome, depth: usize) -> Outcome {
        let mut variants: Vec<&[Word]> = vec![words];
        let mut nested: Vec<String> = Vec::new();
        effective(words, &mut variants, &mut nested);
        let hit = |patterns: &[RulePattern]| {
            variants
                .iter()
                .any(|v| patterns.iter().any(|p| p.matches(v)))
        };
        let mut out = if hit(&self.deny) {
            Outcome::deny("command_denied")
        } else if hit(&self.check) {
            Outcome::check("command_needs_approval")
        } else if variants
            .iter()
            .any(|v| v.first().is_some_and(|w| w.opaque.is_some()))
        {
            Outcome::deny("dynamic_command")
        } else if self.allow.iter().any(|p| p.matches(words)) {
            Outcome::PASS
        } else {
            Outcome::otherwise(otherwise, Reasons::COMMAND)
        };
        for body in &nested {
            out = out.join(self.evaluate_at(body, otherwise, depth + 1));
        }
        out
    }
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
    ("exec", &["-a"]),
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
        } else if !first.quoted && first.opaque.is_none() && WRAPPERS.contains(&name) {
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
#[path = "command_tests.rs"]
mod tests;
