//! Who is calling, as established by the transport's authenticator, and the
//! role the policy gives them.

use mcp_warden_crds::Role;
use mcp_warden_policy::CompiledPolicy;

/// How the caller proved who they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    Anonymous,
    StaticToken,
    Jwt,
    ServiceAccount,
    /// A trusted gateway's assertion, naming the caller it authenticated.
    Gateway,
    /// A trusted gateway's assertion of itself (its own tool list): it
    /// may list, and do more only where a role binding names it.
    GatewayItself,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Anonymous => "anonymous",
            AuthMethod::StaticToken => "static_token",
            AuthMethod::Jwt => "jwt",
            AuthMethod::ServiceAccount => "service_account",
            AuthMethod::Gateway => "gateway",
            AuthMethod::GatewayItself => "gateway_itself",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Who vouches for the subject: a JWT issuer, the service-account
    /// issuer, or `static`. `None` for anonymous callers. A subject means
    /// nothing without it: `alice` of one issuer is not `alice` of another.
    pub issuer: Option<String>,
    /// `None` for anonymous callers.
    pub subject: Option<String>,
    pub groups: Vec<String>,
    /// `namespace/name` for Kubernetes service accounts.
    pub service_account: Option<String>,
    pub method: AuthMethod,
    /// The token the caller presented, kept only for token exchange with
    /// its issuer (JWT and service-account callers). Never forwarded as is.
    pub token: Option<CallerToken>,
    /// When the credential the caller proved itself with stops being good
    /// (seconds since the epoch: a JWT's, a service-account token's or a
    /// gateway assertion's `exp`); `None` for one that does not expire (a
    /// static token, anonymous). A stream the caller holds ends then.
    pub expires_at: Option<u64>,
}

/// A caller's bearer token. It is not who the caller is (two requests of
/// one caller may carry different tokens), so it never makes identities
/// unequal; it never prints.
#[derive(Clone)]
pub struct CallerToken(std::sync::Arc<str>);

impl CallerToken {
    pub fn new(token: &str) -> CallerToken {
        CallerToken(token.into())
    }

    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl PartialEq for CallerToken {
    fn eq(&self, _: &CallerToken) -> bool {
        true
    }
}

impl Eq for CallerToken {}

impl std::fmt::Debug for CallerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallerToken([redacted])")
    }
}

impl Identity {
    pub fn anonymous() -> Identity {
        Identity {
            issuer: None,
            subject: None,
            groups: Vec::new(),
            service_account: None,
            method: AuthMethod::Anonymous,
            token: None,
            expires_at: None,
        }
    }

    /// How long the caller's credential is still good: `None` for one
    /// that does not expire, zero for one already expired.
    pub fn credential_left(&self) -> Option<std::time::Duration> {
        self.credential_left_at(std::time::SystemTime::now())
    }

    /// [`Identity::credential_left`] at `now`.
    pub fn credential_left_at(&self, now: std::time::SystemTime) -> Option<std::time::Duration> {
        let exp = std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.expires_at?);
        Some(exp.duration_since(now).unwrap_or_default())
    }

    /// The caller's role under `policy`; `None` means nothing is available.
    pub fn role(&self, policy: &CompiledPolicy) -> Option<Role> {
        match (&self.issuer, &self.subject) {
            (Some(issuer), Some(subject)) => policy.roles().role_for(
                issuer,
                subject,
                self.groups.iter().map(String::as_str),
                self.service_account.as_deref(),
            ),
            _ => policy.roles().anonymous(),
        }
    }

    /// The hash a modern client's `requestState` binds the caller with.
    pub fn state_hash(&self) -> String {
        mcp_warden_protocol::request_state::caller_hash(
            self.method.as_str(),
            self.issuer.as_deref(),
            self.subject.as_deref(),
        )
    }

    /// Whether `other` is the same caller: the same subject of the same
    /// issuer, proven the same way (anonymous callers are all one).
    pub fn same_caller(&self, other: &Identity) -> bool {
        self.issuer == other.issuer && self.subject == other.subject && self.method == other.method
    }

    /// The key session quotas count by: the issuer-qualified subject, or,
    /// for anonymous callers (who have none), where they connect from.
    pub fn quota_key(&self, peer: Option<std::net::IpAddr>) -> String {
        match (&self.issuer, &self.subject) {
            (Some(issuer), Some(subject)) => format!("{issuer}\u{0}{subject}"),
            _ => format!(
                "anonymous\u{0}{}",
                peer.map(|ip| ip.to_string()).unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn what_is_left_of_a_credential() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        let mut who = Identity::anonymous();
        assert_eq!(who.credential_left_at(at(1_000)), None);
        who.expires_at = Some(1_000);
        assert_eq!(
            who.credential_left_at(at(990)),
            Some(Duration::from_secs(10))
        );
        assert_eq!(who.credential_left_at(at(1_000)), Some(Duration::ZERO));
        assert_eq!(who.credential_left_at(at(5_000)), Some(Duration::ZERO));
    }
}
