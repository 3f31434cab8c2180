//! mcp-warden's pure policy core, shared by the operator (validation) and
//! the sidecar (enforcement). No I/O, no async, no Kubernetes.
//!
//! Module map, in the order a message meets them:
//!
//! ```text
//!  FacadePolicy (crds) ──compile──► CompiledPolicy ............ compile.rs
//!        │                            ├─ ToolPolicy per rule, ResolvedLimits  limits.rs
//!        │                            ├─ ArgRules (path.rs, command.rs, shell.rs) args.rs
//!        │                            ├─ Redactor (detectors: secrets.rs)      redact.rs
//!        │                            └─ RoleIndex                             roles.rs
//!  upstream tools/list entry ──► ObservedTool (hash, inferred risk) ... tools.rs
//!        pin.rs (definition_hash) · risk.rs (infer) · poison.rs (scan)
//!        └─► CompiledPolicy::assess ─► quarantine state
//!  tools/list: by_upstream ─┐  (+ planning mode, effect tags: risk.rs)
//!  tools/call: by_exposed  ─┴► decide ─► Decision::{Allow(Grant), Deny(Denial)}  decision.rs
//!  resources/*, prompts/*, completion ──► decide_resource / decide_template
//!        / decide_prompt (same role rule as tools)                   resources.rs
//!  tools/call arguments ──► SchemaCache::validate_input (-32602)        schema.rs
//!  tools/list schemas   ──► clean_schema                                schema.rs
//!  results ──► Redactor::redact_json · SchemaCache::validate_output
//!  search_tools ──► ToolIndex (BM25 over the caller's visible tools)    search.rs
//!  a gateway's names ──► Names (prefixes, collisions, look-alikes,
//!        shadowing, the explicit mapping)                        gateway_names.rs
//! ```
//!
//! Errors: [`ConfigError`] (a policy that cannot compile), [`Denial`] (a
//! hidden tool or refused call, with its stable JSON-RPC error code),
//! [`SchemaError`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod command;
mod compile;
mod decision;
mod denial;
mod error;
pub mod gateway_names;
mod limits;
pub mod login;
mod path;
pub mod pin;
pub mod poison;
mod redact;
mod resources;
pub mod risk;
mod roles;
mod schema;
pub mod search;
mod secrets;
mod shell;
mod tools;

pub use args::{channel_strength, ArgRules, ArgVerdict, RuleHit};
pub use compile::{CompiledPolicy, Restriction, ToolPolicy};
pub use decision::{
    decide, describe, risk_name, role_name, Approval, Asks, Decision, Denial, ErrorCode, Grant,
    Query, RuleReason,
};
pub use error::ConfigError;
pub use limits::ResolvedLimits;
pub use pin::{canonical_json, definition_hash};
pub use poison::{Finding, FindingKind};
pub use redact::{RedactionCounts, Redactor, BUILTIN_KINDS};
pub use resources::{Hidden, PromptRules, ResourceRules};
pub use roles::{issuers, RoleIndex};
pub use schema::{clean_schema, SchemaCache, SchemaError, Violation, DROPPED_KEYWORDS};
pub use tools::{ObservedTool, Quarantine, Target};

/// The policy data types this crate consumes.
pub use mcp_warden_crds::policy as spec;
