//! Validate (pure): the checks the API server's schema and CEL rules make,
//! repeated here so `render` (no API server) and an operator running against
//! an older CRD refuse the same specs. A failure is not retried: the server
//! waits for its spec or profile to change.

use std::collections::BTreeSet;

use mcp_warden_crds::remote::{host_port, RemoteServer};
use mcp_warden_crds::{
    mcpserver::{Transport, POD_TEMPLATE_SPEC_KEYS},
    FacadePolicy, MCPServer, SandboxProfileSpec, ToolProfileSpec,
};

use crate::names::{ADMIN_PORT, FACADE_PORT, MAX_REPLICAS};

/// Why a spec cannot be built. Each variant names a condition reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValidateError {
    /// `transport: stdio` without a `command`.
    #[error("transport stdio needs spec.command: the bridge has to know what to start")]
    StdioWithoutCommand,
    /// `transport: streamable-http` without a usable `port`.
    #[error(
        "transport streamable-http needs spec.port (1-65535, not {FACADE_PORT} or {ADMIN_PORT})"
    )]
    HttpPort,
    /// `expose.ingress` or `expose.httpRoute` without `expose.hosts`.
    #[error("an Ingress or HTTPRoute needs expose.hosts: the names it routes")]
    ExposeWithoutHosts,
    /// `onlyThroughGateway` beside an Ingress or HTTPRoute of the server's own.
    #[error("a server reachable only through its gateway gets no Ingress or HTTPRoute of its own: expose the gateway instead")]
    ExposeBesideGateway,
    /// Replicas outside 0..=10.
    #[error("spec.replicas {0} is out of range (0 to {MAX_REPLICAS})")]
    Replicas(i32),
    /// An alias that is not snake_case.
    #[error("tool {tool}: alias {alias:?} must be snake_case (a-z, 0-9, _; starting with a letter; at most 64)")]
    Alias {
        /// The upstream tool name.
        tool: String,
        /// The offending alias.
        alias: String,
    },
    /// Two tools exposed under one name.
    #[error("two tools would be exposed as {0:?}")]
    DuplicateExposedName(String),
    /// Neither a container image nor a remote server, or both.
    #[error("set exactly one of spec.image (a server container) or spec.remote (a server reached over HTTPS)")]
    ImageOrRemote,
    /// A remote server with container fields.
    #[error("spec.remote has no container: command, args, env, secretEnv, port and workspace do not apply")]
    RemoteWithContainer,
    /// A remote URL or token URL that is not a usable https:// URL, or an
    /// auth rule that is not exactly one credential.
    #[error("spec.remote: {0}")]
    Remote(String),
    /// `spec.podTemplate.spec` sets a field the hardening owns.
    #[error("spec.podTemplate.spec.{key}: {why}")]
    PodTemplateField {
        /// The refused key.
        key: String,
        /// Why, and where to say it instead.
        why: &'static str,
    },
    /// An allowed `spec.podTemplate.spec` field that does not read as a
    /// PodSpec field.
    #[error("spec.podTemplate.spec: {0}")]
    PodTemplateValue(String),
    /// A pod label or annotation the operator sets itself.
    #[error("spec.podTemplate.metadata: {0:?} is the operator's")]
    ReservedMetadata(String),
    /// The compiled policy breaks a rule the facade checks when it loads it
    /// (e.g. a role binding that does not name its issuer when the profile
    /// accepts several).
    #[error("the ToolProfile does not compile: {0}")]
    Policy(String),
    /// Anything else the facade's loader refuses in the compiled policy (a
    /// regex or glob that does not compile, a command pattern that is not a
    /// plain command…): the facade would not start, so nothing is written.
    #[error("the facade would refuse this policy: {0}")]
    InvalidPolicy(String),
    /// An egress host that is not a plain lowercase host name.
    #[error("network.egress.hosts: {0:?} is not a lowercase host name with a dot (no wildcards, no trailing dot)")]
    EgressHost(String),
}

impl ValidateError {
    /// The condition reason for this error (CamelCase, stable).
    pub fn reason(&self) -> &'static str {
        match self {
            ValidateError::StdioWithoutCommand
            | ValidateError::HttpPort
            | ValidateError::ExposeWithoutHosts
            | ValidateError::ExposeBesideGateway
            | ValidateError::Replicas(_)
            | ValidateError::ImageOrRemote
            | ValidateError::RemoteWithContainer
            | ValidateError::Remote(_) => "InvalidServerSpec",
            ValidateError::Alias { .. }
            | ValidateError::DuplicateExposedName(_)
            | ValidateError::Policy(_) => "InvalidToolProfile",
            ValidateError::PodTemplateField { .. }
            | ValidateError::PodTemplateValue(_)
            | ValidateError::ReservedMetadata(_) => "InvalidPodTemplate",
            ValidateError::EgressHost(_) => "InvalidSandboxProfile",
            ValidateError::InvalidPolicy(_) => "InvalidPolicy",
        }
    }
}

/// Check an MCPServer and its profiles; the first problem wins.
pub fn validate(
    server: &MCPServer,
    tools: &ToolProfileSpec,
    sandbox: &SandboxProfileSpec,
) -> Result<(), ValidateError> {
    validate_server(server)?;
    validate_tools(tools)?;
    validate_sandbox(sandbox)?;
    validate_pod_template(server)
}

/// Why a `podTemplate.spec` key is refused.
fn refusal(key: &str) -> &'static str {
    match key {
        "hostNetwork" | "hostPID" | "hostIPC" => {
            "the pod never shares the host's network, PID or IPC namespace (Pod Security restricted)"
        }
        "securityContext" => {
            "the pod's security context is the operator's (non-root, seccomp RuntimeDefault); the user is the SandboxProfile's runAsUser"
        }
        "containers" | "initContainers" | "ephemeralContainers" => {
            "the containers are the operator's (no privileged or extra containers); the server's image and command are spec.image and spec.command, its resources the SandboxProfile's"
        }
        "volumes" => "the volumes are the operator's; the server's own volume is spec.workspace",
        "runtimeClassName" => "set runtimeClassName in the SandboxProfile (isolation is the sandbox's)",
        "serviceAccountName" | "automountServiceAccountToken" => {
            "the pod's identity is the operator's; a token for the server is the serviceaccount.token capability"
        }
        _ => {
            "not a field a podTemplate may set (affinity, imagePullSecrets, nodeSelector, priorityClassName, schedulerName, tolerations, topologySpreadConstraints)"
        }
    }
}

/// Pod annotations that set a container's security profile.
pub const SECURITY_PROFILE_ANNOTATIONS: &[&str] = &[
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
    "container.seccomp.security.alpha.kubernetes.io/",
];

/// `spec.podTemplate`: only the allowed keys, in a shape a PodSpec reads,
/// and no label or annotation the operator sets itself.
pub fn validate_pod_template(server: &MCPServer) -> Result<(), ValidateError> {
    let Some(template) = &server.spec.pod_template else {
        return Ok(());
    };
    for key in template.spec.iter().flat_map(|s| s.keys()) {
        if !POD_TEMPLATE_SPEC_KEYS.contains(&key.as_str()) {
            return Err(ValidateError::PodTemplateField {
                key: key.clone(),
                why: refusal(key),
            });
        }
    }
    crate::build::pod_template::overrides(template).map_err(ValidateError::PodTemplateValue)?;
    if let Some(meta) = &template.metadata {
        let reserved =
            |k: &String| k.starts_with("app.kubernetes.io/") || k.starts_with("mcpwarden.dev/");
        if let Some(k) = meta.labels.keys().find(|k| reserved(k)) {
            return Err(ValidateError::ReservedMetadata(k.clone()));
        }
        let default_container = "kubectl.kubernetes.io/default-container";
        if meta.annotations.contains_key(default_container) {
            return Err(ValidateError::ReservedMetadata(default_container.into()));
        }
        // The hardening decides the containers' AppArmor and seccomp
        // profiles; these annotations would set them (the API server copies
        // an AppArmor one into the field), e.g. to `unconfined`.
        if let Some(k) = meta.annotations.keys().find(|k| {
            SECURITY_PROFILE_ANNOTATIONS
                .iter()
                .any(|p| k.starts_with(p))
        }) {
            return Err(ValidateError::ReservedMetadata(k.clone()));
        }
    }
    Ok(())
}

/// The SandboxProfile's host names are plain lowercase DNS names.
fn validate_sandbox(sandbox: &SandboxProfileSpec) -> Result<(), ValidateError> {
    for host in &sandbox.network.egress.hosts {
        if !is_host_name(&host.name) {
            return Err(ValidateError::EgressHost(host.name.clone()));
        }
    }
    Ok(())
}

fn is_host_name(name: &str) -> bool {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    name.len() <= 253 && name.contains('.') && name.split('.').all(label)
}

fn validate_server(server: &MCPServer) -> Result<(), ValidateError> {
    let spec = &server.spec;
    if let Some(remote) = &spec.remote {
        validate_remote(server, remote)?;
    } else if spec.image.is_empty() {
        return Err(ValidateError::ImageOrRemote);
    }
    match spec.transport {
        _ if spec.remote.is_some() => {}
        Transport::Stdio if spec.command.is_empty() => {
            return Err(ValidateError::StdioWithoutCommand)
        }
        Transport::StreamableHttp => match spec.port {
            Some(p) if (1..=65535).contains(&p) && p != FACADE_PORT && p != ADMIN_PORT => {}
            _ => return Err(ValidateError::HttpPort),
        },
        Transport::Stdio => {}
    }
    if !(0..=MAX_REPLICAS).contains(&spec.replicas) {
        return Err(ValidateError::Replicas(spec.replicas));
    }
    if let Some(expose) = &spec.expose {
        let routed = expose.ingress.is_some() || expose.http_route.is_some();
        if routed && expose.hosts.is_empty() {
            return Err(ValidateError::ExposeWithoutHosts);
        }
        if routed && spec.only_through_gateway.is_some() {
            return Err(ValidateError::ExposeBesideGateway);
        }
    }
    Ok(())
}

/// The ToolProfile alone (also what the profile's own `Valid` condition says).
pub fn validate_tools(tools: &ToolProfileSpec) -> Result<(), ValidateError> {
    let mut exposed = BTreeSet::new();
    for tool in &tools.tools {
        if let Some(alias) = &tool.alias {
            if !is_snake_case(alias) {
                return Err(ValidateError::Alias {
                    tool: tool.name.clone(),
                    alias: alias.clone(),
                });
            }
        }
        let name = tool.alias.as_ref().unwrap_or(&tool.name);
        if !exposed.insert(name.clone()) {
            return Err(ValidateError::DuplicateExposedName(name.clone()));
        }
    }
    Ok(())
}

/// Who gets in, checked by the facade's own loader (the `mcp-warden-policy`
/// crate) on the compiled policy: a role binding without its issuer when the
/// profile accepts several, an issuer named twice, a binding to nobody. The
/// facade would refuse to load such a policy; here it is refused first, with
/// the same messages. Every other finding of that loader (regexes, globs,
/// command patterns, limits…) is [`ValidateError::InvalidPolicy`]: the
/// facade runs the same function at start and would refuse the policy, so
/// it never reaches a ConfigMap.
pub fn validate_policy(policy: &FacadePolicy) -> Result<(), ValidateError> {
    let Err(errors) = mcp_warden_policy::CompiledPolicy::compile(policy) else {
        return Ok(());
    };
    let (who, rest): (Vec<String>, Vec<String>) = errors
        .iter()
        .map(ToString::to_string)
        .partition(|e| e.starts_with("roles") || e.starts_with("auth"));
    if !who.is_empty() {
        let mut message = who.join("; ");
        // A gateway's own issuer is accepted only where that gateway is
        // trusted: say how to get there rather than only that it is not.
        if message.contains("/mcpgateway/") && message.contains("is not an issuer") {
            message.push_str(
                " (an MCPGateway's issuer is accepted once that gateway selects this server)",
            );
        }
        return Err(ValidateError::Policy(message));
    }
    Err(ValidateError::InvalidPolicy(rest.join("; ")))
}

/// The ToolProfile on its own, compiled for a plain server with nothing
/// approved and run through the facade's loader: what the profile's `Valid`
/// condition says, so a profile the facade would refuse is `InvalidPolicy`
/// before any server uses it. Only the loader's findings about the profile
/// itself count (who-gets-in findings depend on the server and the cluster's
/// issuer; the server's own pipeline checks those).
pub fn facade_accepts(tools: &ToolProfileSpec) -> Result<(), ValidateError> {
    let server: MCPServer = serde_json::from_value(serde_json::json!({
        "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
        "metadata": {"name": "profile-check", "namespace": "profile-check"},
        "spec": {"image": "check", "command": ["check"], "toolProfileRef": {"name": "check"}}
    }))
    .expect("a fixed server parses");
    let policy = crate::compile::compile_policy(
        &server,
        tools,
        &SandboxProfileSpec::default(),
        &crate::compile::Approved::default(),
        &crate::config::BuildConfig::default(),
    );
    match validate_policy(&policy) {
        Err(e @ ValidateError::InvalidPolicy(_)) => Err(e),
        _ => Ok(()),
    }
}

/// A remote server: no container fields, https:// URLs with a host, each
/// auth rule exactly one credential (the CRD's CEL rules, repeated).
fn validate_remote(server: &MCPServer, remote: &RemoteServer) -> Result<(), ValidateError> {
    let spec = &server.spec;
    if !spec.image.is_empty() {
        return Err(ValidateError::ImageOrRemote);
    }
    if !spec.command.is_empty()
        || !spec.args.is_empty()
        || !spec.env.is_empty()
        || !spec.secret_env.is_empty()
        || spec.port.is_some()
        || spec.workspace.is_some()
    {
        return Err(ValidateError::RemoteWithContainer);
    }
    let bad = |what: &str, url: &str| {
        ValidateError::Remote(format!(
            "{what} {url:?} must be an https:// URL with a host"
        ))
    };
    if host_port(&remote.url).is_none() {
        return Err(bad("url", &remote.url));
    }
    for url in remote.token_urls() {
        if host_port(&url).is_none() {
            return Err(bad("tokenUrl", &url));
        }
    }
    if let Some(auth) = &remote.auth {
        for (i, rule) in auth.rules.iter().enumerate() {
            let given = [
                rule.token_secret_ref.is_some(),
                rule.client_credentials.is_some(),
                rule.token_exchange.is_some(),
                rule.use_facade == Some(true),
                rule.none == Some(true),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                return Err(ValidateError::Remote(format!(
                    "auth.rules[{i}]: give exactly one of tokenSecretRef, clientCredentials, tokenExchange, useFacade, none"
                )));
            }
            if rule.use_facade == Some(true) && auth.facade.is_none() {
                return Err(ValidateError::Remote(format!(
                    "auth.rules[{i}]: useFacade needs auth.facade"
                )));
            }
        }
        if let Some(f) = &auth.facade {
            if f.token_secret_ref.is_some() == f.client_credentials.is_some() {
                return Err(ValidateError::Remote(
                    "auth.facade: give exactly one of tokenSecretRef, clientCredentials".into(),
                ));
            }
        }
    }
    for cidr in &remote.private_cidrs {
        if cidr.parse::<std::net::IpAddr>().is_ok() || !cidr.contains('/') {
            return Err(ValidateError::Remote(format!(
                "privateCidrs: {cidr:?} must be a CIDR block such as 10.0.0.0/8"
            )));
        }
    }
    Ok(())
}

/// The SandboxProfile alone (its `Valid` condition).
pub fn validate_sandbox_profile(sandbox: &SandboxProfileSpec) -> Result<(), ValidateError> {
    validate_sandbox(sandbox)
}

fn is_snake_case(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('a'..='z'))
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
