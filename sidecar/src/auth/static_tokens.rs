//! Static bearer tokens, stored only as sha256 hashes (inline in the policy
//! or in a mounted Secret file), each with a subject and groups.

use std::collections::HashMap;
use std::path::Path;

use mcp_warden_crds::{StaticToken, StaticTokens as Config};
use sha2::{Digest, Sha256};

use crate::pipeline::identity::{AuthMethod, Identity};

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
        })
    }
}
