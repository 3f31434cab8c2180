//! Downstream transports: how clients reach the facade.
//! - [`http`]: Streamable HTTP on `/mcp` (the in-cluster and default way);
//! - [`forward`]: relaying a request to the replica that owns its session;
//! - [`stdio`]: the facade spawned by a desktop client in place of the server.

pub mod forward;
pub mod http;
pub mod stdio;
