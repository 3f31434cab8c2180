//! The egress proxy mode of the facade binary (`mcp-warden-sidecar egress`):
//! an HTTP forward proxy that lets each MCP server reach exactly the
//! `host:port` pairs approved for it, and nothing else.
//!
//! ```text
//! server pod (HTTPS_PROXY=http://ns%2Fserver:token@proxy:3128)
//!    └▶ listener (HTTP/1.1, header timeout) ─▶ handler: credential ─▶ approved pair
//!         ─▶ dial (resolve here, SSRF guard on every address, connect to what was judged)
//!         ─▶ CONNECT: relay bytes end to end │ plain GET: forward
//!         ─▶ audit line (stdout) + mcpwarden_egress_* metrics
//! clients.json (polled) ─▶ who may ask, with which token, for what
//! ```
//!
//! It sits in the app layer: an assembly of the transports' resolver and
//! guard ([`crate::net`]) with an audit trail and metrics of its own. Bounds
//! per client: connections open at once (more is a `429`, never a queue),
//! bytes per connection, idle time and connect time.

pub mod audit;
pub mod clients;
pub mod dial;
pub mod handler;
pub mod metrics;
pub mod relay;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use audit::EgressAudit;
use clients::Clients;
use dial::Dialer;
use metrics::EgressMetrics;

/// How long a client has to send its request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP connect to the upstream, all its addresses together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the clients file is looked at.
const CLIENTS_POLL: Duration = Duration::from_secs(3);
/// How long open tunnels may go on after SIGTERM before the process ends:
/// a download in flight gets a moment, a rollout or uninstall never waits
/// for the kubelet's grace period (as PID 1 the process would otherwise
/// ignore SIGTERM and be killed only when that period ends).
const DRAIN: Duration = Duration::from_secs(5);

/// `egress`: the flags, each also an `MCP_WARDEN_EGRESS_*` variable.
#[derive(clap::Args, Debug)]
pub struct EgressArgs {
    /// Where the proxy listens.
    #[arg(long, env = "MCP_WARDEN_EGRESS_LISTEN", default_value = "0.0.0.0:3128")]
    pub listen: SocketAddr,
    /// The clients file (JSON, version 1): each client's name, the sha256
    /// of its token, and its approved hosts, address blocks and plain-HTTP
    /// hosts. Re-read every 3 s; a bad file keeps the last good set.
    #[arg(long, env = "MCP_WARDEN_EGRESS_CLIENTS_FILE")]
    pub clients_file: PathBuf,
    /// Serve `/metrics` and `/healthz` here (off by default).
    #[arg(long, env = "MCP_WARDEN_EGRESS_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Where the name servers are listed (the proxy resolves names itself).
    #[arg(
        long,
        env = "MCP_WARDEN_EGRESS_RESOLV_CONF",
        default_value = "/etc/resolv.conf"
    )]
    pub resolv_conf: PathBuf,
    /// Connections (tunnels and forwarded requests) one client may have
    /// open at once; one more is refused with 429.
    #[arg(
        long,
        env = "MCP_WARDEN_EGRESS_MAX_CONNS_PER_CLIENT",
        default_value_t = 64
    )]
    pub max_conns_per_client: usize,
    /// A tunnel with no byte either way for this long is closed.
    #[arg(
        long,
        env = "MCP_WARDEN_EGRESS_IDLE_TIMEOUT_SECS",
        default_value_t = 300
    )]
    pub idle_timeout_secs: u64,
    /// Bytes one connection may carry, both ways together (default 4 GiB:
    /// large wheels and images pass, an endless stream does not).
    #[arg(
        long,
        env = "MCP_WARDEN_EGRESS_MAX_BYTES_PER_CONN",
        default_value_t = 4 << 30
    )]
    pub max_bytes_per_conn: u64,
}

/// The bounds every client gets.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_conns_per_client: usize,
    pub idle_timeout: Duration,
    pub max_bytes_per_conn: u64,
}

/// What every request shares.
pub struct State {
    pub clients: Arc<ArcSwap<Clients>>,
    pub dialer: Dialer,
    pub limits: Limits,
    pub audit: EgressAudit,
    pub metrics: Arc<EgressMetrics>,
    open: Mutex<HashMap<String, usize>>,
}

/// One of a client's connection slots, given back when dropped.
pub struct Slot {
    state: Arc<State>,
    name: String,
}

impl Slot {
    /// A slot for `name`, unless it has all of its slots in use.
    pub fn take(state: &Arc<State>, name: &str) -> Option<Slot> {
        let mut open = state.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(name.to_string()).or_insert(0);
        if *n >= state.limits.max_conns_per_client {
            return None;
        }
        *n += 1;
        Some(Slot {
            state: state.clone(),
            name: name.to_string(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.state.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.name);
            }
        }
    }
}

/// Run the proxy until the process is stopped.
pub async fn run(args: EgressArgs) -> anyhow::Result<()> {
    let metrics = Arc::new(EgressMetrics::new());
    let first = clients::load(&args.clients_file)
        .map_err(|e| anyhow::anyhow!("the clients file {}: {e}", args.clients_file.display()))?;
    metrics.clients.set(first.len() as i64);
    let live = Arc::new(ArcSwap::from_pointee(first));
    clients::watch(
        args.clients_file.clone(),
        CLIENTS_POLL,
        live.clone(),
        metrics.clone(),
    );
    let state = Arc::new(State {
        clients: live,
        dialer: Dialer::new(
            crate::net::resolve::Resolver::new(args.resolv_conf.clone()),
            CONNECT_TIMEOUT,
        ),
        limits: Limits {
            max_conns_per_client: args.max_conns_per_client.max(1),
            idle_timeout: Duration::from_secs(args.idle_timeout_secs.max(1)),
            max_bytes_per_conn: args.max_bytes_per_conn,
        },
        audit: EgressAudit::stdout(metrics.clone()),
        metrics: metrics.clone(),
        open: Mutex::new(HashMap::new()),
    });
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    if let Some(addr) = args.metrics_listen {
        let ml = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        tracing::info!(address = %ml.local_addr()?, "egress metrics listening");
        tokio::spawn(serve_metrics(ml, metrics.clone()));
    }
    tracing::info!(
        address = %listener.local_addr()?,
        clients = state.clients.load().len(),
        "egress proxy listening"
    );
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(64 * 1024);
    let builder = Arc::new(builder);
    let mut stop = std::pin::pin!(stop_signal());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(handler::handle(state, req).await) }
            });
            if let Err(e) = builder
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades()
                .await
            {
                tracing::debug!(error = %e, "proxy connection ended with an error");
            }
        });
    }
    // No new connections; the open tunnels get DRAIN to finish.
    drop(listener);
    let deadline = tokio::time::Instant::now() + DRAIN;
    while state.open.lock().unwrap().values().any(|&n| n > 0)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::info!("egress proxy stopped");
    Ok(())
}

/// SIGTERM (the kubelet stopping the pod) or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
}

async fn serve_metrics(listener: TcpListener, metrics: Arc<EgressMetrics>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let (status, body) = match req.uri().path() {
                        "/metrics" => (200, metrics.render()),
                        "/healthz" | "/readyz" => (200, b"ok\n".to_vec()),
                        _ => (404, b"not found\n".to_vec()),
                    };
                    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
                    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
