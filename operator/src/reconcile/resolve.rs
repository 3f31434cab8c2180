//! Resolve (reads only): fetch what an MCPServer references — its
//! ToolProfile, its SandboxProfile and the Secrets of `secretEnv`,
//! `remote.auth`, `expose.tls` and the profile's static tokens. A missing
//! object is an answer, not an error; only API failures are errors.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use mcp_warden_crds::{MCPServer, SandboxProfile, ToolProfile};

use crate::names;

/// What the references point at.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// The ToolProfile, if it exists.
    pub tool_profile: Option<ToolProfile>,
    /// The SandboxProfile, if one is referenced and it exists.
    pub sandbox_profile: Option<SandboxProfile>,
    /// Names of `secretEnv` and static-token Secrets that do not exist (sorted).
    pub missing_secrets: Vec<String>,
}

/// A read failed (transient: the reconcile backs off and retries).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {what}: {source}")]
pub struct ResolveError {
    /// The object, e.g. `ToolProfile team-a/git`.
    pub what: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// Read every referenced object.
pub async fn resolve(client: &Client, server: &MCPServer) -> Result<Resolved, ResolveError> {
    let ns = names::namespace(server);
    let spec = &server.spec;
    let err = |what: String| move |source| ResolveError { what, source };

    let tool_profiles: Api<ToolProfile> = Api::namespaced(client.clone(), &ns);
    let name = &spec.tool_profile_ref.name;
    let tool_profile = tool_profiles
        .get_opt(name)
        .await
        .map_err(err(format!("ToolProfile {ns}/{name}")))?;

    let sandbox_profile = match &spec.sandbox_profile_ref {
        Some(r) => {
            let api: Api<SandboxProfile> = Api::namespaced(client.clone(), &ns);
            api.get_opt(&r.name)
                .await
                .map_err(err(format!("SandboxProfile {ns}/{}", r.name)))?
        }
        None => None,
    };

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut missing_secrets = Vec::new();
    // `secretEnv`'s Secrets, those of a remote server's credentials, the
    // listener's certificate and the profile's static tokens.
    let remote = names::remote_secrets(server);
    let mut wanted: BTreeSet<String> = spec
        .secret_env
        .iter()
        .map(|e| e.secret_name.clone())
        .collect();
    wanted.extend(remote.keys().cloned());
    wanted.extend(names::tls_secret(server).map(str::to_string));
    if let Some(profile) = &tool_profile {
        wanted.extend(crate::build::facade_auth::secret_names(&profile.spec.auth));
    }
    for secret in wanted {
        // Metadata only: the operator never reads secret values.
        let found = secrets
            .get_metadata_opt(&secret)
            .await
            .map_err(err(format!("Secret {ns}/{secret}")))?;
        if found.is_none() {
            missing_secrets.push(secret);
        }
    }
    Ok(Resolved {
        tool_profile,
        sandbox_profile,
        missing_secrets,
    })
}
