//! Downstream transports: how clients reach the facade.
//! - [`http`]: Streamable HTTP on `/mcp` (the in-cluster and default way);
//! - [`forward`]: relaying a request to the replica that owns its session;
//! - [`stdio`]: the facade spawned by a desktop client in place of the server.
//!
//! Every transport takes every message through [`take`].

pub mod forward;
pub mod http;
pub mod stdio;

use bytes::Bytes;

use crate::jsonrpc::{Message, ParseError, RequestId};

/// Take one client message off a transport: parsed (one object, not a
/// batch), and without `params.auth`, the stdio transport's credential,
/// which is returned and never goes further. Every transport takes every
/// message (batch elements too) through here.
pub fn take(bytes: Bytes) -> Result<(Message, Option<String>), (ParseError, Option<RequestId>)> {
    let msg = Message::parse(bytes)?;
    Ok(crate::auth::strip_params_auth(msg))
}
