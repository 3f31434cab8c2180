//! The protocol layer of mcp-warden's tool facade: what an MCP message is,
//! independent of where it travels or what the policy says about it.
//!
//! This crate is the bottom of the facade's layers (the sidecar crate's
//! `lib.rs` draws them all); it depends on no other part of the facade, and
//! the compiler keeps it so.
//! - [`jsonrpc`]: classify messages, rebuild them under the facade's ids;
//! - [`era`]: what tells the legacy and the modern revision of MCP apart;
//! - [`request_state`]: the signed `requestState` of modern retries;
//! - [`framing`]: the one place a message becomes a line (and back);
//! - [`sse`]: the Server-Sent Events codec both HTTP sides use;
//! - [`json_stream`]: a body of JSON texts one after another (streamed answers);
//! - [`strict_json`]: reading JSON that refuses duplicate keys.
#![forbid(unsafe_code)]

pub mod era;
pub mod framing;
pub mod json_stream;
pub mod jsonrpc;
pub mod request_state;
pub mod sse;
pub mod strict_json;
