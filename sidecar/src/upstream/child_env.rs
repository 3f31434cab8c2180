//! The environment of a server the facade starts itself (`run … -- CMD`):
//! decided once at start, then handed to every spawn by [`super::stdio`].
//!
//! ```text
//! the facade's own environment ─┬─ BASELINE names and LC_* ───────────────┐
//!                               └─ names given by --server-env NAME        ├─▶ the child's whole env
//!                                  and MCP_WARDEN_SERVER_ENV (names)       │   (env_clear first)
//! --server-env NAME=VALUE ─────────────────────────────────────────────────┘   (a set value wins)
//! ```
//!
//! The facade's own environment holds what the server must not see: its
//! admin and audit tokens' settings (`MCP_WARDEN_*`), and whatever the shell
//! that started it carries (cloud credentials, `npm_config_*` with registry
//! tokens, `GITHUB_TOKEN`…). So nothing passes unless it is in the baseline
//! or named. The baseline is what an ordinary command needs to start and
//! behave, and holds no credentials:
//!
//! | name | why the server gets it |
//! |---|---|
//! | `PATH` | find the program and what it runs (`npx` → `node`, `uvx` → `python`) |
//! | `HOME` | per-user caches and config: `~/.npm`, `~/.cache/uv`, `~/.npmrc`, `~/.gitconfig` |
//! | `USER`, `LOGNAME` | who runs it (git and Python's `getpass` read them when there is no passwd entry) |
//! | `LANG`, `LANGUAGE`, `LC_*` | the locale: how text and file names are decoded |
//! | `TZ` | local time (a time server answers in it) |
//! | `TMPDIR` | where temporary files go |
//!
//! `TERM` is left out on purpose: the server's stdout is the protocol
//! channel, not a terminal, and a program that sees `TERM` may colour it.
//! In a pod none of this applies: the bridge passes the server container's
//! environment, which the operator writes from the MCPServer's `env` and
//! `secretEnv` (covered by the approval).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// Passed from the facade's environment without being named.
pub const BASELINE: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
];
/// Prefixes passed without being named (the locale categories).
pub const BASELINE_PREFIXES: &[&str] = &["LC_"];
/// Names (comma-separated) passed as if each were a `--server-env NAME`.
pub const ENV_VAR: &str = "MCP_WARDEN_SERVER_ENV";

/// A `--server-env` entry, or `MCP_WARDEN_SERVER_ENV`, that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ServerEnvError {
    /// An empty name, or one with `=` or NUL in it.
    #[error("--server-env {0:?}: expected NAME or NAME=VALUE with a non-empty NAME")]
    BadEntry(String),
    /// The variable form carries names only (a value there would be a
    /// second way to set what `--server-env NAME=VALUE` sets).
    #[error("{ENV_VAR}: {0:?} is not a variable name (it lists names only, comma-separated; set values with --server-env NAME=VALUE)")]
    NotAName(String),
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

fn in_baseline(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    BASELINE.contains(&name) || BASELINE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The child's whole environment, sorted by name: the baseline and the
/// named variables that `facade` has, then the values set on the command
/// line. `names_var` is `MCP_WARDEN_SERVER_ENV`'s value, if set.
pub fn child_env(
    facade: impl IntoIterator<Item = (OsString, OsString)>,
    entries: &[String],
    names_var: Option<&str>,
) -> Result<Vec<(OsString, OsString)>, ServerEnvError> {
    let mut named: Vec<&str> = Vec::new();
    let mut set: Vec<(&str, &str)> = Vec::new();
    for entry in entries {
        match entry.split_once('=') {
            Some((name, value)) if valid_name(name) => set.push((name, value)),
            None if valid_name(entry) => named.push(entry),
            _ => return Err(ServerEnvError::BadEntry(entry.clone())),
        }
    }
    for name in names_var
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        if !valid_name(name) {
            return Err(ServerEnvError::NotAName(name.to_string()));
        }
        named.push(name);
    }
    let mut env: BTreeMap<OsString, OsString> = facade
        .into_iter()
        .filter(|(name, _)| {
            in_baseline(name) || named.iter().any(|n| OsStr::new(n) == name.as_os_str())
        })
        .collect();
    for (name, value) in set {
        env.insert(name.into(), value.into());
    }
    Ok(env.into_iter().collect())
}

/// The names (never the values) of `env`, for the start-up log line.
pub fn names(env: &[(OsString, OsString)]) -> String {
    env.iter()
        .map(|(n, _)| n.to_string_lossy())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facade() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/a"),
            ("LC_ALL", "C.UTF-8"),
            ("TERM", "xterm"),
            ("MCP_WARDEN_ADMIN_TOKEN_FILE", "/run/admin"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("npm_config__authToken", "npm-token"),
            ("DB_HOST", "db.internal"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn as_strings(env: Vec<(OsString, OsString)>) -> Vec<(String, String)> {
        env.into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect()
    }

    #[test]
    fn only_the_baseline_passes_unless_named() {
        let env = as_strings(child_env(facade(), &[], None).unwrap());
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HOME", "LC_ALL", "PATH"]);
    }

    #[test]
    fn named_variables_pass_and_set_values_win() {
        let entries = ["DB_HOST".to_string(), "HOME=/srv".into(), "MODE=a=b".into()];
        let env =
            as_strings(child_env(facade(), &entries, Some(" AWS_SECRET_ACCESS_KEY ,")).unwrap());
        assert_eq!(
            env,
            [
                ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
                ("DB_HOST", "db.internal"),
                ("HOME", "/srv"),
                ("LC_ALL", "C.UTF-8"),
                ("MODE", "a=b"),
                ("PATH", "/usr/bin"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        // A name the facade does not have is simply absent.
        let env = as_strings(child_env(facade(), &["NOT_SET".into()], None).unwrap());
        assert!(env.iter().all(|(k, _)| k != "NOT_SET"));
    }

    #[test]
    fn malformed_entries_are_refused() {
        assert_eq!(
            child_env(facade(), &["=x".into()], None),
            Err(ServerEnvError::BadEntry("=x".into()))
        );
        assert_eq!(
            child_env(facade(), &[String::new()], None),
            Err(ServerEnvError::BadEntry(String::new()))
        );
        assert_eq!(
            child_env(facade(), &[], Some("A,B=c")),
            Err(ServerEnvError::NotAName("B=c".into()))
        );
        assert_eq!(
            names(&child_env(facade(), &[], None).unwrap()),
            "HOME, LC_ALL, PATH"
        );
    }
}
