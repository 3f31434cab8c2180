//! The peer-key Secret: the key every replica's facade signs and checks
//! session ids with. Its bytes are random, so the operator makes them (I/O,
//! in `reconcile::apply`) once and never rewrites a valid key; this builder
//! only shapes the object around the bytes it is given. `render` does not
//! print it.

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

/// Whether a live Secret holds a usable peer key.
pub fn has_usable_peer_key(secret: &Secret) -> bool {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(names::PEER_KEY_KEY))
        .is_some_and(|k| k.0.len() >= PEER_KEY_MIN_BYTES)
}
