//! The command line: `run` (the facade), `egress` (the egress proxy) and
//! `bridge` (the in-pod stdio bridge). Logs always go to stderr: stdout may carry protocol. The flags
//! are in `cli/args.rs` (a gateway's in `cli/gateway.rs`); this file turns
//! them into a running [`App`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use mcp_warden_crds::FacadePolicy;
use tokio::net::TcpListener;

use crate::app::{AdminAccess, App, HostPolicy};
use crate::downstream::forward::PeerSource;
use crate::gates::audit::{Audit, AuditConfig, AuditSink};
use crate::gates::policy::LivePolicy;
use crate::router::probe;
use crate::session::context::{Context, Limits};
use crate::session::ids::SessionIds;
use crate::sinks::file::Rotation;
use crate::upstream::{child_env, HttpTarget, UpstreamTarget};
use crate::{admin, bridge, downstream, policy_file, server};

mod gateway;

mod args;
use args::{Cli, Command, RunArgs};

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log_format);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    match &cli.command {
        Command::Run(args) if args.threads > 0 => runtime.worker_threads(args.threads),
        _ => &mut runtime,
    };
    let runtime = runtime.enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Egress(args) => crate::egress::run(args).await,
            Command::InstallBridge { dest } => bridge::install(&dest),
            Command::Bridge {
                socket,
                mut command,
            } => {
                let program = command.remove(0);
                bridge::run(socket, program, command).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-warden-sidecar: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_WARDEN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    if !args.server_env.is_empty() && args.command.is_empty() {
        anyhow::bail!(
            "--server-env applies to a server command after `--` (a socket or URL upstream has its own environment)"
        );
    }
    let target = match (
        &args.upstream_url,
        &args.upstream_socket,
        args.command.split_first(),
    ) {
        (None, None, None) if args.gateway.enabled() => {
            gateway::target(&args.gateway, |url, ca| {
                http_target(url, &args, true, ca)
            })?
        }
        _ if args.gateway.enabled() => anyhow::bail!(
            "--backend makes a gateway: give no other upstream (a command, --upstream-url or --upstream-socket)"
        ),
        (Some(url), None, None) => UpstreamTarget::Http(http_target(url, &args, false, None)?),
        (None, Some(path), None) => UpstreamTarget::Socket(path.clone()),
        (None, None, Some((program, rest))) => {
            let names_var = std::env::var(child_env::ENV_VAR).ok();
            let env =
                child_env::child_env(std::env::vars_os(), &args.server_env, names_var.as_deref())?;
            tracing::info!(
                names = %child_env::names(&env),
                "the server's environment (nothing else of the facade's)"
            );
            UpstreamTarget::Command {
                program: program.clone(),
                args: rest.to_vec(),
                env: std::sync::Arc::new(env),
            }
        }
        (None, None, None) => anyhow::bail!(
            "no upstream: give a command after `--`, --upstream-url or --upstream-socket"
        ),
        _ => anyhow::bail!(
            "give exactly one upstream: a command after `--`, --upstream-url or --upstream-socket"
        ),
    };
    let policy = match &args.policy {
        Some(path) => policy_file::load(path, &args.resource_urls).map_err(anyhow::Error::msg)?,
        None => {
            let mut doc = FacadePolicy::allow_all();
            policy_file::add_resource_urls(&mut doc, &args.resource_urls);
            LivePolicy::new(doc, Path::new("."))
                .map_err(|e| anyhow::anyhow!("invalid --resource-url:\n{e}"))?
        }
    };
    let audit_sink = match args.audit.clone() {
        Some(sink) => sink,
        // stdout is the protocol channel in --stdio mode.
        None if args.stdio => AuditSink::Stderr,
        None => AuditSink::Stdout,
    };
    let audit_http = match &args.audit_http {
        Some(url) => {
            let mut settings =
                crate::sinks::http::Settings::new(url.clone()).map_err(anyhow::Error::msg)?;
            settings.capacity = args.audit_http_buffer.max(1);
            settings.batch = args.audit_http_batch.max(1);
            if let Some(path) = &args.audit_http_token_file {
                let token = std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!("cannot read the audit store token {}: {e}", path.display())
                })?;
                settings.token = Some(token.trim().to_string());
            }
            Some(settings)
        }
        None => None,
    };
    let metrics = crate::metrics::Metrics::new();
    let audit = Audit::start(
        AuditConfig {
            sink: audit_sink,
            rotation: Rotation {
                max_bytes: args.audit_max_bytes,
                keep: args.audit_keep,
            },
            http: audit_http,
        },
        &metrics,
    )
    .map_err(|e| anyhow::anyhow!("cannot open the audit sink: {e}"))?;
    let limits = Limits {
        max_body_bytes: args.max_body_bytes,
        max_batch_size: args.max_batch_size.max(1),
        max_header_bytes: args.max_header_bytes,
        max_sessions: args.max_sessions.unwrap_or(match target {
            UpstreamTarget::Http(_) | UpstreamTarget::Gateway(_) => 1024,
            _ => 64,
        }),
        body_read_timeout: Duration::from_secs(args.body_timeout_secs.max(1)),
        header_read_timeout: Duration::from_secs(args.header_timeout_secs.max(1)),
        request_timeout: Duration::from_secs(args.request_timeout_secs.max(1)),
        restart_backoff_initial: Duration::from_millis(args.restart_backoff_ms.max(1)),
        restart_backoff_max: Duration::from_millis(
            args.restart_backoff_max_ms
                .max(args.restart_backoff_ms)
                .max(1),
        ),
        idle_timeout: Duration::from_secs(args.idle_timeout_secs),
        max_sessions_per_identity: args.max_sessions_per_identity.max(1),
        cancel_grace: Duration::from_secs(args.cancel_grace_secs.max(1)),
        stream_queue_depth: args.queue_depth.max(1),
        max_restarts: args.max_restarts,
        spares: if args.stdio { 0 } else { args.spares },
        max_upstream_message_bytes: args.max_upstream_message_bytes,
        // A gateway is a modern server: its backends are facades, which
        // serve modern callers whatever their own server speaks.
        upstream_era: if args.gateway.enabled() {
            crate::session::context::EraChoice::Modern
        } else {
            args.upstream_era
        },
        request_state_ttl: Duration::from_secs(args.request_state_ttl_secs.max(1)),
        max_task_ttl: Duration::from_secs(args.max_task_ttl_secs.max(1)),
        task_wall_time: Duration::from_secs(args.task_wall_time_secs.max(1)),
        max_live_tasks_per_identity: args.max_live_tasks_per_identity,
        approval_timeout: Duration::from_secs(args.approval_timeout_secs),
        // Without an admin listener (stdio) nobody can decide.
        max_pending_approvals: if args.stdio {
            0
        } else {
            args.max_pending_approvals
        },
        max_pending_approvals_per_identity: args.max_pending_approvals_per_identity,
        roots: local_roots(&args.roots)?,
        ..Limits::default()
    };
    let hosts = HostPolicy {
        hosts: if args.allowed_host.is_empty() && args.listen.ip().is_loopback() {
            loopback_names()
        } else {
            args.allowed_host.clone()
        },
        origins: args.allowed_origin.clone(),
    };
    let mut peer_key = None;
    let session_ids = match (&args.peer_key_file, &args.advertise_addr) {
        (Some(path), Some(me)) => {
            let key = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read the peer key {}: {e}", path.display()))?;
            anyhow::ensure!(
                key.len() >= 32,
                "the peer key {} must hold at least 32 bytes",
                path.display()
            );
            peer_key = Some(key.clone());
            SessionIds::routed(key, me.clone())
        }
        _ => SessionIds::local(),
    };
    let admin = AdminAccess {
        token: if args.stdio {
            String::new() // no admin listener
        } else {
            admin_token(&args)?
        },
        hosts: HostPolicy {
            hosts: if args.admin_allowed_host.is_empty() && args.admin_listen.ip().is_loopback() {
                loopback_names()
            } else {
                args.admin_allowed_host.clone()
            },
            origins: args.allowed_origin.clone(),
        },
    };
    // Spans, when an OTLP endpoint is configured (OTEL_* variables).
    let tracer_provider = mcp_warden_telemetry::tracer_provider("mcp-warden-sidecar")?;
    let telemetry = crate::spans::Telemetry::new(tracer_provider.as_ref());
    let ctx = Context::new(
        target,
        limits,
        policy,
        (audit, telemetry, metrics),
        session_ids,
    );
    if let (Some(key), Some(me)) = (&peer_key, &args.advertise_addr) {
        let peers: Vec<String> = args
            .peers
            .iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        if !peers.is_empty() {
            ctx.identity_budgets.set_peers(
                me.clone(),
                &peers,
                key,
                Arc::new(crate::downstream::forward::Relay),
            );
            ctx.metrics
                .identity_budget_peers
                .set(ctx.identity_budgets.peers().len() as i64);
        }
        let source = match (args.peers_dns.clone(), args.peers_file.clone()) {
            (Some(name), _) => Some(PeerSource::Dns(name)),
            (None, Some(path)) => Some(PeerSource::File(path)),
            (None, None) => None,
        };
        if let Some(source) = source {
            tokio::spawn(crate::downstream::forward::watch_peers(
                ctx.clone(),
                source,
                me.clone(),
                key.clone(),
                Duration::from_secs(5),
            ));
        }
    }
    let app = App::new(ctx, hosts, admin);
    if let UpstreamTarget::Gateway(g) = &app.target {
        gateway::observe(&app, g);
    }
    if let UpstreamTarget::Http(t) = &app.target {
        // Egress refusals are audited and counted.
        let weak = Arc::downgrade(&app);
        t.client.set_observer(Arc::new(move |refusal| {
            if let Some(app) = weak.upgrade() {
                app.audit.egress_refused(refusal, &app.metrics);
            }
        }));
    }
    if let Some(path) = args.policy.clone() {
        tokio::spawn(policy_file::watch(
            app.ctx.clone(),
            path,
            Duration::from_secs(args.policy_poll_secs.max(1)),
            args.resource_urls.clone(),
        ));
    }
    tokio::spawn(crate::router::sessions::Sessions::reap(
        app.router.clone(),
        app.ctx.clone(),
    ));

    if args.stdio {
        app.ready.store(true, Ordering::Relaxed);
        // The server's era decides how the client's session is served.
        tokio::spawn(probe::until_ready(app.ctx.clone(), app.router.clone()));
        let served = tokio::select! {
            served = downstream::stdio::run(app.clone()) => served,
            // Ended by a signal: stop the server and keep the audit trail.
            () = shutdown_signal() => {
                app.router.sessions.close_all("the facade is shutting down");
                Ok(())
            }
        };
        app.audit.flush(Duration::from_secs(2));
        app.audit.flush_http(Duration::from_secs(5)).await;
        mcp_warden_telemetry::shutdown(tracer_provider).await;
        return served;
    }

    let tls = match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => {
            let certs = crate::tls::Certificates::load(cert, key).map_err(anyhow::Error::msg)?;
            crate::downstream::forward::set_peer_tls(
                certs.peer_client_config().map_err(anyhow::Error::msg)?,
            );
            let acceptor =
                tokio_rustls::TlsAcceptor::from(certs.server_config().map_err(anyhow::Error::msg)?);
            certs.watch();
            Some(acceptor)
        }
        _ => None,
    };
    let stop = app.stopping.clone();
    let mcp = TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    let admin_listener = TcpListener::bind(args.admin_listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.admin_listen))?;
    tracing::info!(mcp = %mcp.local_addr()?, admin = %admin_listener.local_addr()?, upstream = app.target.kind(), "mcp-warden facade listening");
    tokio::spawn(server::serve(
        app.clone(),
        admin_listener,
        None,
        stop.clone(),
        admin::handle,
    ));
    tokio::spawn(probe::until_ready(app.ctx.clone(), app.router.clone()));
    let serving = tokio::spawn(server::serve(
        app.clone(),
        mcp,
        tls,
        stop.clone(),
        downstream::http::handle,
    ));

    shutdown_signal().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.drain_timeout_secs);
    drain(&app, deadline).await;
    stop.cancel();
    // The answers just drained, and the requests this replica relays for
    // another's sessions, finish on their connections inside the same bound.
    let _ = tokio::time::timeout_at(deadline, serving).await;
    app.audit.flush(Duration::from_secs(2));
    app.audit.flush_http(Duration::from_secs(5)).await;
    mcp_warden_telemetry::shutdown(tracer_provider).await;
    Ok(())
}

/// `--root` directories as `file://` roots, named by their last component.
fn local_roots(paths: &[PathBuf]) -> anyhow::Result<Vec<mcp_warden_crds::Root>> {
    paths
        .iter()
        .map(|p| {
            let abs = std::fs::canonicalize(p)
                .map_err(|e| anyhow::anyhow!("--root {}: {e}", p.display()))?;
            let path = abs
                .to_str()
                .ok_or_else(|| anyhow::anyhow!("--root {}: not UTF-8", p.display()))?;
            Ok(mcp_warden_crds::Root {
                uri: format!("file://{path}"),
                name: abs.file_name().map(|n| n.to_string_lossy().into_owned()),
            })
        })
        .collect()
}

fn loopback_names() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}

/// The admin token: the operator's file, or a fresh one written where a
/// local user can read it (never no token: the admin plane is never open).
fn admin_token(args: &RunArgs) -> anyhow::Result<String> {
    if let Some(path) = &args.admin_token_file {
        return Ok(admin::token::read(path)?);
    }
    let path = args
        .generated_admin_token_file
        .clone()
        .unwrap_or_else(|| admin::token::default_path(args.admin_listen.port()));
    let token = admin::token::generate(&path)?;
    tracing::info!(
        path = %path.display(),
        "generated the admin token: it reads /tools and /approvals on the admin port (send the file's contents as a bearer token)"
    );
    Ok(token)
}

/// An HTTP(S) upstream: `https://` anywhere (the SSRF guard judges where it
/// leads), `http://` only on loopback — the server in the same pod, where
/// TLS would protect nothing and the loopback addresses are its own. A
/// gateway's `backend` may also be plain inside `--backend-allow-cidr` (the
/// cluster's Services, whose reach a NetworkPolicy confines), and trusts
/// its `--backend-ca` alone when it has one.
fn http_target(
    url: &hyper::Uri,
    args: &RunArgs,
    backend: bool,
    backend_ca: Option<&std::path::Path>,
) -> anyhow::Result<HttpTarget> {
    let endpoint = crate::net::Endpoint::of(url)
        .map_err(|e| anyhow::anyhow!("--upstream-url `{url}`: {e}"))?;
    let in_cluster = backend && !args.gateway.backend_allow_cidrs.is_empty();
    anyhow::ensure!(
        endpoint.tls || endpoint.is_local_plain() || in_cluster,
        "--upstream-url `{url}`: http:// is only for a server on loopback (in the pod); use https:// for a remote server"
    );
    let mut allow = Vec::new();
    let backend_cidrs = args.gateway.backend_allow_cidrs.iter().filter(|_| backend);
    for cidr in args.upstream_allow_cidr.iter().chain(backend_cidrs) {
        allow.push(
            crate::net::guard::parse_cidr(cidr)
                .map_err(|e| anyhow::anyhow!("--upstream-allow-cidr: {e}"))?,
        );
    }
    if endpoint.is_local_plain() {
        allow.push("127.0.0.0/8".parse().expect("a CIDR"));
        allow.push("::1/128".parse().expect("a CIDR"));
    }
    let config = crate::net::ClientConfig {
        ca_file: backend_ca
            .map(|p| p.to_path_buf())
            .or_else(|| args.upstream_ca_file.clone()),
        ca_only: backend_ca.is_some(),
        allow,
        resolv_conf: args.resolv_conf.clone(),
        connect_timeout: Duration::from_secs(args.upstream_connect_timeout_secs.max(1)),
        http2: !args.upstream_http1,
        proxy: None,
    };
    let client = crate::net::Client::new(&config).map_err(anyhow::Error::msg)?;
    Ok(HttpTarget {
        uri: url.clone(),
        client,
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("signal handler");
    let mut int = signal(SignalKind::interrupt()).expect("signal handler");
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
}

/// Stop taking new sessions, let live ones finish their calls (bounded),
/// then end them.
async fn drain(app: &Arc<App>, deadline: tokio::time::Instant) {
    app.draining.store(true, Ordering::Relaxed);
    tracing::info!(sessions = app.router.sessions.len(), "draining");
    while app.router.sessions.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.router.sessions.close_all("the facade is shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(extra: &[&str]) -> RunArgs {
        let mut argv = vec![
            "mcp-warden-sidecar",
            "run",
            "--backend",
            "git=http://git.a.svc:8080/mcp",
        ];
        argv.extend(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(args) => args,
            _ => unreachable!("run"),
        }
    }

    /// A gateway's in-cluster backend is plain HTTP only inside the blocks
    /// the operator names; an upstream server never is, flag or not.
    #[test]
    fn plain_http_backends_need_their_blocks_named() {
        let url: hyper::Uri = "http://git.a.svc:8080/mcp".parse().unwrap();
        let err = match http_target(&url, &run_args(&[]), true, None) {
            Ok(_) => panic!("plain http to a cluster name without --backend-allow-cidr"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("http:// is only for a server on loopback"),
            "{err}"
        );
        let named = run_args(&["--backend-allow-cidr", "10.96.0.0/12,10.244.0.0/16"]);
        assert!(http_target(&url, &named, true, None).is_ok());
        assert!(
            http_target(&url, &named, false, None).is_err(),
            "not for --upstream-url"
        );
        let bad = run_args(&["--backend-allow-cidr", "not-a-block"]);
        assert!(http_target(&url, &bad, true, None).is_err());
    }
}
