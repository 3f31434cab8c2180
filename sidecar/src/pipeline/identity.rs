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
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Anonymous => "anonymous",
            AuthMethod::StaticToken => "static_token",
            AuthMethod::Jwt => "jwt",
            AuthMethod::ServiceAccount => "service_account",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `None` for anonymous callers.
    pub subject: Option<String>,
    pub groups: Vec<String>,
    /// `namespace/name` for Kubernetes service accounts.
    pub service_account: Option<String>,
    pub method: AuthMethod,
}

impl Identity {
    pub fn anonymous() -> Identity {
        Identity {
            subject: None,
            groups: Vec::new(),
            service_account: None,
            method: AuthMethod::Anonymous,
        }
    }

    /// The caller's role under `policy`; `None` means no tool is available.
    pub fn role(&self, policy: &CompiledPolicy) -> Option<Role> {
        match &self.subject {
            None => policy.roles().anonymous(),
            Some(subject) => policy.roles().role_for(
                subject,
                self.groups.iter().map(String::as_str),
                self.service_account.as_deref(),
            ),
        }
    }
}
