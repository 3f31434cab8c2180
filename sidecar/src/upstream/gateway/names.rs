//! Names across a gateway's backends: what a client sees, which backend a
//! name goes back to, and which names are withheld because they could be
//! confused.
//!
//! Where it sits: inside the gateway link ([`super`]), between the merged
//! lists it answers and the requests it routes. The rules live in the
//! policy crate ([`mcp_warden_policy::gateway_names`]) because the operator
//! applies the same ones to the backends' published inventories to show an
//! MCPGateway's conflicts in its status.

pub use mcp_warden_policy::gateway_names::*;
