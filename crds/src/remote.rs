//! `MCPServer.spec.remote`: an MCP server that already runs somewhere else
//! (a SaaS API, another team's service) and is reached over HTTPS. The
//! operator runs the facade alone — the same hardening, policy, metrics and
//! audit — and the facade presents each caller's upstream credential, which
//! agents never see.
//!
//! Credentials are Secret references; the operator mounts them into the
//! facade only and compiles the rules into the policy's `upstreamAuth`.
//! Egress to the remote host (and to token endpoints) is a capability
//! (`network.egress.host:<host>:<port>`) approved like any other.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::policy::Role;

/// A remote MCP server reached over HTTPS.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RemoteServer {
    /// The server's Streamable HTTP endpoint, `https://host[:port]/path`.
    /// The facade connects to this host only; redirects are not followed.
    #[schemars(length(min = 9, max = 2048))]
    #[x_kube(validation = kube::core::Rule::new("self.startsWith('https://') && !self.contains('@') && !self.contains(' ')").message("must be an https:// URL without user information"))]
    pub url: String,
    /// How the remote's certificate is checked: the platform's roots, plus
    /// a CA bundle from a ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RemoteTls>,
    /// Which credential each caller's requests carry upstream. Absent:
    /// requests carry none (the remote needs no credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<RemoteAuth>,
    /// Private address blocks the remote (or a token endpoint) may resolve
    /// to, e.g. an in-cluster service's. Without them the facade refuses
    /// private, loopback and link-local addresses. Each block is a
    /// capability (`network.egress:<cidr>:<port>`) that needs approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(inner(length(max = 64)))]
    #[x_kube(validation = kube::core::Rule::new("self.all(c, isCIDR(c))").message("each entry must be a CIDR block such as 10.0.0.0/8"))]
    pub private_cidrs: Vec<String>,
    /// The remote's tools may change things there (create, update,
    /// delete). A capability (`remote.write`) an admin approves: until then
    /// the facade treats the remote as read-only, so write-capable tools
    /// are hidden and refused (-32006), as in a read-only sandbox.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writes: bool,
}

/// TLS to the remote.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RemoteTls {
    /// A PEM bundle of CA certificates (a ConfigMap key in the MCPServer's
    /// namespace), trusted besides the platform's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_config_map: Option<KeyRef>,
}

/// A key of a ConfigMap or Secret in the MCPServer's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct KeyRef {
    /// The object's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

/// Upstream credentials per caller.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RemoteAuth {
    /// First match wins (issuer, subjects, roles; a rule without matchers
    /// is for everyone); a caller no rule matches is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub rules: Vec<RemoteCredentialRule>,
    /// The facade's own credential, for its own requests (readiness,
    /// `server/discover`, the tool-list refresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facade: Option<RemoteFacadeCredential>,
    /// The header the credential goes in: `Authorization` (default, as
    /// `Bearer <token>`) or another (`X-Api-Key`: the token as is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9-]+$"))]
    pub header: Option<String>,
}

/// Who a rule is for and what they get: exactly one credential.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("[has(self.tokenSecretRef), has(self.clientCredentials), has(self.tokenExchange), has(self.useFacade) && self.useFacade, has(self.none) && self.none].filter(x, x).size() == 1").message("give exactly one of tokenSecretRef, clientCredentials, tokenExchange, useFacade, none"))]
pub struct RemoteCredentialRule {
    /// The caller's issuer (`static`, a JWT issuer, the service-account issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub issuer: Option<String>,
    /// The caller is one of these subjects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[schemars(inner(length(max = 256)))]
    pub subjects: Vec<String>,
    /// The caller's role is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub roles: Vec<Role>,
    /// A static token: a Secret key (per role, or per subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<KeyRef>,
    /// The facade's own OAuth 2.0 identity (client credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<RemoteClientCredentials>,
    /// The caller's token exchanged (RFC 8693) for one meant for the remote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<RemoteTokenExchange>,
    /// The facade's own credential (`facade`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_facade: Option<bool>,
    /// No credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<bool>,
}

/// The facade's own credential: exactly one.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.tokenSecretRef) != has(self.clientCredentials)").message("give exactly one of tokenSecretRef, clientCredentials"))]
pub struct RemoteFacadeCredential {
    /// A static token (a Secret key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<KeyRef>,
    /// An OAuth 2.0 client-credentials token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<RemoteClientCredentials>,
}

/// OAuth 2.0 client credentials.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RemoteClientCredentials {
    /// The token endpoint (`https://…`); its host is an egress capability.
    #[schemars(length(min = 9, max = 2048))]
    #[x_kube(validation = kube::core::Rule::new("self.startsWith('https://') && !self.contains('@')").message("must be an https:// URL without user information"))]
    pub token_url: String,
    /// The client id.
    #[schemars(length(min = 1, max = 256))]
    pub client_id: String,
    /// The client secret (a Secret key).
    pub client_secret_ref: KeyRef,
    /// `scope` values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(inner(length(max = 256)))]
    pub scopes: Vec<String>,
    /// `audience` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub audience: Option<String>,
    /// `resource` indicator (RFC 8707).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub resource: Option<String>,
}

/// OAuth 2.0 token exchange (RFC 8693) of the caller's token.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.clientId) == has(self.clientSecretRef)").message("give clientId and clientSecretRef together"))]
pub struct RemoteTokenExchange {
    /// The identity provider's token endpoint (`https://…`).
    #[schemars(length(min = 9, max = 2048))]
    #[x_kube(validation = kube::core::Rule::new("self.startsWith('https://') && !self.contains('@')").message("must be an https:// URL without user information"))]
    pub token_url: String,
    /// The facade's client id at the identity provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub client_id: Option<String>,
    /// Its client secret (a Secret key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_ref: Option<KeyRef>,
    /// `audience` of the token asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub audience: Option<String>,
    /// `resource` of the token asked for (RFC 8707).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub resource: Option<String>,
    /// `scope` values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(inner(length(max = 256)))]
    pub scopes: Vec<String>,
    /// The caller's token type (default `urn:ietf:params:oauth:token-type:access_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub subject_token_type: Option<String>,
    /// `requested_token_type`, if the identity provider needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub requested_token_type: Option<String>,
}

impl RemoteServer {
    /// The URL's host (lowercase, no brackets) and port (443 by default).
    pub fn host_port(&self) -> Option<(String, u16)> {
        host_port(&self.url)
    }

    /// Every token endpoint URL the auth rules name, sorted, once each.
    pub fn token_urls(&self) -> Vec<String> {
        let mut urls = std::collections::BTreeSet::new();
        if let Some(auth) = &self.auth {
            for rule in &auth.rules {
                if let Some(c) = &rule.client_credentials {
                    urls.insert(c.token_url.clone());
                }
                if let Some(t) = &rule.token_exchange {
                    urls.insert(t.token_url.clone());
                }
            }
            if let Some(c) = auth
                .facade
                .as_ref()
                .and_then(|f| f.client_credentials.as_ref())
            {
                urls.insert(c.token_url.clone());
            }
        }
        urls.into_iter().collect()
    }
}

/// The single-address block (`/32`, `/128`) of a host given as an address
/// rather than a name: egress to it is a CIDR capability, and the facade's
/// guard may connect to it (were it private) once that is approved.
pub fn address_block(host: &str) -> Option<String> {
    let ip: std::net::IpAddr = host.parse().ok()?;
    Some(format!("{ip}/{}", if ip.is_ipv4() { 32 } else { 128 }))
}

/// Host and port of an `https://` URL.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 443,
            None => return None,
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (authority.to_string(), 443),
        }
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports_of_urls() {
        assert_eq!(
            host_port("https://API.example.com/mcp"),
            Some(("api.example.com".into(), 443))
        );
        assert_eq!(
            host_port("https://mcp.example.com:8443"),
            Some(("mcp.example.com".into(), 8443))
        );
        assert_eq!(
            host_port("https://[2001:db8::1]:9443/x"),
            Some(("2001:db8::1".into(), 9443))
        );
        assert_eq!(address_block("10.1.2.3").as_deref(), Some("10.1.2.3/32"));
        assert_eq!(
            address_block("2001:db8::1").as_deref(),
            Some("2001:db8::1/128")
        );
        assert_eq!(address_block("mcp.example.com"), None);
        for bad in [
            "http://a/",
            "https://",
            "https://u@h/",
            "https://h:x/",
            "https://[::1]x/",
        ] {
            assert_eq!(host_port(bad), None, "{bad}");
        }
    }
}
