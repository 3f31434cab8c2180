//! Tests of the shell-line parser: what splits a line into commands and
//! what an argument rule sees of each.

use super::*;

fn argvs(line: &str) -> Vec<Vec<String>> {
    parse(line)
        .unwrap()
        .into_iter()
        .map(|c| c.into_iter().map(|w| w.text).collect())
        .collect()
}

fn words(line: &str) -> Vec<Word> {
    let mut c = parse(line).unwrap();
    assert_eq!(c.len(), 1, "{line}");
    c.pop().unwrap()
}

#[test]
fn quotes_and_escapes_make_words() {
    assert_eq!(
        argvs(r#"git commit -m "a b" 'c d' e\ f"#),
        [["git", "commit", "-m", "a b", "c d", "e f"]]
    );
    assert_eq!(argvs("echo \"x\\\"y\" 'it''s'"), [["echo", "x\"y", "its"]]);
    assert_eq!(argvs("ls \\\n -la"), [["ls", "-la"]]);
    assert_eq!(
        argvs("git push -\"\"-for'ce'"),
        [["git", "push", "--force"]]
    );
}

#[test]
fn ansi_c_quoting_is_decoded() {
    assert_eq!(
        argvs(r"git $'push' $'\x2d\x2dforce' $'\055\055f' $'\u002dx' $'a\nb'"),
        [["git", "push", "--force", "--f", "-x", "a\nb"]]
    );
    assert!(words(r"x $'\x2d'").iter().all(|w| w.opaque.is_none()));
    assert_eq!(argvs(r"echo $'ab\0cd'"), [["echo", "ab"]]);
    assert_eq!(argvs(r"echo $'\q\cA'"), [["echo", "\\q\u{1}"]]);
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
        ("echo $[1+2]", "command_substitution"),
        ("echo ${X:-$(id)}", "command_substitution"),
        ("diff <(ls) x", "command_substitution"),
        ("ls > /etc/passwd", "output_redirection"),
        ("ls >> out", "output_redirection"),
        ("ls 2>err", "output_redirection"),
        ("ls &>out", "output_redirection"),
        ("ls >&out", "output_redirection"),
        ("ls > $OUT", "output_redirection"),
        ("cat <<EOF", "heredoc"),
        ("echo 'unterminated", "unparseable_command"),
        ("echo \"unterminated", "unparseable_command"),
        ("echo ${unterminated", "unparseable_command"),
        ("echo $'unterminated", "unparseable_command"),
        ("ls >", "unparseable_command"),
    ] {
        assert_eq!(parse(line).unwrap_err(), reason, "{line}");
    }
    assert_eq!(argvs("ls 2>&1 > /dev/null < in <<< word"), [["ls"]]);
}

#[test]
fn opaque_words_know_their_prefix_and_spread() {
    let w = words(
        r#"cmd $X "$Y" pre${IFS}x "a$Z" *.rs src/*.rs {a,b} x{--f,g} ~/x $"t" "$@" [ab] $'lit'"#,
    );
    let got: Vec<(Option<Spread>, &str)> = w
        .iter()
        .map(|w| (w.opaque.map(|o| o.spread), w.prefix()))
        .collect();
    assert_eq!(
        got,
        [
            (None, "cmd"),
            (Some(Spread::Any), ""),
            (Some(Spread::One), ""),
            (Some(Spread::Any), "pre"),
            (Some(Spread::One), "a"),
            (Some(Spread::Prefixed), ""),
            (Some(Spread::Prefixed), "src/"),
            (Some(Spread::Prefixed), ""),
            (Some(Spread::Prefixed), "x"),
            (Some(Spread::One), ""),
            (Some(Spread::One), ""),
            (Some(Spread::Any), ""),
            (Some(Spread::Prefixed), ""),
            (None, "lit"),
        ]
    );
    // Literal brackets and braces are words, not expansions.
    let w = words("[ -f x ] a{b} c[d");
    assert!(w.iter().all(|w| w.opaque.is_none()), "{w:?}");
    // `${…}` with spaces and separators inside is one part of one word.
    assert_eq!(
        argvs("ls ${X:- --force; rm}"),
        [["ls", "${X:- --force; rm}"]]
    );
}

#[test]
fn assignments_need_a_literal_name() {
    let w = words("A=$x B_1=y $C=z 'D=w' e");
    let got: Vec<bool> = w.iter().map(Word::is_assignment).collect();
    assert_eq!(got, [true, true, false, false, false]);
}
