//! The command line's gateway mode: `run --backend NAME=URL …` puts one
//! endpoint in front of several backend facades ([`crate::upstream::gateway`]).
//!
//! Where it sits: application assembly. It turns the flags into a
//! [`GatewayTarget`], and hands the link the observer that reports withheld
//! names (a metric, an audit line per change, the admin `/gateway` view).

use std::collections::BTreeMap;
use std::path::Path;
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
    /// A backend's CA as NAME=FILE (a PEM bundle): the backend's
    /// `https://` certificate is trusted by that bundle and nothing else
    /// (neither the platform's roots nor `--upstream-ca-file`), and no
    /// other backend trusts it. The operator passes the CA of a backend
    /// served with `expose.tls`.
    #[arg(long = "backend-ca", value_name = "NAME=FILE")]
    pub backend_cas: Vec<String>,
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
/// connection (the same rules as `--upstream-url`), with the backend's own
/// CA when `--backend-ca` names one.
pub fn target(
    args: &GatewayArgs,
    http: impl Fn(&hyper::Uri, Option<&Path>) -> anyhow::Result<HttpTarget>,
) -> anyhow::Result<UpstreamTarget> {
    let mut cas: BTreeMap<&str, &Path> = BTreeMap::new();
    for c in &args.backend_cas {
        let (name, file) = c
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--backend-ca {c:?}: write NAME=FILE"))?;
        anyhow::ensure!(
            cas.insert(name, Path::new(file)).is_none(),
            "--backend-ca: {name:?} is given twice"
        );
    }
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
        let ca = cas.remove(name);
        anyhow::ensure!(
            ca.is_none() || uri.scheme_str() == Some("https"),
            "--backend-ca {name}: the backend is not https://"
        );
        let target = http(&uri, ca).map_err(|e| anyhow::anyhow!("--backend {name}: {e}"))?;
        let prefix = prefixes
            .remove(name)
            .unwrap_or_else(|| names::default_prefix(name));
        backends.push((name.to_string(), prefix, target));
    }
    if let Some(name) = prefixes.keys().next() {
        anyhow::bail!("--backend-prefix {name}: there is no --backend {name}");
    }
    if let Some(name) = cas.keys().next() {
        anyhow::bail!("--backend-ca {name}: there is no --backend {name}");
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

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;

    use bytes::Bytes;
    use clap::Parser;
    use http_body_util::{BodyExt, Full};
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

    use super::super::{http_target, Cli, Command, RunArgs};
    use crate::net::{pool::Pool, Endpoint};
    use crate::upstream::UpstreamTarget;

    /// A CA's PEM, and a server config for `localhost` signed by it.
    fn pki() -> (String, Arc<rustls::ServerConfig>) {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        (ca.pem(), Arc::new(server))
    }

    /// A TLS server on loopback answering every request `ok`.
    async fn serve(config: Arc<rustls::ServerConfig>) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(|_| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("ok"))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        port
    }

    fn run_args(argv: &[&str]) -> RunArgs {
        let mut all = vec!["mcp-warden-sidecar", "run"];
        all.extend(argv);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Run(args) => args,
            _ => unreachable!("run"),
        }
    }

    fn targets(args: &RunArgs) -> anyhow::Result<Vec<(String, crate::upstream::HttpTarget)>> {
        match super::target(&args.gateway, |url, ca| http_target(url, args, true, ca))? {
            UpstreamTarget::Gateway(g) => Ok(g
                .backends
                .iter()
                .map(|b| (b.name.clone(), b.target.clone()))
                .collect()),
            _ => unreachable!("a gateway"),
        }
    }

    async fn get(target: &crate::upstream::HttpTarget) -> Result<String, String> {
        let pool = Pool::new(target.client.clone(), Endpoint::of(&target.uri).unwrap());
        let req = hyper::Request::get("/mcp")
            .header(hyper::header::HOST, pool.endpoint().authority.as_str())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let mut ex = pool.send(req).await.map_err(|e| e.to_string())?;
        let body = ex.conn.drive(ex.resp.into_body().collect()).await;
        Ok(String::from_utf8_lossy(&body.unwrap().to_bytes()).into_owned())
    }

    /// Each backend trusts its own `--backend-ca` and nothing else: the
    /// wrong CA is refused even when `--upstream-ca-file` holds the right
    /// one, which a backend without `--backend-ca` does trust.
    #[tokio::test]
    async fn a_backend_trusts_its_own_ca_alone() {
        let (right, server) = pki();
        let (wrong, _) = pki();
        let dir = tempfile::tempdir().unwrap();
        let (right_file, wrong_file) = (dir.path().join("right.pem"), dir.path().join("wrong.pem"));
        std::fs::write(&right_file, right).unwrap();
        std::fs::write(&wrong_file, wrong).unwrap();
        let port = serve(server).await;
        let url = format!("https://localhost:{port}/mcp");
        let (git, fs, time) = (
            format!("git={url}"),
            format!("fs={url}"),
            format!("time={url}"),
        );
        let (git_ca, fs_ca) = (
            format!("git={}", wrong_file.display()),
            format!("fs={}", right_file.display()),
        );
        let args = run_args(&[
            "--backend",
            &git,
            "--backend-ca",
            &git_ca,
            "--backend",
            &fs,
            "--backend-ca",
            &fs_ca,
            "--backend",
            &time,
            "--upstream-ca-file",
            right_file.to_str().unwrap(),
            "--backend-allow-cidr",
            "127.0.0.1/32",
        ]);
        let mut got = Vec::new();
        for (name, target) in targets(&args).unwrap() {
            got.push((name, get(&target).await));
        }
        let [(git, refused), (fs, served), (time, also)] = &got[..] else {
            panic!("{got:?}")
        };
        assert_eq!(
            (git.as_str(), fs.as_str(), time.as_str()),
            ("git", "fs", "time")
        );
        let refused = refused.as_ref().unwrap_err();
        assert!(refused.contains("certificate"), "{refused}");
        assert_eq!(served.as_deref(), Ok("ok"));
        assert_eq!(also.as_deref(), Ok("ok"), "--upstream-ca-file for the rest");
    }

    #[test]
    fn a_backend_ca_names_an_https_backend_it_has() {
        let err = |argv: &[&str]| match targets(&run_args(argv)) {
            Ok(_) => panic!("{argv:?} is refused"),
            Err(e) => e.to_string(),
        };
        let plain = [
            "--backend",
            "git=http://git.a.svc:8080/mcp",
            "--backend-allow-cidr",
            "10.0.0.0/8",
        ];
        let e = err(&[&plain[..], &["--backend-ca", "git=/x.pem"]].concat());
        assert!(
            e.contains("--backend-ca git: the backend is not https://"),
            "{e}"
        );
        let e = err(&[&plain[..], &["--backend-ca", "fs=/x.pem"]].concat());
        assert!(
            e.contains("--backend-ca fs: there is no --backend fs"),
            "{e}"
        );
        let https = ["--backend", "git=https://git.a.svc:8080/mcp"];
        let e = err(&[&https[..], &["--backend-ca", "git=/nonexistent.pem"]].concat());
        assert!(
            e.contains("cannot read the CA bundle /nonexistent.pem"),
            "{e}"
        );
    }
}
