//! `mcp-warden-operator`: `run` (the controller), `crdgen` (write or check the
//! CRD YAML), `render -f FILE…` (print what would be applied, offline) and
//! `client-config NAME` (what an agent needs to call a server).
#![forbid(unsafe_code)]

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use clap::{Parser, Subcommand};
use mcp_warden_operator::{
    check, client_config_source,
    config::{self, BuildConfig},
    crdgen,
    egress_scope::ClusterRanges,
    reconcile, render,
    runtime::{http, leader, logging, metrics::Metrics},
    webhook::{self, certs},
};

#[derive(Parser)]
#[command(
    name = "mcp-warden-operator",
    version,
    about = "Runs MCP servers on Kubernetes behind the mcp-warden tool facade"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller (in a cluster, or against the current kubeconfig).
    Run(RunArgs),
    /// Write the CRD YAML files, or check that the committed ones are fresh.
    Crdgen {
        /// Directory of the YAML files.
        #[arg(long, default_value = "crds")]
        out_dir: PathBuf,
        /// Do not write; exit non-zero when a file is missing or differs.
        #[arg(long)]
        check: bool,
    },
    /// Print every object the operator would apply for the CRs in the files.
    Render {
        /// YAML files with MCPServers and their profiles.
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Check CRs offline as the API server and the facade would: the CRD
    /// schemas and CEL rules, then each ToolProfile's policy through the
    /// facade's own loader. One line per problem; non-zero exit on any.
    Validate {
        /// YAML files with MCPServers, ToolProfiles and SandboxProfiles.
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
    },
    /// Print what an agent needs to call an MCPServer: its URL, where each
    /// accepted token comes from, and a ready mcp.json snippet (the lines
    /// not starting with `#` are the JSON). Reads the server and its
    /// ToolProfile from the cluster (current kubeconfig), or from files.
    ClientConfig {
        /// The MCPServer's name.
        name: String,
        /// Its namespace (default: the kubeconfig's, else `default`).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Read the resources from these YAML files instead of the cluster.
        #[arg(short = 'f', long = "filename", num_args = 1..)]
        files: Vec<PathBuf>,
        /// NAME is an MCPGateway: one URL and token for all its backends.
        #[arg(long)]
        gateway: bool,
        #[command(flatten)]
        build: BuildArgs,
    },
}

#[derive(clap::Args)]
struct BuildArgs {
    /// Image of the facade sidecar (and the bridge).
    #[arg(long, env = "MCP_WARDEN_SIDECAR_IMAGE", default_value_t = config::default_sidecar_image())]
    sidecar_image: String,
    /// Labels of the namespace allowed to scrape the facades' :9090, `k=v,…`.
    #[arg(
        long,
        env = "MCP_WARDEN_METRICS_NAMESPACE_LABELS",
        default_value = "kubernetes.io/metadata.name=monitoring"
    )]
    metrics_namespace_labels: String,
    /// `iss` of the cluster's service-account tokens.
    #[arg(
        long,
        env = "MCP_WARDEN_SA_ISSUER",
        default_value = "https://kubernetes.default.svc.cluster.local"
    )]
    service_account_issuer: String,
    /// The cluster's DNS domain.
    #[arg(
        long,
        env = "MCP_WARDEN_CLUSTER_DOMAIN",
        default_value = "cluster.local"
    )]
    cluster_domain: String,
    /// The operator's namespace (its Lease; its pods may read the facades' `/tools`).
    #[arg(long, env = "POD_NAMESPACE", default_value = "mcp-warden-system")]
    operator_namespace: String,
    /// Labels of the operator's pods, `k=v,…` (the facades' NetworkPolicy admits them to :9090).
    #[arg(
        long,
        env = "MCP_WARDEN_OPERATOR_POD_LABELS",
        default_value = "app.kubernetes.io/name=mcp-warden-operator"
    )]
    operator_pod_labels: String,
    /// The engine that allows egress by host name (`network.egress.host:…`):
    /// `auto` asks the API server which of Cilium and Calico it serves and
    /// runs the egress proxy where it serves neither (`render` has no API
    /// server: there `auto` is `none`); `proxy` always runs the proxy. Not a
    /// capability: the approved hosts are the same whichever engine enforces them.
    #[arg(
        long = "egress-engine",
        alias = "named-egress",
        env = "MCP_WARDEN_EGRESS_ENGINE",
        value_enum,
        default_value_t = EngineArg::Auto
    )]
    named_egress: EngineArg,
    /// Replicas of each namespace's egress proxy (`--egress-engine proxy`).
    #[arg(long, env = "MCP_WARDEN_EGRESS_PROXY_REPLICAS", default_value_t = 1)]
    egress_proxy_replicas: i32,
    /// Whose egress proxy a server uses: `namespace` (one shared per
    /// namespace) or `server` (one of its own, holding only its credential).
    #[arg(
        long,
        env = "MCP_WARDEN_EGRESS_PROXY_SCOPE",
        value_enum,
        default_value_t = config::EgressProxyScope::Namespace
    )]
    egress_proxy_scope: config::EgressProxyScope,
    /// OTLP endpoint the facades send spans to (`http://host:port`); empty: off.
    #[arg(long, env = "MCP_WARDEN_FACADE_OTLP_ENDPOINT", default_value = "")]
    facade_otlp_endpoint: String,
    /// OTLP protocol of the facades: `http/protobuf` or `grpc`.
    #[arg(
        long,
        env = "MCP_WARDEN_FACADE_OTLP_PROTOCOL",
        default_value = "http/protobuf"
    )]
    facade_otlp_protocol: String,
    /// Share of new traces the facades sample (a caller's sampled trace is
    /// always continued), 0 to 1.
    #[arg(long, env = "MCP_WARDEN_FACADE_TRACE_SAMPLING", default_value = "0.01")]
    facade_trace_sampling: String,
    /// The audit store the facades also send records to (`http://…`); empty: none.
    #[arg(long, env = "MCP_WARDEN_FACADE_AUDIT_HTTP", default_value = "")]
    facade_audit_http: String,
    /// `CIDR:PORT,…` the facades' pods may reach: the collector, the audit store.
    #[arg(long, env = "MCP_WARDEN_FACADE_TELEMETRY_EGRESS", default_value = "")]
    facade_telemetry_egress: String,
    /// `CIDR,…` of the cluster's pods (added to `Node.spec.podCIDRs`): egress
    /// into them is `network.egress.cluster`, and broad egress excepts them.
    #[arg(long, env = "MCP_WARDEN_CLUSTER_POD_CIDRS", default_value = "")]
    cluster_pod_cidrs: String,
    /// `CIDR,…` of the cluster's Services (added to the `ServiceCIDR` objects).
    #[arg(long, env = "MCP_WARDEN_CLUSTER_SERVICE_CIDRS", default_value = "")]
    cluster_service_cidrs: String,
    /// `CIDR,…` of the node network (kubelets, the API server).
    #[arg(long, env = "MCP_WARDEN_CLUSTER_NODE_CIDRS", default_value = "")]
    cluster_node_cidrs: String,
}

/// `--named-egress`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EngineArg {
    /// Discover it (run), none (render).
    Auto,
    /// No engine: named egress opens nothing.
    None,
    /// CiliumNetworkPolicy with toFQDNs.
    Cilium,
    /// Calico NetworkPolicy with domains.
    Calico,
    /// The egress proxy, one per namespace with servers that need it.
    Proxy,
}

/// What `run` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// The controller (leader-elected) and the admission webhook.
    All,
    /// Only the controller.
    Controller,
    /// Only the admission webhook (every replica serves; no leader election).
    Webhook,
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    build: BuildArgs,
    /// What to serve.
    #[arg(long, env = "MCP_WARDEN_MODE", value_enum, default_value_t = Mode::All)]
    mode: Mode,
    /// Where the HTTPS admission webhook listens.
    #[arg(
        long,
        env = "MCP_WARDEN_WEBHOOK_LISTEN",
        default_value = "0.0.0.0:8443"
    )]
    webhook_listen: SocketAddr,
    /// Directory with tls.crt and tls.key (a mounted kubernetes.io/tls
    /// Secret); without them the operator generates a certificate.
    #[arg(
        long,
        env = "MCP_WARDEN_WEBHOOK_CERT_DIR",
        default_value = "/etc/mcp-warden/webhook-tls"
    )]
    webhook_cert_dir: PathBuf,
    /// Self-generated mode: the Secret (operator namespace) that keeps the
    /// generated certificate for every replica.
    #[arg(
        long,
        env = "MCP_WARDEN_WEBHOOK_CERT_SECRET",
        default_value = "mcp-warden-webhook-tls"
    )]
    webhook_cert_secret: String,
    /// The webhook's Service (the certificate's DNS names).
    #[arg(
        long,
        env = "MCP_WARDEN_WEBHOOK_SERVICE",
        default_value = "mcp-warden-webhook"
    )]
    webhook_service: String,
    /// Self-generated mode: the Validating- and MutatingWebhookConfiguration
    /// whose caBundle the operator writes.
    #[arg(
        long,
        env = "MCP_WARDEN_WEBHOOK_CONFIG_NAME",
        default_value = "mcp-warden"
    )]
    webhook_config_name: String,
    /// The webhook accepts an approval from a user who changed what it
    /// covers (separation of duties off; the chart's
    /// `approval.allowSelfApproval`).
    #[arg(long, env = "MCP_WARDEN_ALLOW_SELF_APPROVAL")]
    allow_self_approval: bool,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    #[arg(long, env = "MCP_WARDEN_ADMIN_LISTEN", default_value = "0.0.0.0:8081")]
    admin_listen: SocketAddr,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "mcp-warden-operator")]
    identity: String,
}

impl BuildArgs {
    fn config(&self) -> Result<BuildConfig, String> {
        Ok(BuildConfig {
            sidecar_image: self.sidecar_image.clone(),
            metrics_namespace_labels: config::parse_labels(&self.metrics_namespace_labels)?,
            service_account_issuer: self.service_account_issuer.clone(),
            cluster_domain: self.cluster_domain.clone(),
            operator_namespace: self.operator_namespace.clone(),
            operator_pod_labels: config::parse_labels(&self.operator_pod_labels)?,
            named_egress: match self.named_egress {
                EngineArg::Auto | EngineArg::None => config::NamedEgress::None,
                EngineArg::Cilium => config::NamedEgress::Cilium,
                EngineArg::Calico => config::NamedEgress::Calico,
                EngineArg::Proxy => config::NamedEgress::Proxy,
            },
            egress_proxy_replicas: self.egress_proxy_replicas.clamp(1, 10),
            egress_proxy_scope: self.egress_proxy_scope,
            facade_telemetry: self.facade_telemetry()?,
            cluster_ranges: ClusterRanges {
                pods: config::parse_cidrs(&self.cluster_pod_cidrs)?,
                services: config::parse_cidrs(&self.cluster_service_cidrs)?,
                nodes: config::parse_cidrs(&self.cluster_node_cidrs)?,
            },
            trusted_gateways: Vec::new(),
        })
    }

    fn facade_telemetry(&self) -> Result<config::FacadeTelemetry, String> {
        let set = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
        let otlp_endpoint = set(&self.facade_otlp_endpoint);
        let audit_http = set(&self.facade_audit_http);
        for (flag, url) in [
            ("--facade-otlp-endpoint", &otlp_endpoint),
            ("--facade-audit-http", &audit_http),
        ] {
            if let Some(url) = url {
                if !url.starts_with("http://") {
                    return Err(format!("{flag} must be an http:// URL, not {url:?}"));
                }
            }
        }
        if !matches!(self.facade_otlp_protocol.as_str(), "http/protobuf" | "grpc") {
            return Err(format!(
                "--facade-otlp-protocol must be http/protobuf or grpc, not {:?}",
                self.facade_otlp_protocol
            ));
        }
        let ratio: f64 = self
            .facade_trace_sampling
            .parse()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| {
                format!(
                    "--facade-trace-sampling must be a number from 0 to 1, not {:?}",
                    self.facade_trace_sampling
                )
            })?;
        Ok(config::FacadeTelemetry {
            otlp_protocol: otlp_endpoint
                .as_ref()
                .map(|_| self.facade_otlp_protocol.clone()),
            otlp_endpoint,
            trace_sampling: ratio.to_string(),
            audit_http,
            egress: config::parse_egress(&self.facade_telemetry_egress)?,
        })
    }

    /// Whether `run` asks the API server for the named-egress engine.
    fn discover_named_egress(&self) -> bool {
        self.named_egress == EngineArg::Auto
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crdgen { out_dir, check } => crdgen::crdgen(&out_dir, check)
            .map(|paths| {
                let verb = if check { "fresh" } else { "wrote" };
                paths
                    .iter()
                    .for_each(|p| eprintln!("{verb}: {}", p.display()));
            })
            .map_err(|e| e.to_string()),
        Command::Render { files, build } => build
            .config()
            .and_then(|cfg| render::render(&files, &cfg).map_err(|e| e.to_string()))
            .map(|yaml| print!("{yaml}")),
        Command::Validate { files } => {
            let problems = check::check_files(&files);
            problems.iter().for_each(|p| println!("{p}"));
            if problems.is_empty() {
                eprintln!("{} file(s): no problems", files.len());
                Ok(())
            } else {
                Err(format!("{} problem(s)", problems.len()))
            }
        }
        Command::ClientConfig {
            name,
            namespace,
            files,
            gateway,
            build,
        } => build
            .config()
            .and_then(|cfg| {
                let kind = if gateway {
                    client_config_source::Kind::Gateway
                } else {
                    client_config_source::Kind::Server
                };
                if files.is_empty() {
                    tokio::runtime::Runtime::new()
                        .map_err(|e| e.to_string())
                        .and_then(|rt| {
                            rt.block_on(client_config_source::from_cluster(
                                kind, &name, namespace, &cfg,
                            ))
                        })
                } else {
                    client_config_source::from_files(&files, kind, &name, namespace, &cfg)
                }
            })
            .map(|text| print!("{text}")),
        Command::Run(args) => tokio::runtime::Runtime::new()
            .map_err(|e| e.to_string())
            .and_then(|rt| rt.block_on(run(args))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// How long a stopping leader waits for its reconciles in flight before it
/// releases the Lease.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// The controller process: admin endpoints, leader election, the controller,
/// graceful shutdown on SIGTERM/SIGINT.
async fn run(args: RunArgs) -> Result<(), String> {
    let tracer_provider = logging::init()?;
    let result = run_traced(args).await;
    mcp_warden_telemetry::shutdown(tracer_provider).await;
    result
}

async fn run_traced(args: RunArgs) -> Result<(), String> {
    let config = args.build.config()?;
    let discover_engine = args.build.discover_named_egress();
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect to the API server: {e}"))?;
    let admin = http::Admin {
        metrics: Metrics::default(),
        ..http::Admin::default()
    };
    tokio::spawn(http::serve(args.admin_listen, admin.clone()));
    if args.mode != Mode::Controller {
        start_webhook(&args, &client, &config).await?;
    }
    admin
        .ready
        .store(true, std::sync::atomic::Ordering::Relaxed);
    if args.mode == Mode::Webhook {
        shutdown_signal().await;
        return Ok(());
    }

    let lease_cfg = leader::LeaderConfig {
        namespace: config.operator_namespace.clone(),
        name: "mcp-warden-operator".into(),
        identity: args.identity.clone(),
        lease_duration: Duration::from_secs(15),
        renew_every: Duration::from_secs(5),
    };
    let leases = leader::lease_api(client.clone(), &lease_cfg);
    tokio::select! {
        _ = leader::acquire(&leases, &lease_cfg) => {}
        _ = shutdown_signal() => return Ok(()),
    }

    let reporter = kube::runtime::events::Reporter {
        controller: "mcp-warden-operator".into(),
        instance: Some(args.identity),
    };
    let ctx = Arc::new(reconcile::Context {
        client: client.clone(),
        recorder: kube::runtime::events::Recorder::new(client.clone(), reporter),
        metrics: admin.metrics.clone(),
        config,
        failures: Default::default(),
        admin: Arc::new(reconcile::observe::HttpAdmin),
        jwks: Default::default(),
        engine: reconcile::observe::EngineCache::new(discover_engine),
        issuer_keys: Default::default(),
        cluster_ranges: Default::default(),
        references: Default::default(),
    });
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
    let keeper = tokio::spawn({
        let (leases, cfg) = (leases.clone(), lease_cfg.clone());
        async move {
            leader::keep(leases, cfg).await;
            let _ = lost_tx.send(());
        }
    });
    let lost = async move {
        let _ = lost_rx.await;
    };
    let stop = futures::FutureExt::shared(async move {
        tokio::select! {
            _ = shutdown_signal() => tracing::info!("shutting down"),
            _ = lost => tracing::warn!("lost leadership; stopping"),
        }
    });
    // Reconciles in flight get a short grace, then are dropped: the Lease is
    // released in time for a standby to take over within the documented
    // 5 s, and whatever a dropped reconcile had not applied the next leader
    // applies (every step is an idempotent apply).
    let grace = {
        let stop = stop.clone();
        async move {
            stop.await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        }
    };
    tokio::select! {
        _ = reconcile::controller::run(client, ctx, stop) => {}
        _ = grace => tracing::info!(
            "reconciles still running {}s after the stop; releasing the Lease without them",
            SHUTDOWN_GRACE.as_secs()
        ),
    }
    let lost_leadership = keeper.is_finished();
    keeper.abort();
    leader::release(&leases, &lease_cfg).await;
    if lost_leadership {
        return Err("lost leadership".into());
    }
    Ok(())
}

/// The TLS certificate (mounted, or generated and kept in a Secret with its
/// caBundle written into the webhook configurations), then the HTTPS server.
async fn start_webhook(
    args: &RunArgs,
    client: &kube::Client,
    config: &BuildConfig,
) -> Result<(), String> {
    let pair = match certs::load_dir(&args.webhook_cert_dir).map_err(|e| e.to_string())? {
        Some(pair) => {
            tracing::info!(dir = %args.webhook_cert_dir.display(), "webhook certificate from the mounted Secret");
            pair
        }
        None => {
            let names = certs::service_dns_names(
                &args.webhook_service,
                &config.operator_namespace,
                &config.cluster_domain,
            );
            let pair = certs::ensure_secret(
                client,
                &config.operator_namespace,
                &args.webhook_cert_secret,
                names,
            )
            .await
            .map_err(|e| e.to_string())?;
            tracing::info!(secret = %args.webhook_cert_secret, "webhook certificate self-generated");
            // Keep the caBundle right: the chart may re-apply the configurations.
            let (client, name, ca) = (
                client.clone(),
                args.webhook_config_name.clone(),
                pair.cert_pem.clone(),
            );
            tokio::spawn(async move {
                loop {
                    match certs::patch_ca_bundles(&client, &name, &ca).await {
                        Ok(n) => tracing::debug!(configurations = n, "caBundle written"),
                        Err(e) => tracing::warn!(error = %e, "cannot write the webhook caBundle"),
                    }
                    tokio::time::sleep(Duration::from_secs(300)).await;
                }
            });
            pair
        }
    };
    let tls = certs::server_config(&pair).map_err(|e| e.to_string())?;
    let authorizer = Arc::new(webhook::KubeAuthorizer {
        client: client.clone(),
        allow_self_approval: args.allow_self_approval,
    });
    let users = Arc::new(webhook::KubeProfileUsers {
        client: client.clone(),
    });
    let listen = args.webhook_listen;
    tokio::spawn(async move {
        if let Err(e) = webhook::serve(listen, tls, authorizer, users).await {
            tracing::error!(error = %e, "the admission webhook stopped");
        }
    });
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
