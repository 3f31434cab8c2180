//! Caller authentication and roles: how a caller proves who it is (static
//! tokens, JWT issuers, service-account tokens, a trusted gateway's signed
//! assertion, or anonymous access) and which role each identity is bound to.
//! The sidecar's authentication layer reads these before any policy decision.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::access::Role;

/// Grants a role to callers.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleBinding {
    /// The role granted.
    pub role: Role,
    /// Whose `subjects` and `groups` these are: a JWT issuer's `issuer`, the
    /// service-account issuer, or `static` for static tokens. Required when
    /// the policy accepts more than one of them: `alice` of one issuer is
    /// not `alice` of another. `serviceAccounts` always belong to the
    /// service-account issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Exact subjects (token subject or JWT `sub`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// Groups (static token groups or the JWT `groups` claim).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Kubernetes service accounts as `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
}

/// How callers prove who they are. Authenticators are tried in the order
/// static tokens, JWT issuers, service-account tokens; first match wins.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthConfig {
    /// Let callers without a token in, with this role. Absent: nobody is anonymous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<AnonymousAccess>,
    /// Static bearer tokens, stored as sha256 hashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_tokens: Option<StaticTokens>,
    /// JWT issuers verified against a JWKS file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jwt: Vec<JwtIssuer>,
    /// This facade's own URLs, one per name clients reach it by
    /// (`https://git.mcp.example.com/mcp`): the protected resource of
    /// OAuth (RFC 9728 `resource`, RFC 8707 resource indicator). A request
    /// whose `Host` matches one gets that URL's metadata at
    /// `/.well-known/oauth-protected-resource` (and the path-suffixed
    /// form) and a 401 that points there; issuers with `resourceAudience`
    /// accept only tokens whose `aud` is one of them. Empty: no metadata
    /// is served. The command line's `--resource-url` adds to these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_urls: Vec<String>,
    /// Kubernetes projected service-account tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_tokens: Option<ServiceAccountTokens>,
    /// Gateways this facade serves as a backend of: a gateway calls with an
    /// assertion it signed for this backend, naming the caller it
    /// authenticated. The caller is then who the assertion names (its
    /// issuer, subject and groups), judged by this policy's own role
    /// bindings; nothing unsigned is ever believed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<TrustedGateway>,
    /// Accept only the assertions of `gateways`: static tokens, JWT
    /// issuers, service-account tokens and `anonymous` are not used to let
    /// anyone in, though their issuers still name, in role bindings, the
    /// callers a gateway vouches for. An MCPServer's `onlyThroughGateway`
    /// sets it (with `gateways` then holding that gateway alone, or
    /// nothing until its key exists: no way in).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gateways_only: bool,
}

/// A gateway whose assertions this facade accepts.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrustedGateway {
    /// The gateway's `iss` (its `--gateway-issuer`).
    pub issuer: String,
    /// The gateway's public key (PEM: Ed25519, P-256 or RSA), whose private
    /// half only the gateway holds.
    pub public_key_file: String,
    /// The audience this backend is to the gateway: its backend name.
    /// An assertion minted for another backend is refused.
    pub audience: String,
    /// The issuers of the callers this gateway may vouch for (`static`, a
    /// JWT issuer URL, the service-account issuer). An assertion for a
    /// caller of another issuer is refused; role bindings name these.
    pub caller_issuers: Vec<String>,
    /// Allowed clock skew for `exp`/`nbf`, in seconds (default 60, at most 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
}

/// Anonymous access.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousAccess {
    /// The role anonymous callers get.
    pub role: Role,
}

/// Static bearer tokens.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticTokens {
    /// A YAML/JSON file with a list of `{sha256, subject, groups}` (a mounted Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Inline entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<StaticToken>,
    /// Tokens kept in files, one raw token per file (a mounted Secret key),
    /// each standing for a subject and its groups. A file is hashed when
    /// read and re-read when it changes (rotation needs no restart); a
    /// missing file, or a token shorter than 16 characters, is skipped with
    /// a warning and its token refused until the file is right.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_files: Vec<StaticTokenFile>,
}

/// A static token held in a file.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticTokenFile {
    /// The file holding the token (surrounding whitespace is ignored).
    pub path: String,
    /// Who holds it.
    pub subject: String,
    /// Groups of the holder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// One static token, by hash.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticToken {
    /// Hex sha256 of the token.
    pub sha256: String,
    /// Who holds it.
    pub subject: String,
    /// Groups of the holder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A JWT issuer.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtIssuer {
    /// Expected `iss`.
    pub issuer: String,
    /// Accepted `aud` values; at least one must match. Leave empty with
    /// `resourceAudience`, which replaces them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// People log in at this issuer: it is one of the
    /// `authorization_servers` of the protected-resource metadata, where
    /// MCP clients that implement the specification's authorization go
    /// to get a token for this facade.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub login: bool,
    /// Scopes every token of this issuer must carry (in its `scope`
    /// claim, space-separated, or `scp`) to use this server at all, e.g.
    /// `[mcp]`. A valid token without them gets HTTP 403
    /// `insufficient_scope` naming them. Scopes admit a caller to the
    /// server; what it may call there is its role's (`roles`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// Accept only tokens issued for this facade: `aud` must be one of
    /// `auth.resourceUrls` (the resource indicator the client asked the
    /// issuer for, RFC 8707), so a token for another server is refused.
    /// Replaces `audiences`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resource_audience: bool,
    /// Path of the JWKS document.
    pub jwks_file: String,
    /// Allowed clock skew for `exp`/`nbf`, in seconds (default 60, at most 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
    /// Claim holding the groups (default `groups`): a claim name, or a JSON
    /// pointer into the claims when it starts with `/`
    /// (`/realm_access/roles`). A string is one group, an array of strings
    /// several; anything else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Claim holding the subject that role bindings name (default `sub`;
    /// e.g. `email`, `preferred_username`), a name or a JSON pointer. A
    /// token without it as a string is refused (`missing_claim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_claim: Option<String>,
}

/// Kubernetes projected service-account tokens.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceAccountTokens {
    /// The cluster's service-account issuer (`iss`).
    pub issuer: String,
    /// Path of the issuer's JWKS (published by the operator in a ConfigMap).
    pub jwks_file: String,
    /// Required audience; default `mcpwarden.dev/<namespace>/<name>` of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}
