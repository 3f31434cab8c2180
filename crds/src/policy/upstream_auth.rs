//! Upstream credentials: which credential the facade presents to an HTTP(S)
//! upstream for each caller, after the policy let the call through (a static
//! token file, OAuth client credentials, or the caller's token exchanged).
//! A caller's own token is never forwarded.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::access::Role;

/// The credentials the facade presents to the upstream MCP server (an
/// HTTP(S) upstream), chosen per caller after policy. Secrets are files (a
/// mounted Secret), re-read when they change; no credential ever reaches a
/// log, an audit line or an error.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamAuth {
    /// Which credential a caller's requests carry: the first rule that
    /// matches the caller wins; a caller no rule matches is refused
    /// (`no_upstream_credential`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<UpstreamCredentialRule>,
    /// The credential of the facade's own requests (readiness probe,
    /// `server/discover`, the tool-list refresh): a `tokenFile` or
    /// `clientCredentials`. Absent: they carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facade: Option<FacadeCredential>,
    /// The header the credential goes in: `Authorization` (default) carries
    /// `Bearer <token>`; any other header (e.g. `X-Api-Key`) the token as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// Who a rule is for, and the credential they get. Every matcher given must
/// hold; a rule without matchers is for everyone. Exactly one credential.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamCredentialRule {
    /// The caller's issuer (`static`, a JWT issuer, the service-account issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The caller is one of these subjects (of `issuer`, if given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// The caller's role is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<Role>,
    /// A static token: the file's content (trimmed), e.g. a mounted Secret key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// The facade's own identity: an OAuth 2.0 client-credentials token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<ClientCredentials>,
    /// The caller's own upstream identity: the caller's token exchanged
    /// (RFC 8693) at the identity provider for one meant for the upstream.
    /// Only for callers that presented a JWT or service-account token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchange>,
    /// The facade's own credential (`facade`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_facade: bool,
    /// No credential: the upstream needs none from these callers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub none: bool,
}

/// The facade's own upstream credential: exactly one of the two.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FacadeCredential {
    /// A static token file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// An OAuth 2.0 client-credentials token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<ClientCredentials>,
}

/// OAuth 2.0 client credentials (RFC 6749 §4.4): the token is cached until
/// shortly before it expires.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientCredentials {
    /// The token endpoint (`https://…`; `http://` only on loopback).
    pub token_url: String,
    /// The facade's client id.
    pub client_id: String,
    /// A file holding the client secret (a mounted Secret key).
    pub client_secret_file: String,
    /// `scope` values asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `audience` parameter, for identity providers that take one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// `resource` indicator (RFC 8707), e.g. the upstream's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// OAuth 2.0 token exchange (RFC 8693): the caller's token, exchanged for
/// one whose audience is the upstream; cached per caller token until
/// shortly before it expires.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenExchange {
    /// The identity provider's token endpoint.
    pub token_url: String,
    /// The facade's client id at the identity provider, if it authenticates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// A file holding the client secret (with `clientId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<String>,
    /// `audience` of the token asked for (the upstream, by the IdP's name for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// `resource` of the token asked for (RFC 8707), e.g. the upstream's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `scope` values asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// What the caller's token is (default
    /// `urn:ietf:params:oauth:token-type:access_token`; `…:jwt` for IdPs
    /// that want that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_token_type: Option<String>,
    /// `requested_token_type`, if the IdP needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_token_type: Option<String>,
}
