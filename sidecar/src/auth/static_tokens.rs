//! Static bearer tokens, kept only as sha256 hashes: inline in the policy,
//! in a hash-list file, or one raw token per file (a mounted Secret key,
//! hashed when read), each with a subject and groups.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mcp_warden_crds::{StaticToken, StaticTokens as Config};
use sha2::{Digest, Sha256};

use crate::auth::identity::{AuthMethod, Identity};

/// Raw tokens shorter than this are not accepted: a short token is guessable.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Words that mark a token as a placeholder copied from an example or a
/// template (matched case-insensitively anywhere in it, `-`/`_` ignored):
/// such a token is public, so it is refused like a short one. The example
/// Secrets use `replace-me-…`.
pub const PLACEHOLDER_MARKS: &[&str] = &[
    "replaceme",
    "changeme",
    "placeholder",
    "yourtoken",
    "examplesecret",
    "exampletoken",
];

/// Whether `token` is a known placeholder ([`PLACEHOLDER_MARKS`]).
pub fn is_placeholder(token: &str) -> bool {
    let folded: String = token
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect();
    PLACEHOLDER_MARKS.iter().any(|mark| folded.contains(mark))
}

#[derive(Default)]
pub struct StaticTokens {
    by_hash: HashMap<[u8; 32], (String, Vec<String>)>,
}

impl StaticTokens {
    pub fn load(cfg: Option<&Config>, base: &Path) -> Result<StaticTokens, String> {
        let mut out = StaticTokens::default();
        let Some(cfg) = cfg else { return Ok(out) };
        let mut entries: Vec<StaticToken> = cfg.tokens.clone();
        if let Some(file) = &cfg.file {
            let path = base.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read static tokens {}: {e}", path.display()))?;
            let listed: Vec<StaticToken> = serde_yaml_ng::from_str(&text)
                .map_err(|e| format!("invalid static tokens file {}: {e}", path.display()))?;
            entries.extend(listed);
        }
        for (i, t) in entries.into_iter().enumerate() {
            let mut hash = [0u8; 32];
            hex::decode_to_slice(t.sha256.trim(), &mut hash).map_err(|_| {
                format!(
                    "static token #{i} ({}): sha256 must be 64 hex characters",
                    t.subject
                )
            })?;
            out.by_hash.insert(hash, (t.subject, t.groups));
        }
        for f in &cfg.token_files {
            let path = base.join(&f.path);
            let Some(token) = read_token(&path)? else {
                continue;
            };
            let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            out.by_hash
                .insert(hash, (f.subject.clone(), f.groups.clone()));
        }
        Ok(out)
    }

    pub fn find(&self, token: &str) -> Option<Identity> {
        if self.by_hash.is_empty() {
            return None;
        }
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.by_hash.get(&hash).map(|(subject, groups)| Identity {
            issuer: Some(mcp_warden_crds::STATIC_ISSUER.to_string()),
            subject: Some(subject.clone()),
            groups: groups.clone(),
            service_account: None,
            method: AuthMethod::StaticToken,
            token: None,
            expires_at: None,
        })
    }
}

/// The token in `path`, or `None` (with a warning) when the file is not
/// there yet or holds no usable token. The token is never logged.
fn read_token(path: &PathBuf) -> Result<Option<String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        // A Secret the operator mounts as optional: until it exists, its
        // token is refused and the policy watcher picks the file up later.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(file = %path.display(), "static token file not found; its token is refused until it appears");
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot read static token {}: {e}", path.display())),
    };
    let token = text.trim();
    if token.chars().count() < MIN_TOKEN_CHARS {
        tracing::warn!(file = %path.display(), min = MIN_TOKEN_CHARS, "static token file holds a token shorter than the minimum; it is refused");
        return Ok(None);
    }
    if is_placeholder(token) {
        tracing::warn!(file = %path.display(), "static token file holds a placeholder (e.g. `replace-me-…` from an example); it is refused: put a random token there, e.g. `openssl rand -hex 32`");
        return Ok(None);
    }
    Ok(Some(token.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::StaticTokenFile;

    fn file_cfg(path: &str) -> Config {
        Config {
            token_files: vec![StaticTokenFile {
                path: path.into(),
                subject: "ci-bot".into(),
                groups: vec!["agents".into()],
            }],
            ..Config::default()
        }
    }

    #[test]
    fn placeholders_are_known_whatever_their_spelling() {
        for token in [
            "replace-me-with-a-long-random-token",
            "REPLACE_ME_0123456789",
            "changeme-changeme-changeme",
            "my-placeholder-token-value",
            "your_token_goes_here_please",
        ] {
            assert!(is_placeholder(token), "{token}");
        }
        for token in ["0123456789abcdef0123", "4f9c2e7a1b3d5f60718293a4b5c6d7e8"] {
            assert!(!is_placeholder(token), "{token}");
        }
    }

    #[test]
    fn token_files_hold_raw_tokens_hashed_on_load() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        std::fs::write(dir.join("token"), "0123456789abcdef0123\n").unwrap();
        let tokens = StaticTokens::load(Some(&file_cfg("token")), dir).unwrap();
        let who = tokens
            .find("0123456789abcdef0123")
            .expect("the file's token");
        assert_eq!(who.subject.as_deref(), Some("ci-bot"));
        assert_eq!(who.groups, ["agents"]);
        assert_eq!(who.issuer.as_deref(), Some("static"));
        assert!(tokens.find("0123456789abcdef012").is_none());

        // Not there yet, or too short: skipped, and nothing else breaks.
        let missing = StaticTokens::load(Some(&file_cfg("absent")), dir).unwrap();
        assert!(missing.find("0123456789abcdef0123").is_none());
        std::fs::write(dir.join("short"), "abc").unwrap();
        let short = StaticTokens::load(Some(&file_cfg("short")), dir).unwrap();
        assert!(short.find("abc").is_none());
        // The example's placeholder, long enough yet public: refused too.
        std::fs::write(
            dir.join("placeholder"),
            "replace-me-with-a-long-random-token\n",
        )
        .unwrap();
        let placeholder = StaticTokens::load(Some(&file_cfg("placeholder")), dir).unwrap();
        assert!(placeholder
            .find("replace-me-with-a-long-random-token")
            .is_none());
    }
}
