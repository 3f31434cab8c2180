//! mcp-warden's tool facade: an MCP proxy that is the only way in to an MCP
//! server and enforces a `FacadePolicy` on every message.
//!
//! Module map, in the order a message travels:
//! - [`downstream`]: client transports (Streamable HTTP on `/mcp`, stdio);
//! - [`jsonrpc`]: classify messages, rebuild them under the facade's ids;
//! - [`era`]: what tells the legacy and the modern revision of MCP apart;
//! - [`request_state`]: the signed `requestState` of modern retries;
//! - [`framing`]: the one place a message becomes a line (and back);
//! - [`auth`]: who is calling (tokens, JWTs, service accounts);
//! - [`session`]: one client session, its streams and its upstream link;
//! - [`pipeline`]: the policy on tools/list and tools/call, audit;
//! - [`upstream`]: server transports (stdio child, bridge socket, HTTP);
//! - [`net`]: outbound HTTP(S) connections (TLS, DNS, the SSRF guard, proxy);
//! - [`credentials`]: what the facade presents upstream for each caller;
//! - [`sse`]: Server-Sent Events codec used by both HTTP sides;
//! - [`json_stream`]: a body of JSON texts one after another (streamed listens);
//! - [`admin`], [`metrics`]: health, readiness, Prometheus metrics, `/tools`;
//! - [`sinks`]: where audit records go (a rotated file, an HTTP store);
//! - [`spans`]: OpenTelemetry spans of policed requests (off by default);
//! - [`approvals`]: calls waiting for an out-of-band approval (`/approvals`);
//! - [`policy_file`]: loading and hot-reloading the policy;
//! - [`bridge`]: the in-pod stdio-to-socket bridge;
//! - [`app`]: the shared context; [`cli`]: the command line.
#![forbid(unsafe_code)]

pub mod admin;
pub mod app;
pub mod approvals;
pub mod auth;
pub mod bridge;
pub mod cli;
pub mod credentials;
pub mod downstream;
pub mod era;
pub mod framing;
pub mod json_stream;
pub mod jsonrpc;
pub mod metrics;
pub mod net;
pub mod pipeline;
pub mod policy_file;
pub mod probe;
pub mod request_state;
pub mod server;
pub mod session;
pub mod sinks;
pub mod spans;
pub mod sse;
pub mod strict_json;
pub mod tls;
pub mod upstream;
