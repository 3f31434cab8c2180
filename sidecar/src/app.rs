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

/// Who may read the admin port's `/tools` (every upstream tool, hidden ones
/// too, with full definitions) and read and decide `/approvals`: holders of
/// the admin token; without one, anyone who can reach a loopback admin
/// listener (local use) and nobody on any other (a pod's admin port is
/// reachable by whatever scrapes it).
#[derive(Clone, Debug, Default)]
pub struct AdminAccess {
    pub token: Option<String>,
    pub loopback: bool,
}

impl AdminAccess {
    /// Whether `Authorization` header value `header` may use `/tools` and
    /// `/approvals`.
    pub fn allows(&self, header: Option<&str>) -> bool {
        match &self.token {
            Some(token) => crate::auth::bearer(header)
                .is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes())),
            None => self.loopback,
        }
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
    fn tools_needs_the_token_when_there_is_one_and_loopback_when_not() {
        let token = AdminAccess {
            token: Some("s3cret".into()),
            loopback: true,
        };
        assert!(token.allows(Some("Bearer s3cret")));
        for h in [
            None,
            Some("Bearer wrong"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            assert!(!token.allows(h), "{h:?}");
        }
        let local = AdminAccess {
            token: None,
            loopback: true,
        };
        assert!(local.allows(None));
        let exposed = AdminAccess {
            token: None,
            loopback: false,
        };
        assert!(!exposed.allows(None) && !exposed.allows(Some("Bearer x")));
    }
}
