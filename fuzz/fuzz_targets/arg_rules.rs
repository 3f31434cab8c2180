//! The path normalizer and the shell command parser of the argument rules,
//! reached the way the facade reaches them: `CompiledPolicy::decide_call` on
//! a tools/call's `arguments` (`mcp_warden_policy`).
//!
//! Oracles (only in the direction that must hold, so extra refusals are fine):
//! - path: for plain ASCII values (no `%`, no `~`, no control characters) a
//!   simple reference normalizer (root join, `/` and `\` separators, `.`/`..`
//!   clamped at `/`) says where the path lands; a path outside the root, or
//!   inside `.git/`, or a `*.pem` must be denied; one under `secrets/` must at
//!   least need approval;
//! - command: if a line passes, the same line followed by `; rm -rf /` or a
//!   newline and `rm -rf /` must not pass, and `sudo <line>` must not pass;
//!   a `git push` line that is not denied must be denied once a forbidden
//!   option is added in any spelling a shell turns into it (`--force`,
//!   `${IFS}--force`, `$'\x2d\x2dforce'`, `-f` in a cluster);
//! - the verdict is the same when the value arrives inside an array.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_warden_crds::policy::{FacadePolicy, Role};
use mcp_warden_policy::{CompiledPolicy, Decision, Denial, ObservedTool};
use serde_json::{json, Value};

const POLICY: &str = r#"
tools:
  - name: fs
    writes: false
    arguments:
      - {name: path, kind: path, root: /workspace, allow: ["**"], check: ["secrets/**"], deny: ["**/.git/**", "**/*.pem"]}
  - name: shell
    writes: false
    arguments:
      - {name: cmd, kind: command, allow: ["git status", "git log *", "git push *", "ls *", "cat *", "echo *", "grep *"], check: ["git push"], deny: ["rm", "curl", "sudo", "git push --force", "git push -f", "git log --output"]}
"#;

struct World {
    policy: CompiledPolicy,
    fs: ObservedTool,
    shell: ObservedTool,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let p = FacadePolicy::from_yaml_str(POLICY, "fuzz").expect("policy parses");
        let ro = |name: &str| {
            ObservedTool::new(json!({"name": name, "description": name,
                "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}))
            .unwrap()
        };
        World {
            policy: CompiledPolicy::compile(&p).expect("policy compiles"),
            fs: ro("fs"),
            shell: ro("shell"),
        }
    })
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum V {
    Pass,
    Check,
    Deny,
}

fn verdict(tool: &str, args: &Value) -> V {
    let w = world();
    let d = w.policy.decide_call(tool, Some(Role::Admin), args, |n| match n {
        "fs" => Some(&w.fs),
        "shell" => Some(&w.shell),
        _ => None,
    });
    match d {
        Decision::Allow(g) if g.approval.is_some() => V::Check,
        Decision::Allow(_) => V::Pass,
        Decision::Deny(Denial::ArgumentDenied { .. }) => V::Deny,
        Decision::Deny(other) => panic!("unexpected denial {other:?}"),
    }
}

/// Where a plain ASCII path lands: its components after joining the root.
fn reference_components(raw: &str) -> Vec<&str> {
    let absolute = raw.starts_with(['/', '\\']);
    let mut parts: Vec<&str> = if absolute { vec![] } else { vec!["workspace"] };
    for c in raw.split(['/', '\\']) {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts
}

fn check_path(s: &str) {
    let v = verdict("fs", &json!({ "path": s }));
    assert_eq!(v, verdict("fs", &json!({ "path": [s] })), "array changed the verdict for {s:?}");
    let plain = s.bytes().all(|b| (0x20..0x7f).contains(&b)) && !s.contains(['%', '~']);
    if !plain {
        return;
    }
    let parts = reference_components(s);
    let inside = parts.first() == Some(&"workspace");
    if !inside {
        assert_eq!(v, V::Deny, "{s:?} lands outside /workspace ({parts:?}) but got {v:?}");
        return;
    }
    let below = &parts[1..];
    if let Some(i) = below.iter().position(|c| *c == ".git") {
        if i + 1 < below.len() {
            assert_eq!(v, V::Deny, "{s:?} is inside .git ({parts:?}) but got {v:?}");
        }
    }
    if below.last().is_some_and(|c| c.len() > 4 && c.ends_with(".pem")) {
        assert_eq!(v, V::Deny, "{s:?} is a .pem file ({parts:?}) but got {v:?}");
    }
    if below.len() >= 2 && below[0] == "secrets" {
        assert_ne!(v, V::Pass, "{s:?} is under secrets/ ({parts:?}) but passed");
    }
}

fn check_command(s: &str) {
    let v = verdict("shell", &json!({ "cmd": s }));
    assert_eq!(v, verdict("shell", &json!({ "cmd": [s] })), "array changed the verdict for {s:?}");
    if v == V::Pass && !s.ends_with('\\') {
        for tail in ["; rm -rf /", "\nrm -rf /", " && rm -rf /", " | rm -rf /"] {
            let joined = format!("{s}{tail}");
            let v2 = verdict("shell", &json!({ "cmd": joined }));
            assert_eq!(v2, V::Deny, "{s:?} passes and {joined:?} got {v2:?}");
        }
    }
    let plain_push = s.starts_with("git push")
        && !s.contains(['\\', '#', '\n', ';', '&', '|', '\'', '"', '<', '>']);
    if v != V::Deny && plain_push {
        for tail in [" --force", " ${IFS}--force", " $'\\x2d\\x2dforce'", " -uf", " --forc", " \"$F\""] {
            let forced = format!("{s}{tail}");
            let v2 = verdict("shell", &json!({ "cmd": forced }));
            assert_eq!(v2, V::Deny, "{s:?} is not denied, {forced:?} got {v2:?}");
        }
    }
    if !s.trim().is_empty() {
        let sudo = format!("sudo {s}");
        assert_ne!(verdict("shell", &json!({ "cmd": sudo })), V::Pass, "{sudo:?} passed");
    }
}

fuzz_target!(|data: &[u8]| {
    // A JSON object is used as the whole `arguments` (any shape must be judged
    // without a panic); anything else is one string value.
    if data.first() == Some(&b'{') {
        if let Ok(args) = serde_json::from_slice::<Value>(data) {
            let _ = verdict("fs", &args);
            let _ = verdict("shell", &args);
        }
        return;
    }
    let s = String::from_utf8_lossy(data);
    check_path(&s);
    check_command(&s);
});
