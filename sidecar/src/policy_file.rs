//! Loading the policy file at start and reloading it when it changes.
//!
//! The file and the files it references (JWKS, token lists) are polled
//! (their bytes, not mtimes) because Kubernetes updates a
//! mounted ConfigMap by swapping a symlink, which file watchers miss. A new
//! policy that does not parse or validate is rejected with an error log and
//! `mcpwarden_policy_reloads_total{result="rejected"}`; the old one stays.
//! Sessions are never dropped by a reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcp_warden_crds::FacadePolicy;
use sha2::{Digest, Sha256};

use crate::gates::policy::LivePolicy;
use crate::session::context::Context;

/// Read, parse and compile a policy file (every semantic check included),
/// with the command line's `--resource-url`s added to its own.
pub fn load(path: &Path, resource_urls: &[String]) -> Result<Arc<LivePolicy>, String> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {origin}: {e}"))?;
    let mut policy = FacadePolicy::from_yaml_str(&text, &origin).map_err(|e| e.to_string())?;
    add_resource_urls(&mut policy, resource_urls);
    let base = path.parent().unwrap_or(Path::new("."));
    let mut live = LivePolicy::new(policy, base)
        .map_err(|errors| format!("invalid policy {}:\n{errors}", path.display()))?;
    if let Some(live) = Arc::get_mut(&mut live) {
        live.source_digest = Some(format!(
            "sha256:{}",
            hex::encode(Sha256::digest(text.as_bytes()))
        ));
    }
    Ok(live)
}

/// Add the command line's resource URLs to a policy's, each once: the
/// facade's names are known where it is started as well as in its policy.
pub fn add_resource_urls(policy: &mut FacadePolicy, urls: &[String]) {
    for url in urls.iter().map(|u| u.trim()).filter(|u| !u.is_empty()) {
        if !policy.auth.resource_urls.iter().any(|u| u == url) {
            policy.auth.resource_urls.push(url.to_string());
        }
    }
}

/// The bytes of the policy file and every file it references.
fn fingerprint(path: &Path, policy: &LivePolicy) -> Option<Vec<u8>> {
    let mut all = std::fs::read(path).ok()?;
    for file in &policy.referenced {
        all.extend_from_slice(b"\0");
        all.extend(std::fs::read(file).unwrap_or_default());
    }
    Some(all)
}

/// Poll `path` and swap in each valid new version.
pub async fn watch(app: Arc<Context>, path: PathBuf, every: Duration, resource_urls: Vec<String>) {
    let mut last = fingerprint(&path, &app.policy.load());
    loop {
        tokio::time::sleep(every).await;
        let Some(now) = fingerprint(&path, &app.policy.load()) else {
            continue;
        };
        if last.as_ref() == Some(&now) {
            continue;
        }
        last = Some(now);
        match load(&path, &resource_urls) {
            Ok(policy) => {
                app.registry.reassess(&policy, &app.metrics);
                app.policy.store(policy);
                app.metrics
                    .policy_reloads
                    .with_label_values(&["applied"])
                    .inc();
                app.metrics.policy_reload_failing.set(0);
                tracing::info!(path = %path.display(), "policy reloaded");
            }
            Err(e) => {
                app.metrics
                    .policy_reloads
                    .with_label_values(&["rejected"])
                    .inc();
                app.metrics.policy_reload_failing.set(1);
                tracing::error!(error = %e, "new policy rejected; keeping the previous one");
            }
        }
    }
}
