//! The live policy: the document as loaded plus its compiled form, swapped
//! atomically on reload so a message always sees one consistent version.

use std::sync::Arc;

use mcp_warden_crds::FacadePolicy;
use mcp_warden_policy::{CompiledPolicy, ConfigError};

pub struct LivePolicy {
    pub doc: FacadePolicy,
    pub compiled: CompiledPolicy,
}

impl LivePolicy {
    pub fn new(doc: FacadePolicy) -> Result<Arc<LivePolicy>, Vec<ConfigError>> {
        let compiled = CompiledPolicy::compile(&doc)?;
        Ok(Arc::new(LivePolicy { doc, compiled }))
    }
}

/// One line per configuration error, for logs and startup failures.
pub fn describe(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(|e| format!("  - {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}
