//! Compile a `FacadePolicy` into the indexed, precompiled [`CompiledPolicy`].
//!
//! Flow: `FacadePolicy` (crds) --[`CompiledPolicy::compile`]--> every
//! [`ConfigError`] at once, or a policy whose globs, regexes, command
//! patterns, redaction detectors, limits and role index are ready for the
//! per-message hot path ([`crate::decide`]).
//!
//! ```text
//!   CompiledPolicy
//!   ├─ tools: Vec<ToolPolicy>  ◄── by_upstream: upstream name → index
//!   │                          ◄── by_exposed:  alias (or name) → index
//!   ├─ profile_limits (for tools without a rule, under defaultAction: allow)
//!   ├─ approved (upstream names above riskCeiling an admin approved)
//!   ├─ resources, prompts (rules for the other things a server offers)
//!   ├─ redactor, roles
//! ```
//!
//! Decisions made here (beyond syntax):
//! - **Empty allowlist**: `defaultAction: deny` with no `tools`, no
//!   resource and no prompt rules is [`ConfigError::EmptyAllowlist`]. So an
//!   empty document, which parses as deny-all, does not compile: a facade
//!   that can never expose anything is a mistake, not a policy. `defaultAction: allow` with no tools
//!   is fine (that is `FacadePolicy::allow_all`).
//! - **Write-capable tools under `defaultAction: allow`**: a tool without a
//!   rule is exposed with required role `user`, the profile's limits, no
//!   argument rules, and its *inferred* risk and writes, and it passes the
//!   same gates as a listed tool: above `riskCeiling` it needs
//!   `approvedTools`; write-capable it needs `sandbox.writeAllowed`
//!   (-32006). So with the operator's defaults (ceiling `medium`, no write
//!   grant) an unlisted write tool stays hidden, and only `allow_all`'s
//!   explicit grant exposes it. A rule is needed for argument rules,
//!   aliases, pins or another role.
//! - **Names**: aliases are snake_case; exposed names (alias, else upstream
//!   name) are unique; an alias may not equal another rule's upstream name
//!   (shadowing). An unlisted upstream tool whose name is some rule's alias
//!   is hidden under `defaultAction: allow` (the alias wins).

use std::collections::{HashMap, HashSet};

use mcp_warden_crds::policy::{
    DefaultAction, FacadePolicy, Mode, RiskLevel, Role, ScanAction, SideEffect, API_VERSION, KIND,
};

use crate::args::ArgRules;
use crate::error::{is_snake_case, ConfigError};
use crate::limits::ResolvedLimits;
use crate::pin::is_pin;
use crate::redact::Redactor;
use crate::resources::{PromptRules, ResourceRules};
use crate::risk::Effects;
use crate::roles::RoleIndex;

/// One listed tool, compiled (a read-only view for callers).
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    /// The upstream name.
    pub upstream: String,
    /// The name agents see (alias, else upstream name).
    pub exposed: String,
    /// Description override.
    pub description: Option<String>,
    /// Least role that may see and call it.
    pub required_role: Role,
    /// Profile risk (combined with the annotation floor at decision time).
    pub risk: Option<RiskLevel>,
    /// Profile `writes` (combined with annotations at decision time).
    pub writes: Option<bool>,
    /// Profile `sideEffects` (combined with annotations at decision time).
    pub side_effects: Option<Vec<SideEffect>>,
    /// Expected definition hash.
    pub pin: Option<String>,
    /// Argument rules.
    pub arguments: ArgRules,
    /// Resolved budgets.
    pub limits: ResolvedLimits,
}

/// A validated, indexed policy. Cheap to share (`Arc`) and immutable.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    pub(crate) default_action: DefaultAction,
    pub(crate) risk_ceiling: RiskLevel,
    pub(crate) approved: HashSet<String>,
    pub(crate) write_allowed: bool,
    pub(crate) risk_prefix: bool,
    pub(crate) quarantine_on_drift: bool,
    pub(crate) poisoning_scan: ScanAction,
    pub(crate) tools: Vec<ToolPolicy>,
    pub(crate) by_upstream: HashMap<String, usize>,
    pub(crate) by_exposed: HashMap<String, usize>,
    pub(crate) profile_limits: ResolvedLimits,
    pub(crate) resources: ResourceRules,
    pub(crate) prompts: PromptRules,
    /// What a caller of each role may not run, the profile's joined with
    /// the role's (index: viewer, user, admin).
    pub(crate) restrictions: [Restriction; 3],
    redactor: Redactor,
    roles: RoleIndex,
}

impl CompiledPolicy {
    /// Validate everything and precompile. Returns every problem found.
    pub fn compile(p: &FacadePolicy) -> Result<CompiledPolicy, Vec<ConfigError>> {
        let mut errors = Vec::new();
        if p.api_version != API_VERSION || p.kind != KIND {
            errors.push(ConfigError::invalid(
                "apiVersion",
                format!(
                    "expected {API_VERSION} {KIND}, found {} {}",
                    p.api_version, p.kind
                ),
            ));
        }
        let nothing_else = p.resources.default_action == DefaultAction::Deny
            && p.resources.rules.is_empty()
            && p.prompts.default_action == DefaultAction::Deny
            && p.prompts.rules.is_empty();
        if p.default_action == DefaultAction::Deny && p.tools.is_empty() && nothing_else {
            errors.push(ConfigError::EmptyAllowlist);
        }
        ResolvedLimits::validate(&p.limits, "limits", &mut errors);
        let profile_limits = ResolvedLimits::resolve(None, &p.limits);
        profile_limits.check_coherent("limits", &mut errors);

        let mut tools = Vec::with_capacity(p.tools.len());
        let mut by_upstream: HashMap<String, usize> = HashMap::with_capacity(p.tools.len());
        let mut by_exposed: HashMap<String, usize> = HashMap::with_capacity(p.tools.len());
        // tools[k] came from p.tools[rule_index[k]] (duplicates are skipped).
        let mut rule_index: Vec<usize> = Vec::with_capacity(p.tools.len());
        for (i, rule) in p.tools.iter().enumerate() {
            let at = format!("tools[{i}]");
            if rule.name.is_empty() {
                errors.push(ConfigError::invalid(
                    format!("{at}.name"),
                    "must not be empty",
                ));
            }
            if by_upstream.contains_key(&rule.name) {
                errors.push(ConfigError::DuplicateTool {
                    at: format!("{at}.name"),
                    name: rule.name.clone(),
                });
                continue;
            }
            if let Some(alias) = &rule.alias {
                if !is_snake_case(alias) {
                    errors.push(ConfigError::BadAlias {
                        at: format!("{at}.alias"),
                        alias: alias.clone(),
                    });
                }
            }
            let exposed = rule.alias.clone().unwrap_or_else(|| rule.name.clone());
            if let Some(&j) = by_exposed.get(&exposed) {
                errors.push(ConfigError::NameCollision {
                    at: exposed_at(&at, rule.alias.is_some()),
                    name: exposed.clone(),
                    other: format!("the exposed name of tools[{}]", rule_index[j]),
                });
            }
            if let Some(pin) = &rule.pin {
                if !is_pin(pin) {
                    errors.push(ConfigError::BadPin {
                        at: format!("{at}.pin"),
                    });
                }
            }
            if let Some(l) = &rule.limits {
                ResolvedLimits::validate(l, &format!("{at}.limits"), &mut errors);
            }
            let limits = ResolvedLimits::resolve(rule.limits.as_ref(), &p.limits);
            if rule.limits.is_some() {
                limits.check_coherent(&format!("{at}.limits"), &mut errors);
            }
            let arguments = ArgRules::compile(&rule.arguments, &at, &mut errors);
            rule_index.push(i);
            by_upstream.insert(rule.name.clone(), tools.len());
            by_exposed.entry(exposed.clone()).or_insert(tools.len());
            tools.push(ToolPolicy {
                upstream: rule.name.clone(),
                exposed,
                description: rule.description.clone(),
                required_role: rule.required_role,
                risk: rule.risk,
                writes: rule.writes,
                side_effects: rule.side_effects.clone(),
                pin: rule.pin.clone(),
                arguments,
                limits,
            });
        }
        // An alias may not be another rule's upstream name (tool shadowing).
        for (k, t) in tools.iter().enumerate() {
            if t.exposed != t.upstream {
                if let Some(&j) = by_upstream.get(&t.exposed) {
                    if j != k {
                        let (i, j) = (rule_index[k], rule_index[j]);
                        errors.push(ConfigError::NameCollision {
                            at: format!("tools[{i}].alias"),
                            name: t.exposed.clone(),
                            other: format!("the upstream name of tools[{j}]"),
                        });
                    }
                }
            }
        }
        for (i, root) in p.roots.iter().enumerate() {
            let absolute = root
                .uri
                .strip_prefix("file://")
                .is_some_and(|path| path.starts_with('/'));
            if !absolute {
                errors.push(ConfigError::invalid(
                    format!("roots[{i}].uri"),
                    format!("{:?} must be a file:// URI of an absolute path", root.uri),
                ));
            }
        }
        for (i, name) in p.approved_tools.iter().enumerate() {
            if name.is_empty() {
                errors.push(ConfigError::invalid(
                    format!("approvedTools[{i}]"),
                    "must not be empty",
                ));
            }
        }
        let redactor = Redactor::new(&p.redaction).unwrap_or_else(|e| {
            errors.extend(e);
            Redactor::disabled()
        });
        let resources = ResourceRules::compile(&p.resources, &mut errors);
        let prompts = PromptRules::compile(&p.prompts, &mut errors);
        let roles = RoleIndex::compile(&p.roles, &p.auth, &mut errors);
        let restrictions = Restriction::compile(p, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(CompiledPolicy {
            default_action: p.default_action,
            risk_ceiling: p.risk_ceiling,
            approved: p.approved_tools.iter().cloned().collect(),
            write_allowed: p.sandbox.write_allowed,
            risk_prefix: p.risk_prefix,
            quarantine_on_drift: p.quarantine_on_drift,
            poisoning_scan: p.poisoning_scan,
            tools,
            by_upstream,
            by_exposed,
            profile_limits,
            resources,
            prompts,
            restrictions,
            redactor,
            roles,
        })
    }

    /// What callers of `role` may not run (the profile's and the role's).
    pub fn restriction(&self, role: Role) -> Restriction {
        self.restrictions[role_index(role)]
    }

    /// The listed tools, in policy order.
    pub fn tools(&self) -> &[ToolPolicy] {
        &self.tools
    }

    /// Budgets for tools without a rule (and the profile-wide values).
    pub fn profile_limits(&self) -> &ResolvedLimits {
        &self.profile_limits
    }

    /// The secret redactor for results.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Role bindings.
    pub fn roles(&self) -> &RoleIndex {
        &self.roles
    }

    /// What the poisoning scan should do (`Off`: do not scan).
    pub fn poisoning_scan(&self) -> ScanAction {
        self.poisoning_scan
    }

    /// Whether definitions changing in the sidecar's life are quarantined.
    pub fn quarantine_on_drift(&self) -> bool {
        self.quarantine_on_drift
    }
}

/// Side effects a caller may not run: planning mode (none at all) and the
/// effect tags denied outright.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restriction {
    /// Planning mode: no tool with any side effect.
    pub planning: bool,
    /// Effect tags no tool may have.
    pub denied: Effects,
}

impl Restriction {
    /// Per role (viewer, user, admin): the profile's `mode` and
    /// `denySideEffects` joined with the role's entry in
    /// `roleRestrictions` (a role's entry only adds; one entry per role).
    fn compile(p: &FacadePolicy, errors: &mut Vec<ConfigError>) -> [Restriction; 3] {
        let profile = Restriction {
            planning: p.mode == Mode::Planning,
            denied: Effects::from_tags(&p.deny_side_effects),
        };
        let mut out = [profile; 3];
        let mut seen = [false; 3];
        for (i, r) in p.role_restrictions.iter().enumerate() {
            let k = role_index(r.role);
            if std::mem::replace(&mut seen[k], true) {
                errors.push(ConfigError::invalid(
                    format!("roleRestrictions[{i}].role"),
                    "a second entry for this role: give each role one entry",
                ));
            }
            out[k].planning |= r.mode == Mode::Planning;
            out[k].denied = out[k]
                .denied
                .union(Effects::from_tags(&r.deny_side_effects));
        }
        out
    }
}

fn role_index(role: Role) -> usize {
    match role {
        Role::Viewer => 0,
        Role::User => 1,
        Role::Admin => 2,
    }
}

fn exposed_at(at: &str, alias: bool) -> String {
    if alias {
        format!("{at}.alias")
    } else {
        format!("{at}.name")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(yaml: &str) -> Result<CompiledPolicy, Vec<ConfigError>> {
        let p = FacadePolicy::from_yaml_str(
            &format!("apiVersion: mcpwarden.dev/v1alpha1\nkind: FacadePolicy\n{yaml}"),
            "t",
        )
        .unwrap();
        CompiledPolicy::compile(&p)
    }

    fn errors(yaml: &str) -> Vec<String> {
        compile(yaml)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn empty_allowlist_under_deny_is_an_error() {
        assert_eq!(
            CompiledPolicy::compile(&FacadePolicy::default()).unwrap_err(),
            [ConfigError::EmptyAllowlist]
        );
        assert!(compile("defaultAction: allow\n").is_ok());
        assert!(CompiledPolicy::compile(&FacadePolicy::allow_all()).is_ok());
    }

    #[test]
    fn roots_are_absolute_file_uris() {
        assert!(
            compile("defaultAction: allow\nroots: [{uri: \"file:///workspace\", name: ws}]\n")
                .is_ok()
        );
        for bad in [
            "/workspace",
            "file://workspace",
            "https://x/y",
            "file:relative",
        ] {
            let errs = errors(&format!(
                "defaultAction: allow\nroots: [{{uri: \"{bad}\"}}]\n"
            ));
            assert!(
                errs.iter().any(|e| e.contains("roots[0].uri")),
                "{bad}: {errs:?}"
            );
        }
    }

    #[test]
    fn a_good_policy_compiles_and_indexes_names() {
        let p = compile(
            "tools:\n  - name: read-file\n    alias: read_file\n    limits: {maxArgBytes: 10}\n  - name: echo\nlimits: {callsPerMinute: 5}\n",
        )
        .unwrap();
        assert_eq!(p.by_exposed["read_file"], 0);
        assert_eq!(p.by_upstream["read-file"], 0);
        assert_eq!(p.by_exposed["echo"], 1);
        assert_eq!(p.tools[0].limits.max_arg_bytes, 10);
        assert_eq!(p.tools[0].limits.calls_per_minute, 5);
        assert_eq!(p.tools[1].limits.max_arg_bytes, 65_536);
    }

    #[test]
    fn name_problems_are_all_reported() {
        let e = errors(
            "tools:\n  - name: a\n    alias: Bad-Alias\n  - name: b\n    alias: c\n  - name: c\n  - name: d\n    alias: b2\n  - name: e\n    alias: b2\n  - name: a\n  - name: f\n    alias: g\n  - name: g\n    alias: h\n",
        );
        assert_eq!(
            e,
            [
                r#"tools[0].alias: alias "Bad-Alias" must be snake_case (^[a-z][a-z0-9_]*$, at most 64 characters)"#,
                r#"tools[2].name: name "c" collides with the exposed name of tools[1]"#,
                r#"tools[4].alias: name "b2" collides with the exposed name of tools[3]"#,
                r#"tools[5].name: a rule for upstream tool "a" already exists"#,
                r#"tools[1].alias: name "c" collides with the upstream name of tools[2]"#,
                r#"tools[6].alias: name "g" collides with the upstream name of tools[7]"#,
            ]
        );
    }

    #[test]
    fn pins_patterns_limits_redaction_roles_are_checked_together() {
        let e = compile(&format!(
            "tools:\n  - name: a\n    pin: sha256:{}\n  - name: b\n    pin: sha256:XYZ\n    limits: {{maxOutputBytes: 0}}\n    arguments:\n      - {{name: p, kind: path, allow: ['a[']}}\nredaction:\n  patterns: [{{name: Bad, regex: x}}]\nroles:\n  - {{role: admin}}\n",
            "0".repeat(64)
        ))
        .unwrap_err();
        let reasons: Vec<&str> = e.iter().map(|x| x.reason()).collect();
        assert_eq!(
            reasons,
            ["bad_pin", "invalid", "bad_pattern", "invalid", "invalid"]
        );
    }
}
