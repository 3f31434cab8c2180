use super::*;

fn m(allow: &[&str], check: &[&str], deny: &[&str]) -> CommandMatcher {
    let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let mut errors = Vec::new();
    let m = CommandMatcher::compile(&s(allow), &s(check), &s(deny), &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    m
}

fn judge(m: &CommandMatcher, line: &str) -> (ArgumentOutcome, &'static str) {
    let o = m.evaluate(line, ArgumentOutcome::Deny);
    (o.action, o.reason())
}

#[test]
fn allow_patterns_are_exact_unless_they_end_in_a_star() {
    let m = m(&["git status", "git log *", "ls *", "pytest"], &[], &[]);
    assert_eq!(judge(&m, "git status").0, ArgumentOutcome::Pass);
    assert_eq!(judge(&m, "git  'status'").0, ArgumentOutcome::Pass);
    for line in [
        "git status -s",
        "git status --output=/tmp/x",
        "pytest -p evil_plugin",
        "pytest --pdb",
        "git",
        "git statusx",
    ] {
        assert_eq!(
            judge(&m, line),
            (ArgumentOutcome::Deny, "command_not_allowed"),
            "{line}"
        );
    }
    assert_eq!(judge(&m, "git log -n 5 -- src").0, ArgumentOutcome::Pass);
    assert_eq!(
        judge(&m, "git log").0,
        ArgumentOutcome::Pass,
        "`*` may be nothing"
    );
    assert_eq!(judge(&m, "ls $HOME *.rs").0, ArgumentOutcome::Pass);
    assert_eq!(judge(&m, "pytest").0, ArgumentOutcome::Pass);
}

#[test]
fn chained_commands_cannot_ride_an_allowed_prefix() {
    let m = m(&["git status *", "ls *"], &[], &[]);
    assert_eq!(judge(&m, "git status -s").0, ArgumentOutcome::Pass);
    for line in [
        "git status; rm -rf /",
        "git status && curl x | sh",
        "ls\nrm -rf /",
        "git statusx",
        "git",
    ] {
        assert_eq!(judge(&m, line).0, ArgumentOutcome::Deny, "{line}");
    }
    assert_eq!(
        judge(&m, "ls $(rm -rf /)"),
        (ArgumentOutcome::Deny, "command_substitution")
    );
}

#[test]
fn env_prefixes_need_their_own_allow_entry() {
    let m = m(&["git fetch *", "LANG=C ls *"], &[], &["rm"]);
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
        "bash -c $'ls\\nrm x'",
        "eval rm x",
        "find . -name a -exec rm {} \\;",
        "xargs rm",
        "exec -a innocent rm x",
        "$'rm' -rf /",
    ] {
        assert_eq!(o(line).reason(), "command_denied", "{line}");
    }
    assert_eq!(o("ls -l").action, ArgumentOutcome::Pass);
    assert_eq!(o("echo rm").action, ArgumentOutcome::Pass);
    for line in [
        "$CMD x",
        "sudo $CMD x",
        "{rm,-rf,/}",
        "/bin/r? -rf /",
        "\"$X\" y",
        "bash -c \"$X\"",
        "eval $X",
    ] {
        assert_eq!(o(line), Outcome::deny("dynamic_command"), "{line}");
    }
    assert_eq!(o("ls *.txt").action, ArgumentOutcome::Pass);
}

#[test]
fn opaque_words_match_deny_and_check_where_they_could() {
    let m = m(
        &["git push *", "git *"],
        &["git commit"],
        &["git push --force"],
    );
    for line in [
        "git push --force",
        "git push origin --force",
        "git push origin main --force",
        "git push ${IFS}--force",
        "git push $X",
        "git push \"$X\"",
        "git push -$X",
        "git push --$X",
        "git push --f$X",
        "git push *",
        "git push origin {main,--force}",
        "git $X",
        "git ${IFS}push${IFS}--force",
        "git pu$X --force",
        "git {push,pull} --force",
        "git p* --force",
        "git push --force=yes",
        "git push --forc",
        "git $'push' $'\\x2d\\x2dforce'",
    ] {
        assert_eq!(
            judge(&m, line),
            (ArgumentOutcome::Deny, "command_denied"),
            "{line}"
        );
    }
    for line in [
        "git push origin main",
        "git push -u origin main",
        "git push --follow-tags",
        "git pull --force",
        "git push \"--$X\"x",
    ] {
        let want = if line.contains("$X") {
            ArgumentOutcome::Deny
        } else {
            ArgumentOutcome::Pass
        };
        assert_eq!(judge(&m, line).0, want, "{line}");
    }
    // A literal that cannot become the pattern word does not match.
    assert_eq!(judge(&m, "git log src/*.rs").0, ArgumentOutcome::Pass);
    assert_eq!(judge(&m, "git push \"o$X\"").0, ArgumentOutcome::Pass);
    // Check patterns work the same way.
    assert_eq!(
        judge(&m, "git comm$X -m x"),
        (ArgumentOutcome::Check, "command_needs_approval")
    );
    assert_eq!(
        judge(&m, "git \"$X\" -m x"),
        (ArgumentOutcome::Check, "command_needs_approval")
    );
}

#[test]
fn options_in_deny_patterns_match_anywhere_and_in_every_spelling() {
    let m = m(
        &[
            "git diff *",
            "git log *",
            "pytest *",
            "rm *",
            "tar *",
            "docker *",
        ],
        &[],
        &[
            "git diff --output",
            "pytest -p",
            "pytest --pdb",
            "rm -rf",
            "--exec-path",
            "tar -x",
            "docker run --privileged",
        ],
    );
    for line in [
        "git diff --output=/tmp/x",
        "git diff HEAD --output /tmp/x",
        "git diff --outp=x",
        "pytest -p evil",
        "pytest -pevil",
        "pytest -vp evil",
        "pytest tests --pdb",
        "pytest --pd",
        "rm -rf /",
        "rm -fr /",
        "rm -rfv /",
        "git log --exec-path=/tmp",
        "tar -xzf a.tgz",
        "tar xzf -x",
        "docker --debug run --privileged x",
    ] {
        assert_eq!(
            judge(&m, line),
            (ArgumentOutcome::Deny, "command_denied"),
            "{line}"
        );
    }
    for line in [
        "git diff --stat",
        "git diff HEAD~1 -- src",
        "git log --oneline",
        "pytest -k parse",
        "pytest --pyargs pkg",
        "rm -r x",
        "rm -f x",
        "tar -tzf a.tgz",
        "git log -- --output",
        "docker --debug ps",
    ] {
        assert_eq!(judge(&m, line).0, ArgumentOutcome::Pass, "{line}");
    }
}

#[test]
fn check_beats_allow_and_deny_beats_check() {
    let m = m(&["git *"], &["git push"], &["git push --force"]);
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
    let m = m(&["bash -c *", "ls *"], &[], &[]);
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
    let a = compile_allow("git  status").unwrap();
    assert_eq!(
        (a.words.as_slice(), a.rest),
        (&["git".to_string(), "status".to_string()][..], false)
    );
    let a = compile_allow("git log *").unwrap();
    assert!(a.rest);
    assert!(compile_allow("git '*'").is_ok_and(|a| !a.rest && a.words[1] == "*"));
    for bad in [
        "git status; ls",
        "ls $X",
        "ls > x",
        "",
        "*",
        "git * log",
        "ls *.rs",
        "~/bin/x",
    ] {
        assert!(compile_allow(bad).is_err(), "{bad}");
    }
    assert!(compile_rule("git diff --output=x").is_err());
    let r = compile_rule("git push origin --force -f x").unwrap();
    assert_eq!(r.name.as_deref(), Some("git"));
    assert_eq!(r.prefix, ["push", "origin"]);
    assert_eq!(r.anywhere.len(), 3);
    assert!(compile_rule("--output").unwrap().name.is_none());
}
