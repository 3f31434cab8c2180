//! mcp-warden API types.
//!
//! Two families live here because both binaries need them:
//! - [`policy`]: `FacadePolicy`, the document the operator compiles from an
//!   MCPServer + ToolProfile + SandboxProfile and the sidecar loads (locally it
//!   is a YAML/JSON file). The shared building blocks (tool rules, argument
//!   rules, limits, roles) are defined once here and reused by the CRDs.
//! - the CRD types (feature `kube`), generated into `crds/*.yaml`:
//!   [`mcpserver`] (with [`remote`]), [`mcpgateway`], [`toolprofile`], [`sandboxprofile`]
//!   (with the [`profile_status`] both profiles share); [`schema`] holds the
//!   schema helpers they share.
#![forbid(unsafe_code)]

pub mod policy;

pub use policy::*;

#[cfg(feature = "kube")]
pub mod mcpgateway;
#[cfg(feature = "kube")]
pub mod mcpserver;
/// `MCPServer.status` (re-exported from [`mcpserver`]).
#[cfg(feature = "kube")]
pub mod mcpserver_status;
#[cfg(feature = "kube")]
pub mod profile_status;
#[cfg(feature = "kube")]
pub mod remote;
#[cfg(feature = "kube")]
pub mod sandboxprofile;
#[cfg(feature = "kube")]
pub mod schema;
#[cfg(feature = "kube")]
pub mod toolprofile;

#[cfg(feature = "kube")]
pub use mcpgateway::{MCPGateway, MCPGatewaySpec, MCPGatewayStatus};
#[cfg(feature = "kube")]
pub use mcpserver::{MCPServer, MCPServerSpec, MCPServerStatus};
#[cfg(feature = "kube")]
pub use sandboxprofile::{SandboxProfile, SandboxProfileSpec};
#[cfg(feature = "kube")]
pub use toolprofile::{ToolProfile, ToolProfileSpec};

/// The API group of every mcp-warden resource (contract).
pub const GROUP: &str = "mcpwarden.dev";
/// The served and stored version (contract).
pub const VERSION: &str = "v1alpha1";
