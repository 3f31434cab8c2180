//! The server's two random Secrets: the peer key every replica's facade
//! signs and checks session ids with, and the admin token the facades ask
//! for on `/tools` (which shows hidden tools), presented by the operator
//! when it reads `status.tools`. Their bytes are random, so the operator
//! makes them (I/O, in `reconcile::apply`) once and never rewrites a usable
//! one; these builders only shape the objects around the bytes they are
//! given. `render` prints neither.

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::Secret, ByteString};
use mcp_warden_crds::MCPServer;

use crate::names;

/// The fewest bytes a usable peer key has (the facade refuses shorter keys).
pub const PEER_KEY_MIN_BYTES: usize = 32;

/// The Secret holding `key` under `peer.key`.
pub fn desired_peer_key_secret(server: &MCPServer, key: Vec<u8>) -> Secret {
    Secret {
        metadata: names::metadata(server, names::peer_key_secret(server)),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            names::PEER_KEY_KEY.to_string(),
            ByteString(key),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// The fewest characters a usable admin token has (the facade refuses shorter).
pub const ADMIN_TOKEN_MIN_CHARS: usize = 32;

/// The Secret holding `token` (hex text) under `token`.
pub fn desired_admin_token_secret(server: &MCPServer, token: String) -> Secret {
    Secret {
        metadata: names::metadata(server, names::admin_token_secret(server)),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            names::ADMIN_TOKEN_KEY.to_string(),
            ByteString(token.into_bytes()),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// The admin token a live Secret holds, if usable.
pub fn admin_token(secret: &Secret) -> Option<String> {
    let raw = secret.data.as_ref()?.get(names::ADMIN_TOKEN_KEY)?;
    let token = std::str::from_utf8(&raw.0).ok()?.trim();
    (token.len() >= ADMIN_TOKEN_MIN_CHARS).then(|| token.to_string())
}

/// Whether a live Secret holds a usable peer key.
pub fn has_usable_peer_key(secret: &Secret) -> bool {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(names::PEER_KEY_KEY))
        .is_some_and(|k| k.0.len() >= PEER_KEY_MIN_BYTES)
}
