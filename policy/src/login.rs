//! The protected resource: the facade's own URLs (`auth.resourceUrls`,
//! OAuth's RFC 9728 `resource` and RFC 8707 resource indicator) and the
//! issuer fields that let clients log in by themselves (`login`,
//! `requiredScopes`, `resourceAudience`).
//!
//! Flow: the policy's `auth` --[`check`]--> config errors (operator and
//! facade alike); the facade then matches a request's `Host` to one
//! [`ResourceUrl`] ([`ResourceUrl::serves_host`]) to serve its metadata and
//! point a 401 at it, and checks a resource-bound token's `aud` with
//! [`ResourceUrl::is`]. Pure: URLs are compared as RFC 8707 and the MCP
//! authorization spec say (scheme and host without case, the default port
//! implied, no trailing slash), never resolved or fetched.

use mcp_warden_crds::AuthConfig;

use crate::ConfigError;

/// The well-known path of protected-resource metadata (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// One of the facade's URLs, taken apart for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUrl {
    /// The URL as configured: what the metadata's `resource` says.
    pub url: String,
    scheme: String,
    host: String,
    port: u16,
    /// The path without a trailing slash (`""` for the root).
    path: String,
}

impl ResourceUrl {
    /// Parse an absolute `http`/`https` URL without query, fragment or
    /// user info; `Err` says what is wrong.
    pub fn parse(url: &str) -> Result<ResourceUrl, &'static str> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or("must be an absolute URL (https://host/mcp)")?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "https" => 443,
            "http" => 80,
            _ => return Err("must be an http or https URL"),
        };
        if url.contains(|c: char| c == '"' || c == '\\' || c.is_control()) {
            return Err("must not contain quotes, backslashes or control characters");
        }
        if rest.contains(['?', '#']) {
            return Err("must not have a query or fragment");
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err("must not carry user info");
        }
        let (host, port) = split_authority(authority, default_port).ok_or("has no valid host")?;
        if path.contains(char::is_whitespace) {
            return Err("must not contain spaces");
        }
        Ok(ResourceUrl {
            url: url.to_string(),
            scheme,
            host,
            port,
            path: path.trim_end_matches('/').to_string(),
        })
    }

    /// Whether a request's `Host` (or HTTP/2 authority) names this URL's
    /// host and port.
    pub fn serves_host(&self, host_header: &str) -> bool {
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        split_authority(host_header.trim(), default_port)
            .is_some_and(|(host, port)| host == self.host && port == self.port)
    }

    /// The path of the resource (`/mcp`; `""` for the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where this resource's metadata is (RFC 9728 §3.1: the well-known
    /// path goes between the host and the resource's path).
    pub fn metadata_url(&self) -> String {
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = if self.port == default_port {
            String::new()
        } else {
            format!(":{}", self.port)
        };
        format!("{}://{host}{port}{METADATA_PATH}{}", self.scheme, self.path)
    }

    /// Whether a token's audience (or resource) names this URL.
    pub fn is(&self, aud: &str) -> bool {
        ResourceUrl::parse(aud).is_ok_and(|other| {
            other.scheme == self.scheme
                && other.host == self.host
                && other.port == self.port
                && other.path == self.path
        })
    }
}

/// `host[:port]` or `[v6]:port`, the host lower-cased.
fn split_authority(authority: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains(['/', ' ']) {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// The resource URLs of `auth`, in order; unparsable ones are left out
/// (they are [`check`]'s errors).
pub fn resource_urls(auth: &AuthConfig) -> Vec<ResourceUrl> {
    auth.resource_urls
        .iter()
        .filter_map(|u| ResourceUrl::parse(u).ok())
        .collect()
}

/// The issuers people log in at (the metadata's `authorization_servers`).
pub fn login_issuers(auth: &AuthConfig) -> Vec<&str> {
    auth.jwt
        .iter()
        .filter(|j| j.login)
        .map(|j| j.issuer.as_str())
        .collect()
}

/// The scopes a client logging in should ask for: the login issuers'
/// required scopes, each once, in order.
pub fn login_scopes(auth: &AuthConfig) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for scope in auth
        .jwt
        .iter()
        .filter(|j| j.login)
        .flat_map(|j| &j.required_scopes)
    {
        if !out.contains(&scope.as_str()) {
            out.push(scope);
        }
    }
    out
}

/// The resource URLs and the login fields of the issuers, validated.
pub(crate) fn check(auth: &AuthConfig, errors: &mut Vec<ConfigError>) {
    for (i, url) in auth.resource_urls.iter().enumerate() {
        if let Err(why) = ResourceUrl::parse(url) {
            errors.push(ConfigError::invalid(
                format!("auth.resourceUrls[{i}]"),
                format!("{url:?} {why}"),
            ));
        }
    }
    for (i, j) in auth.jwt.iter().enumerate() {
        let at = format!("auth.jwt[{i}]");
        if j.resource_audience {
            if !j.audiences.is_empty() {
                errors.push(ConfigError::invalid(
                    format!("{at}.audiences"),
                    "resourceAudience replaces audiences (a token for a shared audience could be one for another server); leave them out",
                ));
            }
            if auth.resource_urls.is_empty() {
                errors.push(ConfigError::invalid(
                    format!("{at}.resourceAudience"),
                    "needs auth.resourceUrls (or --resource-url): the audiences a token must name",
                ));
            }
        } else if j.audiences.is_empty() || j.audiences.iter().any(|a| a.trim().is_empty()) {
            errors.push(ConfigError::invalid(
                format!("{at}.audiences"),
                "needs at least one non-empty audience (or resourceAudience: true)",
            ));
        }
        if j.required_scopes.iter().any(|s| {
            s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\')
        }) {
            errors.push(ConfigError::invalid(
                format!("{at}.requiredScopes"),
                "a scope is one non-empty word without quotes or backslashes",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::JwtIssuer;

    #[test]
    fn a_url_serves_its_own_host_and_port_only() {
        let url = ResourceUrl::parse("https://Git.MCP.example.com/mcp").unwrap();
        assert!(url.serves_host("git.mcp.example.com"));
        assert!(url.serves_host("GIT.mcp.example.com:443"));
        assert!(!url.serves_host("git.mcp.example.com:8443"));
        assert!(!url.serves_host("evil.example.com"));
        assert!(!url.serves_host(""));
        let inside = ResourceUrl::parse("http://git.team-a.svc.cluster.local:8080/mcp").unwrap();
        assert!(inside.serves_host("git.team-a.svc.cluster.local:8080"));
        assert!(!inside.serves_host("git.team-a.svc.cluster.local"));
        let v6 = ResourceUrl::parse("http://[::1]:8080/mcp").unwrap();
        assert!(v6.serves_host("[::1]:8080"));
        assert_eq!(
            v6.metadata_url(),
            "http://[::1]:8080/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn metadata_sits_between_host_and_path() {
        let url = ResourceUrl::parse("https://mcp.example.com:443/team/mcp/").unwrap();
        assert_eq!(
            url.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/team/mcp"
        );
        assert_eq!(url.path(), "/team/mcp");
        let root = ResourceUrl::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            root.metadata_url(),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn audiences_compare_as_canonical_urls() {
        let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        assert!(url.is("https://mcp.example.com/mcp"));
        assert!(url.is("HTTPS://MCP.example.com:443/mcp/"));
        assert!(!url.is("https://mcp.example.com/other"));
        assert!(!url.is("https://mcp.example.com"));
        assert!(!url.is("http://mcp.example.com/mcp"));
        assert!(!url.is("https://mcp.example.com.evil/mcp"));
        assert!(!url.is("mcp"));
    }

    #[test]
    fn bad_urls_and_login_fields_are_errors() {
        for bad in [
            "mcp.example.com/mcp",
            "ftp://h/mcp",
            "https://h/mcp#x",
            "https://h/mcp?a=b",
            "https://u@h/mcp",
            "https:///mcp",
            "https://h/m\"cp",
        ] {
            assert!(ResourceUrl::parse(bad).is_err(), "{bad}");
        }
        let issuer = |aud: &[&str], bound: bool, scopes: &[&str]| JwtIssuer {
            issuer: "https://idp".into(),
            audiences: aud.iter().map(|s| s.to_string()).collect(),
            jwks_file: "j".into(),
            resource_audience: bound,
            required_scopes: scopes.iter().map(|s| s.to_string()).collect(),
            ..JwtIssuer::default()
        };
        let mut errors = Vec::new();
        check(
            &AuthConfig {
                resource_urls: vec!["https://ok/mcp".into(), "nope".into()],
                jwt: vec![
                    issuer(&["mcp"], true, &["mcp"]),
                    issuer(&[], false, &["two words"]),
                    issuer(&[], true, &[]),
                ],
                ..AuthConfig::default()
            },
            &mut errors,
        );
        let ats: Vec<String> = errors
            .iter()
            .map(|e| e.to_string().split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            ats,
            [
                "auth.resourceUrls[1]",
                "auth.jwt[0].audiences",
                "auth.jwt[1].audiences",
                "auth.jwt[1].requiredScopes",
            ]
        );
        let mut errors = Vec::new();
        check(
            &AuthConfig {
                jwt: vec![issuer(&[], true, &[])],
                ..AuthConfig::default()
            },
            &mut errors,
        );
        assert!(errors[0].to_string().contains("needs auth.resourceUrls"));
    }

    #[test]
    fn login_issuers_and_their_scopes() {
        let auth: AuthConfig = serde_json::from_str(
            r#"{"jwt": [
              {"issuer": "https://a", "audiences": ["x"], "jwksFile": "j", "login": true, "requiredScopes": ["mcp", "read"]},
              {"issuer": "https://b", "audiences": ["x"], "jwksFile": "j", "requiredScopes": ["admin"]},
              {"issuer": "https://c", "audiences": ["x"], "jwksFile": "j", "login": true, "requiredScopes": ["mcp"]}]}"#,
        )
        .unwrap();
        assert_eq!(login_issuers(&auth), ["https://a", "https://c"]);
        assert_eq!(login_scopes(&auth), ["mcp", "read"]);
    }
}
