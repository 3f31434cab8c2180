//! The FacadePolicy compiler: MCPServer + ToolProfile + SandboxProfile (+ the
//! approved capabilities) → the document the sidecar loads. Pure and
//! deterministic: the same inputs give the same bytes, so an unchanged spec
//! never rewrites the ConfigMap.
//!
//! Baseline (what runs without an approval): tools up to risk `medium`, no write-capable
//! sandbox. [`Approved`] — the capabilities in force, see
//! [`crate::capabilities`] — raises it: approved `tool:<name>` become
//! `approvedTools`, `workspace.write` becomes `sandbox.writeAllowed`.

use std::collections::BTreeSet;

use kube::ResourceExt;
use mcp_warden_crds::remote::{KeyRef, RemoteAuth, RemoteClientCredentials};
use mcp_warden_crds::{
    sandboxprofile::WorkspaceAccess, toolprofile::ProfileAuth, AuthConfig, ClientCredentials,
    FacadeCredential, FacadePolicy, JwtIssuer, MCPServer, RiskLevel, Root, SandboxGrant,
    SandboxProfileSpec, ServerRef, ServiceAccountTokens, StaticTokenFile, StaticTokens,
    TokenExchange, ToolProfileSpec, TrustedGateway, UpstreamAuth, UpstreamCredentialRule,
};

use crate::{capabilities::Capability, config::BuildConfig, egress_scope::Scope, names};

/// Capabilities above the baseline that a cluster admin approved (in force).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Approved {
    /// Upstream names of `high`/`critical` tools that may be exposed.
    pub tools: BTreeSet<String>,
    /// The workspace may be written (`workspace.write`).
    pub workspace_write: bool,
    /// A remote server's write-capable tools may be used (`remote.write`).
    pub remote_write: bool,
    /// Outbound TCP (CIDR, port) pairs (`network.egress:…`,
    /// `network.egress.cluster:…`).
    pub egress: BTreeSet<(String, i32)>,
    /// Outbound TCP (CIDR, port) pairs of broad blocks
    /// (`network.egress.internet:…`): rendered with the cluster's ranges excepted.
    pub broad_egress: BTreeSet<(String, i32)>,
    /// Outbound TCP (host name, port) pairs (`network.egress.host:…`).
    pub hosts: BTreeSet<(String, i32)>,
    /// DNS lookups to the cluster DNS (`network.dns`).
    pub dns: bool,
    /// A service-account token in the server container (`serviceaccount.token`).
    pub service_account_token: bool,
}

impl Approved {
    /// From capability names; names that do not parse grant nothing.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a String>) -> Approved {
        let mut approved = Approved::default();
        for capability in names.into_iter().filter_map(|n| Capability::parse(n)) {
            match capability {
                Capability::Egress {
                    cidr,
                    port,
                    scope: Scope::Internet,
                } => {
                    approved.broad_egress.insert((cidr, port));
                }
                Capability::Egress { cidr, port, .. } => {
                    approved.egress.insert((cidr, port));
                }
                Capability::EgressHost { host, port } => {
                    approved.hosts.insert((host, port));
                }
                Capability::Dns => approved.dns = true,
                Capability::WorkspaceWrite => approved.workspace_write = true,
                Capability::RemoteWrite => approved.remote_write = true,
                Capability::ServiceAccountToken => approved.service_account_token = true,
                Capability::Tool(name) => {
                    approved.tools.insert(name);
                }
            }
        }
        approved
    }
}

/// Compile the policy for one MCPServer.
pub fn compile_policy(
    server: &MCPServer,
    tools: &ToolProfileSpec,
    sandbox: &SandboxProfileSpec,
    approved: &Approved,
    cfg: &BuildConfig,
) -> FacadePolicy {
    // A remote server has no workspace: what it writes is on the remote,
    // and `remote.write` is what lets its write-capable tools through.
    let write_allowed = match &server.spec.remote {
        Some(remote) => remote.writes && approved.remote_write,
        None => approved.workspace_write && sandbox.workspace_access == WorkspaceAccess::ReadWrite,
    };
    FacadePolicy {
        server: Some(ServerRef {
            namespace: names::namespace(server),
            name: names::object_name(server),
        }),
        default_action: tools.default_action,
        tools: tools.tools.clone(),
        limits: tools.limits.clone(),
        resources: tools.resources.clone(),
        prompts: tools.prompts.clone(),
        redaction: tools.redaction.clone(),
        risk_prefix: tools.risk_prefix,
        quarantine_on_drift: tools.quarantine_on_drift,
        poisoning_scan: tools.poisoning_scan,
        risk_ceiling: RiskLevel::Medium,
        approved_tools: approved.tools.iter().cloned().collect(),
        roles: tools.roles.clone(),
        mode: tools.mode,
        deny_side_effects: tools.deny_side_effects.clone(),
        role_restrictions: tools.role_restrictions.clone(),
        tool_search: tools.tool_search,
        auth: compile_auth(server, &tools.auth, cfg),
        sandbox: SandboxGrant { write_allowed },
        // The server's scope is its workspace mount: the facade answers the
        // server's `roots/list` with it (a client could answer wider).
        roots: server
            .spec
            .workspace
            .iter()
            .filter(|_| server.spec.remote.is_none())
            .map(|ws| Root {
                uri: format!("file://{}", ws.mount_path),
                name: Some("workspace".into()),
            })
            .collect(),
        upstream_auth: server
            .spec
            .remote
            .as_ref()
            .and_then(|r| r.auth.as_ref())
            .map(upstream_auth),
        ..FacadePolicy::default()
    }
}

/// The facade's `auth`: the cluster's service-account tokens always, plus
/// the profile's static tokens and JWT issuers. Only file paths reach the
/// policy (the mounts `crate::build::deployment` makes, named by
/// [`names::token_file`] and [`names::issuer_jwks_file`]): token values stay
/// in their Secrets, and the facade hashes them when it reads the files.
fn compile_auth(server: &MCPServer, auth: &ProfileAuth, cfg: &BuildConfig) -> AuthConfig {
    let urls = names::resource_urls(server, cfg);
    let mut compiled = compile_auth_for(names::token_audience(server), urls, auth, cfg);
    // The gateways that select this server (the reconcile reads them into
    // `cfg`): their public keys sit beside the policy in its ConfigMap.
    compiled.gateways = cfg
        .trusted_gateways
        .iter()
        .map(|g| TrustedGateway {
            issuer: g.issuer.clone(),
            public_key_file: crate::gateway::names::backend_public_key_file(&g.name),
            audience: server.name_any(),
            caller_issuers: g.caller_issuers.clone(),
            clock_skew_seconds: None,
        })
        .collect();
    // Reachable only through one gateway: that gateway's assertions are the
    // only way in (the profile's tokens, issuers and anonymous role stay
    // only as names its bindings use), so a caller that reaches the pod
    // around the gateway is refused even where NetworkPolicy is not
    // enforced. Without that gateway's key yet, nothing gets in.
    if let Some(only) = &server.spec.only_through_gateway {
        let issuer = crate::gateway::names::issuer(&names::namespace(server), only);
        compiled.gateways.retain(|g| g.issuer == issuer);
        compiled.gateways_only = true;
    }
    compiled
}

/// The `auth` of a facade whose service-account callers present tokens for
/// `audience` (an MCPServer's, or a gateway's) and whose resource URLs (the
/// protected-resource metadata's, and a resource-bound token's audience)
/// are `resource_urls`; no gateway is trusted.
pub(crate) fn compile_auth_for(
    audience: String,
    resource_urls: Vec<String>,
    auth: &ProfileAuth,
    cfg: &BuildConfig,
) -> AuthConfig {
    let static_tokens = (!auth.static_tokens.is_empty()).then(|| StaticTokens {
        token_files: auth
            .static_tokens
            .iter()
            .map(|t| StaticTokenFile {
                path: names::token_file(&t.secret_name, &t.key),
                subject: t.subject.clone(),
                groups: t.groups.clone(),
            })
            .collect(),
        ..StaticTokens::default()
    });
    let jwt = auth
        .jwt
        .iter()
        .enumerate()
        .map(|(i, j)| JwtIssuer {
            issuer: j.issuer.clone(),
            audiences: j.audiences.clone(),
            jwks_file: names::issuer_jwks_file(i),
            clock_skew_seconds: j.clock_skew_seconds.map(|s| s.max(0) as u64),
            groups_claim: j.groups_claim.clone(),
            username_claim: j.username_claim.clone(),
            login: j.login == Some(true),
            required_scopes: j.required_scopes.clone(),
            resource_audience: j.resource_audience == Some(true),
        })
        .collect();
    AuthConfig {
        resource_urls,
        static_tokens,
        jwt,
        service_account_tokens: Some(ServiceAccountTokens {
            issuer: cfg.service_account_issuer.clone(),
            jwks_file: names::JWKS_FILE.into(),
            audience: Some(audience),
        }),
        anonymous: None,
        gateways: Vec::new(),
        gateways_only: false,
    }
}

/// `spec.remote.auth` as the policy's `upstreamAuth`: Secret references
/// become the files the facade's Secret volumes put them at.
fn upstream_auth(auth: &RemoteAuth) -> UpstreamAuth {
    let file = |r: &KeyRef| names::upstream_secret_file(r);
    let cc = |c: &RemoteClientCredentials| ClientCredentials {
        token_url: c.token_url.clone(),
        client_id: c.client_id.clone(),
        client_secret_file: file(&c.client_secret_ref),
        scopes: c.scopes.clone(),
        audience: c.audience.clone(),
        resource: c.resource.clone(),
    };
    UpstreamAuth {
        rules: auth
            .rules
            .iter()
            .map(|r| UpstreamCredentialRule {
                issuer: r.issuer.clone(),
                subjects: r.subjects.clone(),
                roles: r.roles.clone(),
                token_file: r.token_secret_ref.as_ref().map(file),
                client_credentials: r.client_credentials.as_ref().map(cc),
                token_exchange: r.token_exchange.as_ref().map(|t| TokenExchange {
                    token_url: t.token_url.clone(),
                    client_id: t.client_id.clone(),
                    client_secret_file: t.client_secret_ref.as_ref().map(file),
                    audience: t.audience.clone(),
                    resource: t.resource.clone(),
                    scopes: t.scopes.clone(),
                    subject_token_type: t.subject_token_type.clone(),
                    requested_token_type: t.requested_token_type.clone(),
                }),
                use_facade: r.use_facade == Some(true),
                none: r.none == Some(true),
            })
            .collect(),
        facade: auth.facade.as_ref().map(|f| FacadeCredential {
            token_file: f.token_secret_ref.as_ref().map(file),
            client_credentials: f.client_credentials.as_ref().map(cc),
        }),
        header: auth.header.clone(),
    }
}

/// The policy as the YAML the ConfigMap carries.
pub fn policy_yaml(policy: &FacadePolicy) -> String {
    serde_yaml_ng::to_string(policy).expect("FacadePolicy always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::{DefaultAction, RoleBinding, ToolRule};

    fn server() -> MCPServer {
        serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: team-a}\n\
             spec: {image: img, command: [srv], toolProfileRef: {name: tp}}\n",
        )
        .unwrap()
    }

    fn profile() -> ToolProfileSpec {
        ToolProfileSpec {
            default_action: DefaultAction::Deny,
            tools: vec![ToolRule {
                name: "git_log".into(),
                alias: Some("log".into()),
                ..ToolRule::default()
            }],
            roles: vec![RoleBinding {
                service_accounts: vec!["team-a/agent".into()],
                ..RoleBinding::default()
            }],
            ..ToolProfileSpec::default()
        }
    }

    #[test]
    fn compiles_profile_server_and_audience() {
        let p = compile_policy(
            &server(),
            &profile(),
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &BuildConfig::default(),
        );
        assert_eq!(
            p.server,
            Some(ServerRef {
                namespace: "team-a".into(),
                name: "git".into()
            })
        );
        assert_eq!(p.tools, profile().tools);
        assert_eq!(p.roles, profile().roles);
        assert_eq!(p.risk_ceiling, RiskLevel::Medium);
        assert!(p.approved_tools.is_empty());
        let sa = p.auth.service_account_tokens.unwrap();
        assert_eq!(sa.audience.as_deref(), Some("mcpwarden.dev/team-a/git"));
        assert!(p.auth.anonymous.is_none(), "nobody is anonymous");
    }

    #[test]
    fn planning_mode_and_effect_tags_pass_through() {
        use mcp_warden_crds::policy::{Mode, RoleRestriction, SideEffect};
        let tools = ToolProfileSpec {
            mode: Mode::Planning,
            deny_side_effects: vec![SideEffect::Network],
            role_restrictions: vec![RoleRestriction {
                role: mcp_warden_crds::Role::Viewer,
                mode: Mode::Planning,
                deny_side_effects: vec![SideEffect::Exec],
            }],
            ..profile()
        };
        let p = compile_policy(
            &server(),
            &tools,
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &BuildConfig::default(),
        );
        assert_eq!(p.mode, Mode::Planning);
        assert_eq!(p.deny_side_effects, [SideEffect::Network]);
        assert_eq!(p.role_restrictions, tools.role_restrictions);
        let search = ToolProfileSpec {
            tool_search: mcp_warden_crds::policy::ToolSearch::Only,
            ..profile()
        };
        let p = compile_policy(
            &server(),
            &search,
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &BuildConfig::default(),
        );
        assert_eq!(p.tool_search, mcp_warden_crds::policy::ToolSearch::Only);
    }

    #[test]
    fn read_write_workspace_is_not_writable_until_approved() {
        let sandbox = SandboxProfileSpec {
            workspace_access: WorkspaceAccess::ReadWrite,
            ..Default::default()
        };
        let cfg = BuildConfig::default();
        let unapproved =
            compile_policy(&server(), &profile(), &sandbox, &Approved::default(), &cfg);
        assert!(!unapproved.sandbox.write_allowed);
        let approved = Approved {
            workspace_write: true,
            ..Default::default()
        };
        assert!(
            compile_policy(&server(), &profile(), &sandbox, &approved, &cfg)
                .sandbox
                .write_allowed
        );
    }

    #[test]
    fn a_remote_servers_tools_write_only_when_it_says_so_and_an_admin_approved() {
        let remote = |writes: bool| -> MCPServer {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: t, namespace: team-a}}\n\
                 spec: {{toolProfileRef: {{name: tp}}, remote: {{url: 'https://mcp.example.com/mcp', writes: {writes}}}}}\n"
            ))
            .unwrap()
        };
        let cfg = BuildConfig::default();
        let sandbox = SandboxProfileSpec::default();
        let all =
            Approved::from_names(&["remote.write".to_string(), "workspace.write".to_string()]);
        let writable = |server: &MCPServer, approved: &Approved| {
            compile_policy(server, &profile(), &sandbox, approved, &cfg)
                .sandbox
                .write_allowed
        };
        assert!(writable(&remote(true), &all));
        assert!(
            !writable(&remote(true), &Approved::default()),
            "not before approval"
        );
        assert!(
            !writable(&remote(false), &all),
            "not unless the server asks"
        );
        // A server's workspace approval says nothing about a remote's writes, and
        // the reverse: `remote.write` does not make a workspace writable.
        let rw = SandboxProfileSpec {
            workspace_access: WorkspaceAccess::ReadWrite,
            ..Default::default()
        };
        let remote_only = Approved::from_names(&["remote.write".to_string()]);
        assert!(
            !compile_policy(&server(), &profile(), &rw, &remote_only, &cfg)
                .sandbox
                .write_allowed
        );
    }

    #[test]
    fn approved_names_map_to_grants() {
        let names: Vec<String> = [
            "network.egress:10.0.0.0/8:443",
            "network.egress.host:pypi.org:443",
            "network.dns",
            "tool:git_push",
            "workspace.write",
            "serviceaccount.token",
            "bogus",
        ]
        .map(String::from)
        .to_vec();
        let a = Approved::from_names(&names);
        assert_eq!(a.egress, BTreeSet::from([("10.0.0.0/8".to_string(), 443)]));
        assert_eq!(a.hosts, BTreeSet::from([("pypi.org".to_string(), 443)]));
        assert!(a.dns && a.workspace_write && a.service_account_token);
        assert_eq!(a.tools, BTreeSet::from(["git_push".to_string()]));
        let p = compile_policy(
            &server(),
            &profile(),
            &SandboxProfileSpec::default(),
            &a,
            &BuildConfig::default(),
        );
        assert_eq!(p.approved_tools, ["git_push"]);
        assert_eq!(
            p.risk_ceiling,
            RiskLevel::Medium,
            "approval lists tools, never raises the ceiling"
        );
    }

    #[test]
    fn profile_auth_compiles_to_mounted_files_and_issuers() {
        let mut tools = profile();
        tools.auth = serde_yaml_ng::from_str(
            "staticTokens: [{secretName: tokens, key: ci, subject: ci-bot, groups: [ci]}]\n\
             jwt: [{issuer: 'https://login.example.com', audiences: [mcp], \
             jwks: {configMap: {name: idp}}, usernameClaim: email, clockSkewSeconds: 30}]\n",
        )
        .unwrap();
        let p = compile_policy(
            &server(),
            &tools,
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &BuildConfig::default(),
        );
        let st = p.auth.static_tokens.as_ref().expect("static tokens");
        assert!(
            st.tokens.is_empty() && st.file.is_none(),
            "no hash or value inline"
        );
        assert_eq!(st.token_files[0].path, "/etc/mcp-warden/tokens/tokens/ci");
        assert_eq!(st.token_files[0].subject, "ci-bot");
        assert_eq!(p.auth.jwt[0].issuer, "https://login.example.com");
        assert_eq!(
            p.auth.jwt[0].jwks_file,
            "/etc/mcp-warden/issuers/0/jwks.json"
        );
        assert_eq!(p.auth.jwt[0].username_claim.as_deref(), Some("email"));
        assert_eq!(p.auth.jwt[0].clock_skew_seconds, Some(30));
        assert!(p.auth.service_account_tokens.is_some(), "still accepted");
        assert_eq!(
            mcp_warden_policy::issuers(&p.auth),
            [
                "static",
                "https://login.example.com",
                "https://kubernetes.default.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn login_issuers_are_bound_to_every_url_of_the_server() {
        let mut tools = profile();
        tools.auth = serde_yaml_ng::from_str(
            "jwt: [{issuer: 'https://login.example.com', resourceAudience: true, login: true, \
             requiredScopes: [mcp], jwks: {configMap: {name: idp}}}]\n",
        )
        .unwrap();
        let mut exposed = server();
        exposed.spec.expose =
            serde_yaml_ng::from_str("{hosts: [git.mcp.example.com, git.example.org]}").unwrap();
        let p = compile_policy(
            &exposed,
            &tools,
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &BuildConfig::default(),
        );
        assert_eq!(
            p.auth.resource_urls,
            [
                "https://git.mcp.example.com/mcp",
                "http://git.team-a.svc.cluster.local:8080/mcp",
                "https://git.example.org/mcp",
            ]
        );
        let j = &p.auth.jwt[0];
        assert!(j.login && j.resource_audience && j.audiences.is_empty());
        assert_eq!(j.required_scopes, ["mcp"]);
        // The facade takes it as it is.
        mcp_warden_policy::CompiledPolicy::compile(&p).expect("compiles");
    }

    #[test]
    fn output_is_deterministic_and_loadable() {
        let cfg = BuildConfig::default();
        let a = policy_yaml(&compile_policy(
            &server(),
            &profile(),
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &cfg,
        ));
        let b = policy_yaml(&compile_policy(
            &server(),
            &profile(),
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &cfg,
        ));
        assert_eq!(a, b);
        let loaded = FacadePolicy::from_yaml_str(&a, "compiled").unwrap();
        assert_eq!(loaded.tools[0].alias.as_deref(), Some("log"));
    }
}
