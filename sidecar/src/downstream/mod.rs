//! Downstream transports: how clients reach the facade.
//! - [`http`]: Streamable HTTP on `/mcp` (the in-cluster and default way);
//! - [`stdio`]: the facade spawned by a desktop client in place of the server.

pub mod http;
pub mod stdio;
