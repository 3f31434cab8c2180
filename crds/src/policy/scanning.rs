//! What the facade looks for in what passes through it: secrets in tool
//! results (redaction, with built-in and custom detectors) and hidden
//! instructions in tool definitions (the poisoning scan).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::default_true;

/// Secret redaction in results.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Redaction {
    /// Redact at all (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Built-in detectors to run; empty means all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Extra detectors: a name (used as the metric's `kind` label) and a regex.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<RedactionPattern>,
    /// Also look inside base64 text: a run of at least 24 base64 characters
    /// that decodes to text holding a secret is redacted whole (default
    /// false: it costs a decode of every such run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decode_base64: bool,
}

impl Default for Redaction {
    fn default() -> Self {
        Redaction {
            enabled: true,
            kinds: Vec::new(),
            patterns: Vec::new(),
            decode_base64: false,
        }
    }
}

/// A custom redaction detector.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedactionPattern {
    /// Short snake_case name; becomes the `kind` label of `mcpwarden_redactions_total`.
    pub name: String,
    /// Regular expression (Rust `regex` syntax) of what to redact.
    pub regex: String,
}

/// What the poisoning scan does with a suspicious tool definition.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ScanAction {
    /// Hide the tool and refuse calls until an admin pins it.
    #[default]
    Quarantine,
    /// Expose it, but log and count the finding.
    Warn,
    /// Do not scan.
    Off,
}
