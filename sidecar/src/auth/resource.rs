//! The facade as an OAuth protected resource: the metadata document a
//! client reads to find where to log in (RFC 9728), and the
//! `WWW-Authenticate` challenge of a refused request that points to it.
//!
//! Sits beside the authenticators of one policy version: the HTTP front
//! door asks [`ProtectedResource::for_host`] which of the facade's URLs a
//! request used (by its `Host`, never guessed from it: an unknown host has
//! no metadata), serves [`ProtectedResource::document`] for it, and puts
//! [`ProtectedResource::challenge`] on its 401 and 403 answers.

use mcp_warden_crds::AuthConfig;
use mcp_warden_policy::login::{self, ResourceUrl, METADATA_PATH};
use serde_json::{json, Value};

use crate::auth::AuthFailure;

/// The realm of the facade's challenges.
pub const REALM: &str = "mcp-warden";

/// What the policy says about the facade as a protected resource.
#[derive(Debug, Clone, Default)]
pub struct ProtectedResource {
    /// The facade's URLs (`auth.resourceUrls`), in order.
    pub urls: Vec<ResourceUrl>,
    /// The issuers people log in at (`login: true`).
    authorization_servers: Vec<String>,
    /// The scopes a client logging in asks for.
    scopes: Vec<String>,
}

impl ProtectedResource {
    pub fn from_config(cfg: &AuthConfig) -> ProtectedResource {
        ProtectedResource {
            urls: login::resource_urls(cfg),
            authorization_servers: login::login_issuers(cfg)
                .into_iter()
                .map(str::to_string)
                .collect(),
            scopes: login::login_scopes(cfg)
                .into_iter()
                .map(str::to_string)
                .collect(),
        }
    }

    /// The URL a request with this `Host` used: the first one serving it.
    pub fn for_host(&self, host: Option<&str>) -> Option<&ResourceUrl> {
        let host = host?;
        self.urls.iter().find(|u| u.serves_host(host))
    }

    /// The resource whose metadata `path` asks for: the root form
    /// (`/.well-known/oauth-protected-resource`) names the host's first
    /// URL, the path-suffixed form the host's URL with that path.
    /// `None`: not a metadata path, or no URL of ours.
    pub fn for_metadata_path(&self, host: Option<&str>, path: &str) -> Option<&ResourceUrl> {
        let suffix = path.strip_prefix(METADATA_PATH)?;
        let host = host?;
        let mut serving = self.urls.iter().filter(|u| u.serves_host(host));
        if suffix.is_empty() || suffix == "/" {
            return serving.next();
        }
        let suffix = suffix.trim_end_matches('/');
        serving.find(|u| u.path() == suffix)
    }

    /// Whether `path` is a metadata path at all (answered 404 when no URL
    /// of ours matches, rather than as an unknown path of the MCP port).
    pub fn is_metadata_path(path: &str) -> bool {
        path == METADATA_PATH || path.starts_with(&format!("{METADATA_PATH}/"))
    }

    /// The protected-resource metadata of `url` (RFC 9728 §2): `resource`
    /// is the URL the client used, so a client's check that it matches
    /// the URL it called holds.
    pub fn document(&self, url: &ResourceUrl) -> Value {
        let mut doc = json!({
            "resource": url.url,
            "bearer_methods_supported": ["header"],
            "resource_name": REALM,
        });
        if !self.authorization_servers.is_empty() {
            doc["authorization_servers"] = json!(self.authorization_servers);
        }
        if !self.scopes.is_empty() {
            doc["scopes_supported"] = json!(self.scopes);
        }
        doc
    }

    /// The `WWW-Authenticate` value for a refused request that used `url`
    /// (RFC 6750 §3, RFC 9728 §5.1): a missing token gets no error code, a
    /// refused one `invalid_token`, a token without the scopes
    /// `insufficient_scope` and the scopes it needs; each names the
    /// metadata when the request's host is one of ours, and a first
    /// challenge the scopes to ask for when logging in.
    pub fn challenge(&self, url: Option<&ResourceUrl>, failure: &AuthFailure) -> String {
        let mut out = format!("Bearer realm=\"{REALM}\"");
        let scope = match failure {
            AuthFailure::Missing => (!self.scopes.is_empty()).then(|| self.scopes.join(" ")),
            AuthFailure::Invalid(_) => {
                out.push_str(", error=\"invalid_token\"");
                (!self.scopes.is_empty()).then(|| self.scopes.join(" "))
            }
            AuthFailure::InsufficientScope(scopes) => {
                out.push_str(", error=\"insufficient_scope\"");
                Some(scopes.clone())
            }
        };
        if let Some(scope) = scope {
            out.push_str(&format!(", scope=\"{scope}\""));
        }
        if let Some(url) = url {
            out.push_str(&format!(", resource_metadata=\"{}\"", url.metadata_url()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource() -> ProtectedResource {
        let cfg: AuthConfig = serde_yaml_ng::from_str(
            "resourceUrls: ['https://git.mcp.example.com/mcp', 'http://git.team-a.svc.cluster.local:8080/mcp']\n\
             jwt:\n\
             - {issuer: 'https://login.example.com', jwksFile: j, resourceAudience: true, login: true, requiredScopes: [mcp]}\n\
             - {issuer: 'https://ci.example.com', audiences: [ci], jwksFile: j, requiredScopes: [deploy]}\n",
        )
        .unwrap();
        ProtectedResource::from_config(&cfg)
    }

    #[test]
    fn one_document_per_host_naming_the_url_it_used() {
        let r = resource();
        let outside = r
            .for_metadata_path(
                Some("git.mcp.example.com"),
                "/.well-known/oauth-protected-resource/mcp",
            )
            .unwrap();
        let doc = r.document(outside);
        assert_eq!(doc["resource"], "https://git.mcp.example.com/mcp");
        assert_eq!(
            doc["authorization_servers"],
            json!(["https://login.example.com"])
        );
        assert_eq!(doc["scopes_supported"], json!(["mcp"]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
        let inside = r
            .for_metadata_path(
                Some("git.team-a.svc.cluster.local:8080"),
                "/.well-known/oauth-protected-resource",
            )
            .unwrap();
        assert_eq!(
            r.document(inside)["resource"],
            "http://git.team-a.svc.cluster.local:8080/mcp"
        );
        // An unknown host, or a path of another resource, has none.
        for (host, path) in [
            (
                Some("evil.example.com"),
                "/.well-known/oauth-protected-resource/mcp",
            ),
            (None, "/.well-known/oauth-protected-resource"),
            (
                Some("git.mcp.example.com"),
                "/.well-known/oauth-protected-resource/other",
            ),
            (Some("git.mcp.example.com"), "/mcp"),
        ] {
            assert!(r.for_metadata_path(host, path).is_none(), "{host:?} {path}");
        }
        assert!(ProtectedResource::is_metadata_path(
            "/.well-known/oauth-protected-resource/x"
        ));
        assert!(!ProtectedResource::is_metadata_path(
            "/.well-known/oauth-protected-resourcex"
        ));
    }

    #[test]
    fn challenges_point_to_the_metadata_of_the_host_used() {
        let r = resource();
        let url = r.for_host(Some("git.mcp.example.com"));
        assert_eq!(
            r.challenge(url, &AuthFailure::Missing),
            "Bearer realm=\"mcp-warden\", scope=\"mcp\", resource_metadata=\"https://git.mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            r.challenge(url, &AuthFailure::Invalid("wrong_audience")),
            "Bearer realm=\"mcp-warden\", error=\"invalid_token\", scope=\"mcp\", resource_metadata=\"https://git.mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            r.challenge(url, &AuthFailure::InsufficientScope("deploy".into())),
            "Bearer realm=\"mcp-warden\", error=\"insufficient_scope\", scope=\"deploy\", resource_metadata=\"https://git.mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        // No URL of ours for this host: nothing to point to.
        assert_eq!(
            r.challenge(r.for_host(Some("127.0.0.1:8080")), &AuthFailure::Missing),
            "Bearer realm=\"mcp-warden\", scope=\"mcp\""
        );
        let bare = ProtectedResource::default();
        assert_eq!(
            bare.challenge(None, &AuthFailure::Missing),
            "Bearer realm=\"mcp-warden\""
        );
    }
}
