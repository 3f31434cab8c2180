//! The pure middle of the pipeline, shared by `render` and the controller:
//! resolved inputs → validate → compile → build. Whatever `render` prints is
//! exactly what `run` applies.

use std::collections::BTreeMap;

use mcp_warden_crds::{FacadePolicy, MCPServer, SandboxProfileSpec, ToolProfileSpec};

use crate::{
    build::{desired_objects, BuildInput, DesiredObjects},
    capabilities::{self, Decision},
    compile::{compile_policy, policy_yaml, Approved},
    config::BuildConfig,
    validate::{validate, validate_policy, ValidateError},
    workload::{self, Content},
};

/// What the resolve step found for one MCPServer.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    /// The server.
    pub server: &'a MCPServer,
    /// The referenced ToolProfile's spec, if it exists.
    pub tool_profile: Option<&'a ToolProfileSpec>,
    /// The referenced SandboxProfile's spec, if one is referenced and exists.
    pub sandbox_profile: Option<&'a SandboxProfileSpec>,
    /// The cluster's service-account issuer JWKS, if it was read.
    pub jwks: Option<&'a str>,
    /// The JWKS of the profile's JWT issuers without a ConfigMap, by issuer
    /// URL, as the operator fetched them (`None`: not fetched, e.g. `render`).
    pub issuer_jwks: Option<&'a BTreeMap<String, String>>,
    /// Content hashes of the Secrets and ConfigMaps the workload references
    /// (`None`: not read, e.g. `render`, which hashes them as absent).
    pub content: Option<&'a Content>,
    /// Every replica's peer address (`<pod IP>:8080`), as the resolve step
    /// read them from the server's pods (empty: not read, e.g. `render`).
    pub peers: &'a [String],
    /// The digest the server's pods report for `spec.image` (resolve;
    /// `Nothing` when not read, e.g. `render`).
    pub reported_image: &'a crate::pin::Reported,
    /// Set when the last approved workload is gone (no Deployment to keep):
    /// plan as if nothing were approved, so the new workload runs at the
    /// baseline until an admin approves it.
    pub revoke: bool,
}

/// Why no objects can be built; the server waits for a change.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// `spec.toolProfileRef` names no ToolProfile in the namespace.
    #[error("ToolProfile {0:?} not found in the MCPServer's namespace")]
    ToolProfileNotFound(String),
    /// `spec.sandboxProfileRef` names no SandboxProfile in the namespace.
    #[error("SandboxProfile {0:?} not found in the MCPServer's namespace")]
    SandboxProfileNotFound(String),
    /// The spec or the profile breaks a rule.
    #[error(transparent)]
    Invalid(#[from] ValidateError),
}

impl PlanError {
    /// The `PolicyCompiled=False` reason (contract for `ToolProfileNotFound`).
    pub fn reason(&self) -> &'static str {
        match self {
            PlanError::ToolProfileNotFound(_) => "ToolProfileNotFound",
            PlanError::SandboxProfileNotFound(_) => "SandboxProfileNotFound",
            PlanError::Invalid(e) => e.reason(),
        }
    }
}

/// The compiled policy and the objects to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The policy the ConfigMap carries.
    pub policy: FacadePolicy,
    /// The sandbox asked for (the profile's, or the defaults).
    pub sandbox: SandboxProfileSpec,
    /// The capabilities asked for, their digest and what is in force.
    pub capabilities: Decision,
    /// The image digest the Deployment pins (`crate::pin`), for
    /// `status.pinnedImage`.
    pub pinned_image: Option<mcp_warden_crds::mcpserver::PinnedImage>,
    /// Every object, in apply order.
    pub objects: DesiredObjects,
    /// `sha256:` of the compiled policy's YAML (what `status.approvedPolicy`
    /// records once it is written under an approval).
    pub policy_hash: String,
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

/// Validate, compile and build.
pub fn plan(inputs: &Inputs<'_>, config: &BuildConfig) -> Result<Plan, PlanError> {
    let spec = &inputs.server.spec;
    let tools = inputs
        .tool_profile
        .ok_or_else(|| PlanError::ToolProfileNotFound(spec.tool_profile_ref.name.clone()))?;
    let sandbox = match (&spec.sandbox_profile_ref, inputs.sandbox_profile) {
        (None, _) => SandboxProfileSpec::default(),
        (Some(_), Some(found)) => found.clone(),
        (Some(r), None) => return Err(PlanError::SandboxProfileNotFound(r.name.clone())),
    };
    validate(inputs.server, tools, &sandbox)?;
    let mut requested = capabilities::requested(tools, &sandbox, &config.cluster_ranges);
    requested.extend(capabilities::requested_remote(
        inputs.server,
        &config.cluster_ranges,
    ));
    let workload = workload::parts(
        inputs.server,
        tools,
        &sandbox,
        inputs.content.unwrap_or(&EMPTY),
    );
    let annotation = capabilities::annotation(inputs.server).filter(|_| !inputs.revoke);
    let decision = capabilities::decide(
        requested,
        workload,
        annotation,
        &inputs.server.status.clone().unwrap_or_default(),
    );
    let pinned_image = crate::pin::pinned(inputs.server, &decision, inputs.reported_image);
    let approved = Approved::from_names(&decision.in_force);
    let policy = compile_policy(inputs.server, tools, &sandbox, &approved, config);
    validate_policy(&policy)?;
    let yaml = policy_yaml(&policy);
    let objects = desired_objects(BuildInput {
        server: inputs.server,
        sandbox: &sandbox,
        policy_yaml: &yaml,
        auth: &tools.auth,
        jwks: inputs.jwks,
        issuer_jwks: inputs.issuer_jwks.unwrap_or(&EMPTY),
        approved: &approved,
        peers: inputs.peers,
        pinned_image: pinned_image.as_ref(),
        config,
    });
    Ok(Plan {
        policy,
        sandbox,
        capabilities: decision,
        pinned_image,
        objects,
        policy_hash: workload::hash_bytes(yaml.as_bytes()),
    })
}
