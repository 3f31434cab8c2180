//! `ToolProfile` (short name `tp`): which upstream tools an MCPServer exposes,
//! to whom, and within which budgets.
//!
//! The rule types are the `FacadePolicy` building blocks from [`crate::policy`],
//! so the schema is written once: the operator's compiler copies a profile
//! into the policy almost field for field.

use kube::{CustomResource, KubeSchema};
use schemars::Schema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::policy::{
    DefaultAction, Limits, Mode, PromptPolicy, Redaction, ResourcePolicy, RoleBinding,
    RoleRestriction, ScanAction, SideEffect, ToolRule, ToolSearch,
};
use crate::schema::set_at;

/// Exposed names (alias, else name) are unique, in CEL. Names are already
/// unique (the list-map key), so two tools can only collide through an
/// alias: every alias must be the exposed name of exactly one tool, itself.
/// This prices at about half of comparing every exposed name with every
/// other; the API server's estimate for 256 tools is about a fifth of its
/// per-rule budget (a test against a real API server keeps it accepted).
const UNIQUE_EXPOSED: &str =
    "self.all(t, !has(t.alias) || self.exists_one(u, (has(u.alias) ? u.alias : u.name) == t.alias))";

/// A reusable tool policy: the tools an MCPServer exposes, their roles, risks,
/// argument rules and budgets. Referenced by `MCPServer.spec.toolProfileRef`.
// Several printer columns are strings: clippy reads the repeated
// `type_ = "string"` of separate `printcolumn(…)` entries as one attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "mcpwarden.dev",
    version = "v1alpha1",
    kind = "ToolProfile",
    namespaced,
    shortname = "tp",
    category = "mcp",
    category = "mcp-warden",
    derive = "PartialEq",
    derive = "Default",
    doc = "ToolProfile: which upstream tools an MCPServer exposes, to which roles, with which argument rules and budgets.",
    status = "crate::profile_status::ProfileStatus",
    printcolumn(
        name = "Default",
        type_ = "string",
        description = "What happens to tools no rule names",
        json_path = ".spec.defaultAction"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        description = "The Valid condition",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(
        name = "Used-By",
        type_ = "string",
        description = "MCPServers referencing it",
        json_path = ".status.usedBy"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::crd_bounds)]
pub struct ToolProfileSpec {
    /// What happens to an upstream tool that no entry in `tools` names:
    /// `deny` (hidden and refused, the default) or `allow`.
    #[serde(default)]
    pub default_action: DefaultAction,
    /// Per-tool rules, keyed by the upstream tool name (unique). Aliases must
    /// be snake_case, and exposed names (alias, else name) must be unique.
    #[serde(default)]
    #[schemars(length(max = 256))]
    #[schemars(transform = tool_bounds)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[x_kube(validation = kube::core::Rule::new("self.all(t, !has(t.alias) || t.alias.matches('^[a-z][a-z0-9_]{0,63}$'))").message("alias must be snake_case: a lowercase letter, then lowercase letters, digits or _, at most 64 characters"))]
    #[x_kube(validation = kube::core::Rule::new(UNIQUE_EXPOSED).message("exposed tool names (alias, else name) must be unique"))]
    #[x_kube(validation = kube::core::Rule::new("self.all(t, !has(t.pin) || t.pin.matches('^sha256:[0-9a-f]{64}$'))").message("pin must be sha256: followed by 64 lowercase hex digits"))]
    pub tools: Vec<ToolRule>,
    /// Profile-wide budgets; a tool's own `limits` override them field by field.
    /// Unset fields use the facade's built-in defaults.
    #[serde(default)]
    pub limits: Limits,
    /// Secret redaction in tool results (on by default, every built-in detector).
    #[serde(default)]
    #[schemars(transform = redaction_bounds)]
    pub redaction: Redaction,
    /// Who gets which role (`viewer`, `user`, `admin`). Nobody has a role by
    /// default, so nobody can call a tool until a binding names them.
    #[serde(default)]
    #[schemars(length(max = 64))]
    #[schemars(transform = role_bounds)]
    pub roles: Vec<RoleBinding>,
    /// `planning`: no tool with a side effect (write, delete, exec,
    /// network; inferred from annotations and names, or the tool's
    /// `sideEffects`) is listed or called. A caller may ask for planning
    /// mode itself (`_meta` `mcpwarden.dev/mode: planning` or the header
    /// `Mcp-Warden-Mode: planning`) but never leave it. Default `normal`.
    #[serde(default, skip_serializing_if = "Mode::is_normal")]
    pub mode: Mode,
    /// Effect tags no tool may have: a tool with any of them is hidden and
    /// refused (`write`, `delete`, `exec`, `network`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub deny_side_effects: Vec<SideEffect>,
    /// Further restrictions for callers of one role (`mode`,
    /// `denySideEffects`); they add to the profile's, never lift them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    #[schemars(transform = restriction_bounds)]
    pub role_restrictions: Vec<RoleRestriction>,
    /// The `search_tools(query, limit)` and `call_tool(id, arguments)`
    /// meta-tools, ranking the tools a caller may call by relevance:
    /// `off` (default), `alongside` the tools in `tools/list`, or `only`
    /// them (every allowed tool stays callable by its name).
    #[serde(default, skip_serializing_if = "ToolSearch::is_off")]
    pub tool_search: ToolSearch,
    /// Quarantine a tool whose definition changes while the server runs
    /// (default true).
    #[serde(default = "default_true")]
    pub quarantine_on_drift: bool,
    /// What the scan of tool descriptions and schemas for hidden instructions
    /// does on a finding: `quarantine` (default), `warn` or `off`.
    #[serde(default)]
    pub poisoning_scan: ScanAction,
    /// Prefix exposed descriptions with the tool's risk, e.g. `[writes files]`
    /// (default false).
    #[serde(default)]
    pub risk_prefix: bool,
    /// Which resources callers may list, read and subscribe to, by URI
    /// pattern (`file:///srv/docs/**`, `**/.env`, `note://public/*`): a
    /// matching `deny` rule hides a resource, else the highest role any
    /// matching `allow` rule asks for, else `defaultAction` (default `deny`:
    /// no resource is visible until a rule allows it).
    #[serde(default)]
    #[schemars(transform = resource_bounds)]
    pub resources: ResourcePolicy,
    /// Which prompts callers may list and get, by exact name; same
    /// precedence as `resources` (default `deny`).
    #[serde(default)]
    #[schemars(transform = prompt_bounds)]
    pub prompts: PromptPolicy,
    /// How callers authenticate besides Kubernetes service-account tokens
    /// (which are always accepted, with the audience
    /// `mcpwarden.dev/<namespace>/<server>`): static bearer tokens kept in
    /// Secrets, and JWT/OIDC issuers. With more than one issuer, a binding
    /// in `roles` that names `subjects` or `groups` must say whose they are
    /// (`issuer`: `static`, an issuer URL, or the cluster's service-account
    /// issuer): `alice` of one issuer is not `alice` of another.
    #[serde(default, skip_serializing_if = "ProfileAuth::is_empty")]
    pub auth: ProfileAuth,
}

/// Authentication a ToolProfile adds. Token values never leave their
/// Secrets: the operator mounts them into the facade, which hashes them.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProfileAuth {
    /// Static bearer tokens, one per Secret key (same namespace): the key's
    /// value is the token (at least 16 characters; a shorter or missing one
    /// is refused), its holder is `subject` of the issuer `static`. A
    /// rotated Secret is picked up without a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["secretName", "key"]))]
    pub static_tokens: Vec<SecretToken>,
    /// JWT/OIDC issuers whose tokens are accepted (RS256, ES256, EdDSA),
    /// one entry per issuer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["issuer"]))]
    pub jwt: Vec<OidcIssuer>,
}

impl ProfileAuth {
    /// Nothing configured (left out when serializing).
    pub fn is_empty(&self) -> bool {
        self.static_tokens.is_empty() && self.jwt.is_empty()
    }
}

/// A static bearer token held in a Secret key.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SecretToken {
    /// The Secret, in the ToolProfile's namespace.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub secret_name: String,
    /// The key in the Secret whose value is the token.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
    /// Who holds it: the subject role bindings name (issuer `static`).
    #[schemars(length(min = 1, max = 256))]
    pub subject: String,
    /// Groups of the holder (issuer `static`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
    pub groups: Vec<String>,
}

/// A JWT/OIDC issuer.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.resourceAudience) && self.resourceAudience ? !has(self.audiences) || size(self.audiences) == 0 : has(self.audiences) && size(self.audiences) > 0").message("give audiences, or resourceAudience: true instead of them"))]
pub struct OidcIssuer {
    /// The issuer URL, exactly as in the tokens' `iss` (e.g.
    /// `https://login.example.com/realms/team-a`); the name role bindings
    /// use in `issuer`.
    #[schemars(length(min = 9, max = 512), regex(pattern = r"^https://[^\s]+$"))]
    pub issuer: String,
    /// Accepted `aud` values; a token must carry at least one. Left out
    /// with `resourceAudience`, which replaces them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 256)))]
    pub audiences: Vec<String>,
    /// Accept only tokens issued for this server: `aud` must be one of
    /// its URLs (`status.endpoint`, the in-cluster URL, `https://<host>/mcp`
    /// of each `expose.hosts` entry) — the resource indicator (RFC 8707) an
    /// MCP client asks the issuer for — so a token for another server is
    /// refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_audience: Option<bool>,
    /// People log in at this issuer: the server's protected-resource
    /// metadata lists it in `authorization_servers`, so MCP clients that
    /// implement the specification's authorization find it from the 401
    /// and get a token themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<bool>,
    /// Scopes every token of this issuer must carry (`scope` or `scp`) to
    /// use the server at all, e.g. `[mcp]`; without them HTTP 403
    /// `insufficient_scope`. What a caller may call is its role's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 16),
        inner(length(min = 1, max = 128), regex(pattern = r#"^[^\s"\\]+$"#))
    )]
    pub required_scopes: Vec<String>,
    /// Where the issuer's signing keys (a JWKS document) come from: a
    /// ConfigMap, or, when left out, the issuer itself: the operator reads
    /// its discovery document (`<issuer>/.well-known/openid-configuration`)
    /// and the `jwks_uri` it names, over HTTPS, and publishes the keys into
    /// the ConfigMap `<server>-issuers` (an MCPGateway's profile:
    /// `<gateway>-issuers`), looked at again every ten minutes; until they
    /// are read, `Degraded` says `IssuerKeysUnavailable`. The operator then
    /// needs egress to the issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks: Option<JwksSource>,
    /// The claim that names the caller (default `sub`; e.g. `email` or
    /// `preferred_username`), or a JSON pointer into the claims when it
    /// starts with `/`. A token without it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub username_claim: Option<String>,
    /// The claim holding the caller's groups (default `groups`), or a JSON
    /// pointer (`/realm_access/roles`): a string is one group, a list of
    /// strings several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub groups_claim: Option<String>,
    /// Allowed clock skew for `exp` and `nbf`, in seconds (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 300))]
    pub clock_skew_seconds: Option<i32>,
}

/// The source of an issuer's JWKS.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct JwksSource {
    /// A ConfigMap (same namespace) holding the JWKS document; the facade
    /// re-reads it when it changes. Until it exists, the issuer's tokens
    /// are refused.
    pub config_map: ConfigMapKey,
}

/// A key of a ConfigMap in the ToolProfile's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKey {
    /// The ConfigMap's name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,
    /// The key holding the document (default `jwks.json`).
    #[serde(default = "default_jwks_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

fn default_jwks_key() -> String {
    "jwks.json".into()
}

fn default_true() -> bool {
    true
}

// Bounds for the shared `FacadePolicy` building blocks as this CRD embeds
// them. The API server prices every CEL rule from these (a longer `name` or
// a longer list is a more expensive rule); everything not named here gets
// `crate::schema::crd_bounds`' defaults.

/// `tools[]`: the fields the CEL rules read are bounded tightly — `name` and
/// `alias` as MCP clients show tool names, `pin` exactly `sha256:` + 64 hex.
fn tool_bounds(schema: &mut Schema) {
    let item = "/items/properties";
    set_at(
        schema,
        &format!("{item}/name"),
        &[("minLength", json!(1)), ("maxLength", json!(128))],
    );
    set_at(
        schema,
        &format!("{item}/alias"),
        &[("maxLength", json!(64))],
    );
    set_at(schema, &format!("{item}/pin"), &[("maxLength", json!(71))]);
    set_at(
        schema,
        &format!("{item}/sideEffects"),
        &[("maxItems", json!(4))],
    );
    set_at(
        schema,
        &format!("{item}/arguments"),
        &[("maxItems", json!(32))],
    );
    let arg = format!("{item}/arguments/items");
    set_at(
        schema,
        &arg,
        &[(
            "description",
            json!("A rule for one argument of a tool: values pass, need a person's approval (check) or are refused."),
        )],
    );
    set_at(
        schema,
        &format!("{arg}/properties/name"),
        &[("minLength", json!(1)), ("maxLength", json!(256))],
    );
    set_at(
        schema,
        &format!("{arg}/properties/root"),
        &[("maxLength", json!(1024))],
    );
    for list in ["allow", "check", "deny"] {
        let list = format!("{arg}/properties/{list}");
        set_at(schema, &list, &[("maxItems", json!(64))]);
        set_at(
            schema,
            &format!("{list}/items"),
            &[("maxLength", json!(1024))],
        );
    }
}

/// `roles[]`: subjects, groups and `namespace/name` service accounts.
fn role_bounds(schema: &mut Schema) {
    set_at(
        schema,
        "/items/properties/issuer",
        &[("maxLength", json!(512))],
    );
    for (list, len) in [("subjects", 256), ("groups", 256), ("serviceAccounts", 317)] {
        let list = format!("/items/properties/{list}");
        set_at(schema, &list, &[("maxItems", json!(128))]);
        set_at(
            schema,
            &format!("{list}/items"),
            &[("maxLength", json!(len))],
        );
    }
}

/// `roleRestrictions[]`: one entry per role at most, four tags at most.
fn restriction_bounds(schema: &mut Schema) {
    set_at(
        schema,
        "/items/properties/denySideEffects",
        &[("maxItems", json!(4))],
    );
}

/// `resources.rules[]`: URI globs, in order (not a map: order matters).
fn resource_bounds(schema: &mut Schema) {
    set_at(schema, "/properties/rules", &[("maxItems", json!(128))]);
    set_at(
        schema,
        "/properties/rules/items/properties/uri",
        &[("minLength", json!(1)), ("maxLength", json!(1024))],
    );
}

/// `prompts.rules[]`: one rule per prompt name (a map list keyed by name).
fn prompt_bounds(schema: &mut Schema) {
    set_at(
        schema,
        "/properties/rules",
        &[
            ("maxItems", json!(128)),
            ("x-kubernetes-list-type", json!("map")),
            ("x-kubernetes-list-map-keys", json!(["name"])),
        ],
    );
    set_at(
        schema,
        "/properties/rules/items/properties/name",
        &[("minLength", json!(1)), ("maxLength", json!(128))],
    );
}

/// `redaction`: detector names become metric labels, so they stay short.
fn redaction_bounds(schema: &mut Schema) {
    set_at(schema, "/properties/kinds", &[("maxItems", json!(32))]);
    set_at(
        schema,
        "/properties/kinds/items",
        &[("maxLength", json!(64))],
    );
    set_at(schema, "/properties/patterns", &[("maxItems", json!(32))]);
    set_at(
        schema,
        "/properties/patterns/items/properties/name",
        &[("maxLength", json!(64))],
    );
    set_at(
        schema,
        "/properties/patterns/items/properties/regex",
        &[("maxLength", json!(1024))],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crd_has_short_name_and_rules() {
        let crd = ToolProfile::crd();
        assert_eq!(crd.spec.names.short_names, Some(vec!["tp".to_string()]));
        let text = serde_json::to_string(&crd).unwrap();
        assert!(text.contains("exists_one"), "uniqueness rule missing");
        assert!(
            text.contains("x-kubernetes-list-map-keys"),
            "tools must be a map list"
        );
    }

    /// What the API server's CEL cost estimate depends on: the strings the
    /// rules read are short, every list is bounded, and no `uint64` format
    /// (which the API server warns about) is left.
    #[test]
    fn rule_inputs_are_bounded_and_formats_known() {
        let crd = serde_json::to_value(ToolProfile::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let tool = &spec["properties"]["tools"]["items"]["properties"];
        assert_eq!(tool["name"]["maxLength"], 128);
        assert_eq!(tool["alias"]["maxLength"], 64);
        assert_eq!(tool["pin"]["maxLength"], 71);
        let text = serde_json::to_string(spec).unwrap();
        assert!(!text.contains("uint"), "unknown integer format left");
        fn lists_bounded(v: &serde_json::Value, at: &str) {
            match v {
                serde_json::Value::Object(m) => {
                    if m.get("type") == Some(&"array".into()) {
                        assert!(m.contains_key("maxItems"), "{at} has no maxItems");
                    }
                    if m.get("type") == Some(&"string".into()) && !m.contains_key("enum") {
                        assert!(m.contains_key("maxLength"), "{at} has no maxLength");
                    }
                    m.iter()
                        .for_each(|(k, c)| lists_bounded(c, &format!("{at}/{k}")));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|c| lists_bounded(c, at)),
                _ => {}
            }
        }
        lists_bounded(spec, "spec");
    }

    #[test]
    fn empty_spec_is_safe() {
        let spec: ToolProfileSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec.default_action, DefaultAction::Deny);
        assert!(spec.quarantine_on_drift);
        assert!(spec.redaction.enabled);
        assert!(spec.roles.is_empty());
    }
}
