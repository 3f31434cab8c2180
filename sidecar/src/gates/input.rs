//! The input gate of tools/call: the call's arguments against the input
//! schema of the tool as the facade last saw it, without coercion.
//!
//! Where it sits: a gate over the call alone (the compiled-validator cache,
//! the observed tool, the arguments); the tools/call step
//! ([`crate::session::steps::call`]) runs it after the budget, and before
//! asking anyone to approve a call that could not succeed.

use mcp_warden_policy::{Denial, ObservedTool, SchemaCache, SchemaError, Violation};
use serde_json::Value;

use super::refusal::Refusal;

/// The call's arguments against the tool's input schema: no coercion,
/// every violation listed.
pub fn validate(
    schemas: &SchemaCache,
    tool: &ObservedTool,
    exposed: &str,
    arguments: &Value,
) -> Result<(), Refusal> {
    let Err(e) = schemas.validate_input(&tool.hash, &tool.definition, arguments) else {
        return Ok(());
    };
    let violations = match e {
        SchemaError::Invalid(v) => v,
        other => vec![Violation {
            instance_path: String::new(),
            keyword: "schema".into(),
            message: other.to_string(),
        }],
    };
    Err(Refusal::Policy(Denial::InvalidParams {
        tool: exposed.to_string(),
        violations,
    }))
}
