//! The command line's gateway mode: `run --backend NAME=URL …` puts one
//! endpoint in front of several backend facades ([`crate::upstream::gateway`]).
//!
//! Where it sits: application assembly. It turns the flags into a
//! [`GatewayTarget`], and hands the link the observer that reports withheld
//! names (a metric, an audit line per change, the admin `/gateway` view).

use std::collections::BTreeMap;
use std::sync::Arc;

use clap::Args;

use crate::app::App;
use crate::upstream::gateway::{assertion, names, GatewayTarget};
use crate::upstream::{HttpTarget, UpstreamTarget};

#[derive(Args, Default)]
pub struct GatewayArgs {
    /// Gateway mode: a backend as NAME=URL, where URL is another facade's
    /// Streamable HTTP endpoint (never a raw server). Repeat per backend.
    /// Clients see the backends' tools, prompts and resource templates
    /// renamed with each backend's prefix, and resources as
    /// `NAME+<uri>`; the facade's policy (`--policy`) is the gateway's own,
    /// added to each backend's.
    #[arg(long = "backend", value_name = "NAME=URL")]
    pub backends: Vec<String>,
    /// A backend's name prefix as NAME=PREFIX (`NAME=none`: no prefix).
    /// Default `NAME__`.
    #[arg(long = "backend-prefix", value_name = "NAME=PREFIX")]
    pub prefixes: Vec<String>,
    /// Resolve a withheld name as NAME=BACKEND: the exposed name NAME (a
    /// tool, prompt or resource template, as clients see it) is served by
    /// BACKEND when backends collide on it or spell it confusably; every
    /// other backend's copy or look-alike stays withheld. A shadowing
    /// definition is never lifted (fix it at its backend).
    #[arg(long = "resolve", value_name = "NAME=BACKEND")]
    pub resolve: Vec<String>,
    /// The gateway's private key (PEM: Ed25519, P-256 or RSA). Each request
    /// to a backend then carries an assertion of the caller signed with it,
    /// for that backend alone; backends trust the public half
    /// (`auth.gateways` in their policy). Without it backends hear of no
    /// caller (they see anonymous requests).
    #[arg(long, env = "MCP_WARDEN_GATEWAY_KEY_FILE", value_name = "PEM")]
    pub gateway_key_file: Option<std::path::PathBuf>,
    /// The gateway's name in its assertions (`iss`).
    #[arg(long, default_value = "mcp-warden-gateway")]
    pub gateway_issuer: String,
    /// How long an assertion is valid, in seconds.
    #[arg(long, default_value_t = 120)]
    pub gateway_assertion_secs: u64,
    /// Address blocks (CIDRs, comma-separated) where backends may be
    /// reached, over plain `http://` too: a cluster's Service and pod
    /// ranges, where the operator's NetworkPolicies confine who reaches a
    /// backend's facade. Without it a backend is `https://`, or `http://`
    /// on loopback only, as `--upstream-url`.
    #[arg(
        long = "backend-allow-cidr",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    pub backend_allow_cidrs: Vec<String>,
}

impl GatewayArgs {
    pub fn enabled(&self) -> bool {
        !self.backends.is_empty()
    }
}

/// The gateway's target from its flags; `http` makes each backend's
/// connection (the same rules as `--upstream-url`).
pub fn target(
    args: &GatewayArgs,
    http: impl Fn(&hyper::Uri) -> anyhow::Result<HttpTarget>,
) -> anyhow::Result<UpstreamTarget> {
    let mut prefixes = BTreeMap::new();
    for p in &args.prefixes {
        let (name, prefix) = p
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--backend-prefix {p:?}: write NAME=PREFIX"))?;
        let prefix = if prefix == "none" { "" } else { prefix };
        anyhow::ensure!(
            prefixes
                .insert(name.to_string(), prefix.to_string())
                .is_none(),
            "--backend-prefix: {name:?} is given twice"
        );
    }
    let mut backends = Vec::new();
    for b in &args.backends {
        let (name, url) = b
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--backend {b:?}: write NAME=URL"))?;
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| anyhow::anyhow!("--backend {name}: {url:?} is not a URL: {e}"))?;
        let target = http(&uri).map_err(|e| anyhow::anyhow!("--backend {name}: {e}"))?;
        let prefix = prefixes
            .remove(name)
            .unwrap_or_else(|| names::default_prefix(name));
        backends.push((name.to_string(), prefix, target));
    }
    if let Some(name) = prefixes.keys().next() {
        anyhow::bail!("--backend-prefix {name}: there is no --backend {name}");
    }
    let signer = match &args.gateway_key_file {
        Some(path) => Some(
            assertion::Signer::load(
                &args.gateway_issuer,
                path,
                std::time::Duration::from_secs(args.gateway_assertion_secs.clamp(10, 600)),
            )
            .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let gateway = GatewayTarget::new(backends, signer).map_err(anyhow::Error::msg)?;
    for r in &args.resolve {
        let (name, backend) = r
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--resolve {r:?}: write NAME=BACKEND"))?;
        gateway
            .resolve(name, backend)
            .map_err(|e| anyhow::anyhow!("--resolve: {e}"))?;
    }
    Ok(UpstreamTarget::Gateway(Arc::new(gateway)))
}

/// Report withheld names and egress refusals of every backend connection.
pub fn observe(app: &Arc<App>, gateway: &GatewayTarget) {
    for backend in &gateway.backends {
        let weak = Arc::downgrade(app);
        backend.target.client.set_observer(Arc::new(move |refusal| {
            if let Some(app) = weak.upgrade() {
                app.audit.egress_refused(refusal, &app.metrics);
            }
        }));
    }
    let weak = Arc::downgrade(app);
    gateway.set_observer(Arc::new(move |conflicts, new| {
        if let Some(app) = weak.upgrade() {
            for kind in names::ConflictKind::ALL {
                let of_kind = conflicts.iter().filter(|c| c.kind == kind);
                let (resolved, withheld): (Vec<_>, Vec<_>) =
                    of_kind.partition(|c| c.resolved.is_some());
                app.metrics
                    .gateway_conflicts
                    .with_label_values(&[kind.as_str()])
                    .set(withheld.len() as i64);
                app.metrics
                    .gateway_conflicts_resolved
                    .with_label_values(&[kind.as_str()])
                    .set(resolved.len() as i64);
            }
            for c in new {
                app.audit.gateway_conflict(c, &app.metrics);
            }
        }
    }));
}
