//! The live policy: the document as loaded, its compiled form and its
//! authenticators, swapped atomically on reload so a message always sees one
//! consistent version.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_warden_crds::FacadePolicy;
use mcp_warden_policy::CompiledPolicy;

use crate::auth::Authenticator;
use crate::credentials::UpstreamCredentials;

pub struct LivePolicy {
    pub doc: FacadePolicy,
    pub compiled: CompiledPolicy,
    pub auth: Authenticator,
    /// What the facade presents upstream per caller (`upstreamAuth`).
    pub upstream_credentials: Option<UpstreamCredentials>,
    /// Files the policy reads besides itself (JWKS, token lists), watched
    /// for changes like the policy file.
    pub referenced: Vec<PathBuf>,
    /// `sha256:<hex>` of the policy file's bytes, when it came from a file:
    /// `/tools` reports it, so the operator knows which policy a facade
    /// runs (a mounted ConfigMap reaches each pod in its own time).
    pub source_digest: Option<String>,
}

impl LivePolicy {
    /// Compile `doc`; files it names are read relative to `base`. The error
    /// lists every problem, one per line.
    pub fn new(doc: FacadePolicy, base: &Path) -> Result<Arc<LivePolicy>, String> {
        let compiled = CompiledPolicy::compile(&doc).map_err(|errors| {
            errors
                .iter()
                .map(|e| format!("  - {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        let auth = Authenticator::from_config(&doc.auth, doc.server.as_ref(), base)
            .map_err(|e| format!("  - auth: {e}"))?;
        let upstream_credentials = match &doc.upstream_auth {
            Some(cfg) => Some(
                UpstreamCredentials::compile(cfg, base)
                    .map_err(|e| format!("  - upstreamAuth: {e}"))?,
            ),
            None => None,
        };
        let mut referenced: Vec<PathBuf> = doc
            .auth
            .jwt
            .iter()
            .map(|j| base.join(&j.jwks_file))
            .collect();
        referenced.extend(
            doc.auth
                .service_account_tokens
                .iter()
                .map(|s| base.join(&s.jwks_file)),
        );
        referenced.extend(
            doc.auth
                .static_tokens
                .iter()
                .filter_map(|s| s.file.as_ref())
                .map(|f| base.join(f)),
        );
        referenced.extend(
            doc.auth
                .static_tokens
                .iter()
                .flat_map(|s| &s.token_files)
                .map(|f| base.join(&f.path)),
        );
        if let Some(cfg) = &doc.upstream_auth {
            referenced.extend(UpstreamCredentials::referenced(cfg, base));
        }
        Ok(Arc::new(LivePolicy {
            doc,
            compiled,
            auth,
            upstream_credentials,
            referenced,
            source_digest: None,
        }))
    }
}
