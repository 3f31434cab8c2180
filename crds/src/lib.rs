//! mcp-warden API types.
//!
//! Two families live here because both binaries need them:
//! - [`policy`]: `FacadePolicy`, the document the operator compiles from an
//!   MCPServer + ToolProfile + SandboxProfile and the sidecar loads (locally it
//!   is a YAML/JSON file). The shared building blocks (tool rules, argument
//!   rules, limits, roles) are defined once here and reused by the CRDs.
//! - the CRD types (feature `kube`), generated into `crds/*.yaml`.
#![forbid(unsafe_code)]

pub mod policy;

pub use policy::*;
