//! What the tests of the pure pipeline (validate → compile → build, no API
//! server) share: the `plan::Inputs` of a server planned with nothing read
//! from the cluster, as the `render` subcommand plans it. A new input field
//! then needs one change here, not one per test.
#![allow(dead_code)]

use mcp_warden_crds::{MCPServer, SandboxProfileSpec, ToolProfileSpec};
use mcp_warden_operator::{pin::Reported, plan};

/// Plan inputs for `server` with these profiles and nothing else: no
/// service-account or issuer JWKS, no content hashes, no peers, no image
/// digest reported by pods, not revoked. Tests that need one of those set it
/// with struct update syntax (`plan::Inputs { revoke: true, ..inputs(…) }`).
pub fn inputs<'a>(
    server: &'a MCPServer,
    tool_profile: Option<&'a ToolProfileSpec>,
    sandbox_profile: Option<&'a SandboxProfileSpec>,
) -> plan::Inputs<'a> {
    plan::Inputs {
        server,
        tool_profile,
        sandbox_profile,
        jwks: None,
        issuer_jwks: None,
        content: None,
        peers: &[],
        reported_image: &Reported::Nothing,
        revoke: false,
    }
}
