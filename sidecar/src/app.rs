//! The application: the top of the facade, where the layers are assembled.
//! [`App`] is the sessions' shared context ([`Context`]) plus what only the
//! top holds: the router's tables, who may use the admin port, which hosts
//! the listeners accept. The command line ([`crate::cli`]) builds it; the
//! listeners, the client transports and the admin port use it.

use std::sync::Arc;

use crate::auth::identity::Identity;
use crate::router::sessions::CreateError;
use crate::router::{probe, ChannelError, Router};
use crate::session::channel::Channel;
use crate::session::context::Context;
use crate::session::Session;

/// Which `Host` and `Origin` values the HTTP transport accepts (DNS
/// rebinding protection, as the MCP transport spec requires).
#[derive(Clone, Debug, Default)]
pub struct HostPolicy {
    /// Accepted host names (no port). Empty: any host.
    pub hosts: Vec<String>,
    /// Accepted `Origin` values; requests without `Origin` are not browsers
    /// and pass. Empty: only loopback origins.
    pub origins: Vec<String>,
}

impl HostPolicy {
    /// DNS rebinding protection: the `Host` must be one we serve, and a
    /// browser `Origin` must be allowed. Both listeners ask it (each with
    /// its own host list); `Err` is the reason, for a 403.
    pub fn check(&self, headers: &hyper::HeaderMap) -> Result<(), String> {
        use hyper::header::{HOST, ORIGIN};
        if !self.hosts.is_empty() {
            let host = headers
                .get(HOST)
                .and_then(|v| v.to_str().ok())
                .map(host_without_port)
                .unwrap_or_default();
            if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
                return Err(format!("Forbidden: Host {host:?} is not served here"));
            }
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let allowed = if self.origins.is_empty() {
                let host = origin
                    .split_once("://")
                    .map(|(_, rest)| host_without_port(rest))
                    .unwrap_or_default();
                matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1")
            } else {
                self.origins.iter().any(|o| o == origin)
            };
            if !allowed {
                return Err(format!("Forbidden: Origin {origin:?} is not allowed"));
            }
        }
        Ok(())
    }
}

fn host_without_port(host: &str) -> String {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_ascii_lowercase();
    }
    host.rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(host)
        .to_ascii_lowercase()
}

/// Who may use the admin port's `/tools` (every upstream tool, hidden ones
/// too, with full definitions) and `/approvals`. There is always an admin
/// token — the operator's (`--admin-token-file`) or one the facade made at
/// start — and it only *reads*; deciding an approval takes a person's own
/// token (see [`crate::admin`]). `hosts` guards the admin port against DNS
/// rebinding as [`App::hosts`] guards `/mcp`.
#[derive(Clone, Debug, Default)]
pub struct AdminAccess {
    pub token: String,
    pub hosts: HostPolicy,
}

impl AdminAccess {
    /// Whether `Authorization` header value `header` carries the admin token.
    pub fn is_admin_token(&self, header: Option<&str>) -> bool {
        !self.token.is_empty()
            && crate::auth::bearer(header)
                .is_some_and(|given| constant_time_eq(given.as_bytes(), self.token.as_bytes()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    // Hash both so the comparison's time says nothing about lengths either.
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

pub struct App {
    /// What every session shares (limits, policy, registry, audit, metrics).
    pub ctx: Arc<Context>,
    /// The session table and the routes to the server.
    pub router: Arc<Router>,
    /// Who may use `/tools` and `/approvals` on the admin port.
    pub admin: AdminAccess,
    pub hosts: HostPolicy,
}

impl std::ops::Deref for App {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl App {
    pub fn new(ctx: Arc<Context>, hosts: HostPolicy, admin: AdminAccess) -> Arc<App> {
        Arc::new(App {
            ctx,
            router: Arc::new(Router::default()),
            admin,
            hosts,
        })
    }

    /// Start a legacy client's session, on the route the router gives it.
    pub async fn create_session(
        &self,
        owner: Arc<Identity>,
        quota_key: String,
    ) -> Result<Arc<Session>, CreateError> {
        // A modern server serves legacy sessions from its one channel (the
        // facade makes the handshake) unless it opens legacy sessions too.
        let own_channel = probe::legacy_sessions(&self.ctx, &self.router).await;
        let hub = self.router.hub.get().filter(|_| !own_channel);
        self.router
            .sessions
            .create(&self.ctx, hub, owner, quota_key)
    }

    /// The channel a modern caller's requests go through.
    pub async fn modern_channel(
        &self,
        quota_key: &str,
        caller: &Identity,
    ) -> Result<Arc<Channel>, ChannelError> {
        self.router
            .modern_channel(&self.ctx, quota_key, caller)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_admin_token_is_the_admin_token() {
        let access = AdminAccess {
            token: "s3cret".into(),
            hosts: HostPolicy::default(),
        };
        assert!(access.is_admin_token(Some("Bearer s3cret")));
        for h in [
            None,
            Some("Bearer wrong"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            assert!(!access.is_admin_token(h), "{h:?}");
        }
        // No token configured is no way in, not an open door.
        assert!(!AdminAccess::default().is_admin_token(Some("Bearer ")));
    }

    #[test]
    fn host_parsing_handles_ports_and_ipv6() {
        assert_eq!(host_without_port("LocalHost:8080"), "localhost");
        assert_eq!(host_without_port("[::1]:8080"), "::1");
        assert_eq!(host_without_port("example.svc"), "example.svc");
    }

    #[test]
    fn a_rebinding_host_or_a_foreign_origin_is_refused() {
        use hyper::header::{HeaderValue, HOST, ORIGIN};
        let local = HostPolicy {
            hosts: vec!["127.0.0.1".into(), "localhost".into()],
            origins: Vec::new(),
        };
        let mut h = hyper::HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("127.0.0.1:9090"));
        assert!(local.check(&h).is_ok());
        h.insert(
            ORIGIN,
            HeaderValue::from_static("http://rebind.attacker.example"),
        );
        assert!(local.check(&h).is_err());
        h.remove(ORIGIN);
        h.insert(
            HOST,
            HeaderValue::from_static("rebind.attacker.example:9090"),
        );
        assert!(local.check(&h).is_err());
    }
}
