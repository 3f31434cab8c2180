//! The command line's flags (clap): `run` and `bridge`, and every setting
//! of the facade with its environment variable. What the flags do is
//! assembled in the parent module (`cli.rs`, `run`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::gateway;
use crate::gates::audit::AuditSink;
use crate::session::context::Limits;
use crate::sinks::file::Rotation;

#[derive(Parser)]
#[command(
    name = "mcp-warden-sidecar",
    version,
    about = "The mcp-warden tool facade: a policy-enforcing MCP proxy"
)]
pub(super) struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    pub(super) log_format: String,
    #[command(subcommand)]
    pub(super) command: Command,
}

// Parsed once at startup: the size of the `run` variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(super) enum Command {
    /// Serve an MCP server through the facade.
    ///
    /// The upstream is a command after `--` (one process per session), or
    /// `--upstream-url`, or `--upstream-socket`.
    Run(RunArgs),
    /// Copy this binary to DEST (an init container uses it to put the bridge
    /// into a volume shared with the server container; no shell needed).
    InstallBridge {
        /// Where to write the executable.
        dest: PathBuf,
    },
    /// Run the egress proxy: an HTTP forward proxy (CONNECT, and plain
    /// http:// where approved) that lets each client reach only its
    /// approved host:port pairs. Audit lines go to stdout.
    Egress(crate::egress::EgressArgs),
    /// Serve a stdio MCP server on a unix socket, one process per connection.
    Bridge {
        /// Socket path to listen on.
        #[arg(long)]
        socket: PathBuf,
        /// The server command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Args)]
pub(super) struct RunArgs {
    /// Policy file (YAML or JSON FacadePolicy), reloaded when it changes.
    /// Without it every tool is allowed to everyone.
    #[arg(long, env = "MCP_WARDEN_POLICY")]
    pub(super) policy: Option<PathBuf>,
    /// Address of the MCP endpoint (`/mcp`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(super) listen: SocketAddr,
    /// Address of the admin endpoint (`/healthz`, `/readyz`, `/metrics`).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub(super) admin_listen: SocketAddr,
    /// Serve one client on stdin/stdout instead of HTTP.
    #[arg(long)]
    pub(super) stdio: bool,
    /// Upstream Streamable HTTP endpoint: https://host/mcp for a remote
    /// server, or http://127.0.0.1:3001/mcp for a server on loopback (in
    /// the pod). Redirects are never followed.
    #[arg(long, conflicts_with = "upstream_socket")]
    pub(super) upstream_url: Option<hyper::Uri>,
    /// A PEM bundle of CA certificates trusted for the upstream (and its
    /// token endpoints), besides the platform's roots.
    #[arg(long, env = "MCP_WARDEN_UPSTREAM_CA_FILE")]
    pub(super) upstream_ca_file: Option<PathBuf>,
    /// Address blocks the facade may connect to although they are private,
    /// loopback or link-local (comma-separated CIDRs or addresses). Without
    /// them such addresses are refused, whatever name leads to them.
    #[arg(long, value_delimiter = ',', env = "MCP_WARDEN_UPSTREAM_ALLOW_CIDR")]
    pub(super) upstream_allow_cidr: Vec<String>,
    /// Seconds a connection to the upstream (TCP and TLS) may take.
    #[arg(long, default_value_t = 10)]
    pub(super) upstream_connect_timeout_secs: u64,
    /// Never offer HTTP/2 to a TLS upstream (ALPN http/1.1 only).
    #[arg(long)]
    pub(super) upstream_http1: bool,
    /// The resolver configuration (name servers, search domains) for
    /// upstream and token-endpoint host names.
    #[arg(
        long,
        env = "MCP_WARDEN_RESOLV_CONF",
        default_value = "/etc/resolv.conf"
    )]
    pub(super) resolv_conf: PathBuf,
    /// Upstream unix socket served by `mcp-warden-sidecar bridge`.
    #[arg(long)]
    pub(super) upstream_socket: Option<PathBuf>,
    /// Host names the MCP endpoint answers to (DNS rebinding protection).
    /// Default: the loopback names when listening on loopback, else any.
    #[arg(long, value_delimiter = ',')]
    pub(super) allowed_host: Vec<String>,
    /// This facade's URL as clients reach it (`https://mcp.example.com/mcp`):
    /// the OAuth protected resource whose metadata a request with that
    /// host gets at `/.well-known/oauth-protected-resource`, and the
    /// audience of issuers with `resourceAudience`. Repeat per name;
    /// added to the policy's `auth.resourceUrls`.
    #[arg(
        long = "resource-url",
        env = "MCP_WARDEN_RESOURCE_URLS",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub(super) resource_urls: Vec<String>,
    /// PEM certificate (chain) of the MCP endpoint: with `--tls-key-file`,
    /// `/mcp` is served over TLS only (the admin port stays plain HTTP). The
    /// files are re-read every 10 s, so a renewed certificate (cert-manager)
    /// is served without a restart.
    #[arg(long, env = "MCP_WARDEN_TLS_CERT_FILE", requires = "tls_key_file")]
    pub(super) tls_cert_file: Option<PathBuf>,
    /// PEM private key of `--tls-cert-file`.
    #[arg(long, env = "MCP_WARDEN_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub(super) tls_key_file: Option<PathBuf>,
    /// Browser origins allowed to call the endpoint. Default: loopback origins.
    #[arg(long, value_delimiter = ',')]
    pub(super) allowed_origin: Vec<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    pub(super) max_body_bytes: usize,
    /// Messages one JSON-RPC batch may hold (protocol revisions 2025-03-26
    /// and earlier); a larger batch is refused whole with -32600
    /// (`batch_too_large`). Each element counts as a request of its own
    /// against every budget.
    #[arg(long, default_value_t = Limits::default().max_batch_size)]
    pub(super) max_batch_size: usize,
    /// Largest request header block, in bytes.
    #[arg(long, default_value_t = Limits::default().max_header_bytes)]
    pub(super) max_header_bytes: usize,
    /// Most concurrent sessions. Default: 64 when each session owns a server
    /// process (command or socket upstream), 1024 for an HTTP upstream.
    #[arg(long)]
    pub(super) max_sessions: Option<usize>,
    /// Sessions one caller may hold at once: an issuer-qualified subject, or,
    /// for anonymous callers, one source address.
    #[arg(long, default_value_t = Limits::default().max_sessions_per_identity)]
    pub(super) max_sessions_per_identity: usize,
    /// Seconds a request past its time limit may stay on the server, holding
    /// its concurrency slot, before the server process is replaced. A request
    /// the client cancelled is owed no answer: it holds its slot until the
    /// server answers it or its own time limit runs out, then is let go
    /// without replacing the server.
    #[arg(long, default_value_t = Limits::default().cancel_grace.as_secs())]
    pub(super) cancel_grace_secs: u64,
    /// File holding the admin token (the operator's): it reads `/tools` and
    /// `/approvals` on the admin port, and decides nothing (deciding an
    /// approval takes an approver's own token). Without it the facade
    /// generates one at start (see `--generated-admin-token-file`).
    #[arg(long, env = "MCP_WARDEN_ADMIN_TOKEN_FILE")]
    pub(super) admin_token_file: Option<PathBuf>,
    /// Where the token generated without `--admin-token-file` is written
    /// (0600; the path is logged). Default:
    /// `$XDG_RUNTIME_DIR/mcp-warden/admin-<port>.token`, else
    /// `<temp dir>/mcp-warden-<uid>/admin-<port>.token`.
    #[arg(long, env = "MCP_WARDEN_GENERATED_ADMIN_TOKEN_FILE")]
    pub(super) generated_admin_token_file: Option<PathBuf>,
    /// Host names the admin port answers to on `/tools` and `/approvals`
    /// (DNS rebinding protection). Default: the loopback names when it
    /// listens on loopback, else any (the kubelet and the operator reach it
    /// by the pod's address).
    #[arg(long, value_delimiter = ',')]
    pub(super) admin_allowed_host: Vec<String>,
    /// A directory the server may work in (repeatable): the facade answers
    /// the server's `roots/list` with it, after the policy's `roots`. The
    /// client's own roots never reach the server.
    #[arg(long = "root", value_name = "PATH")]
    pub(super) roots: Vec<PathBuf>,
    /// Seconds a call held by an argument rule with `approval: outOfBand`
    /// waits for a person's decision on the admin port (`/approvals`)
    /// before it is refused with -32008.
    #[arg(long, default_value_t = Limits::default().approval_timeout.as_secs())]
    pub(super) approval_timeout_secs: u64,
    /// Calls that may wait for an out-of-band approval at once; more are
    /// refused with -32008 (`approval_queue_full`).
    #[arg(long, default_value_t = Limits::default().max_pending_approvals)]
    pub(super) max_pending_approvals: usize,
    /// How many of those calls one caller may hold at once, so one identity
    /// cannot fill the queue (-32008, `approval_share_exhausted`); 0: a
    /// quarter of `--max-pending-approvals`, at least one.
    #[arg(long, default_value_t = 0)]
    pub(super) max_pending_approvals_per_identity: usize,
    /// Seconds a client may take to send a request's headers (and the first
    /// byte of a connection); slower connections are closed.
    #[arg(long, default_value_t = Limits::default().header_read_timeout.as_secs())]
    pub(super) header_timeout_secs: u64,
    /// Seconds a forwarded request other than tools/call (whose limit is the
    /// policy's) may wait for the server's answer before it fails with -32007.
    #[arg(long, default_value_t = Limits::default().request_timeout.as_secs())]
    pub(super) request_timeout_secs: u64,
    /// Seconds a request body may take to arrive.
    #[arg(long, default_value_t = Limits::default().body_read_timeout.as_secs())]
    pub(super) body_timeout_secs: u64,
    /// Largest single message from the server, in bytes.
    #[arg(long, default_value_t = Limits::default().max_upstream_message_bytes)]
    pub(super) max_upstream_message_bytes: usize,
    /// First delay before restarting a crashed server, in milliseconds (doubles per crash).
    #[arg(long, default_value_t = Limits::default().restart_backoff_initial.as_millis() as u64)]
    pub(super) restart_backoff_ms: u64,
    /// Longest delay between restarts, in milliseconds.
    #[arg(long, default_value_t = Limits::default().restart_backoff_max.as_millis() as u64)]
    pub(super) restart_backoff_max_ms: u64,
    /// Seconds without activity after which a session ends.
    #[arg(long, default_value_t = Limits::default().idle_timeout.as_secs())]
    pub(super) idle_timeout_secs: u64,
    /// Messages queued per stream towards a client before it is detached.
    #[arg(long, default_value_t = Limits::default().stream_queue_depth)]
    pub(super) queue_depth: usize,
    /// Restarts of a session's server allowed per minute before the session ends.
    #[arg(long, default_value_t = Limits::default().max_restarts)]
    pub(super) max_restarts: u32,
    /// Server processes kept started ahead of new sessions (stdio and socket
    /// upstreams), so a new session does not wait for one to boot.
    #[arg(long, default_value_t = Limits::default().spares)]
    pub(super) spares: usize,
    /// Which revision of MCP the server speaks: `auto` asks it with
    /// `server/discover` (a server that does not answer it is legacy);
    /// `modern` serves every caller from one server; `legacy` gives each
    /// session a server process (or upstream session) of its own.
    #[arg(long, value_enum, env = "MCP_WARDEN_UPSTREAM_ERA", default_value_t = crate::session::context::EraChoice::Auto)]
    pub(super) upstream_era: crate::session::context::EraChoice,
    /// How long a modern client has to retry a request the facade answered
    /// with `input_required` (an approval, a server's question) before the
    /// signed `requestState` expires.
    #[arg(long, default_value_t = crate::request_state::LIFETIME.as_secs())]
    pub(super) request_state_ttl_secs: u64,
    /// Tasks extension: the longest a task is kept (and its id honoured);
    /// a server's longer `ttlMs` is cut to it.
    #[arg(long, default_value_t = 3600)]
    pub(super) max_task_ttl_secs: u64,
    /// Tasks extension: how long a task may run before the facade cancels
    /// it on the server (it polls the task itself, clients polling or not).
    #[arg(long, default_value_t = 3600)]
    pub(super) task_wall_time_secs: u64,
    /// Tasks extension: tasks one identity may have running at once on a
    /// replica (0: no limit); each also holds one of its concurrent calls.
    #[arg(long, default_value_t = 16)]
    pub(super) max_live_tasks_per_identity: usize,
    /// File holding the key shared by all replicas (at least 32 bytes): makes
    /// session ids routable between replicas and unforgeable.
    #[arg(long, env = "MCP_WARDEN_PEER_KEY_FILE", requires = "advertise_addr")]
    pub(super) peer_key_file: Option<PathBuf>,
    /// How other replicas reach this one (`POD_IP:8080` in a pod).
    #[arg(long, env = "MCP_WARDEN_ADVERTISE_ADDR")]
    pub(super) advertise_addr: Option<String>,
    /// Every replica's peer address (repeat, or comma-separate in the
    /// variable; this replica's own may be listed too). With peers, each
    /// identity's `maxCallsPerIdentity` is counted by one owner replica,
    /// chosen from the identity and this list, which every replica must be
    /// given alike; the others ask it over the relay.
    #[arg(
        long = "peer",
        env = "MCP_WARDEN_PEERS",
        value_delimiter = ',',
        requires = "peer_key_file"
    )]
    pub(super) peers: Vec<String>,
    /// A name (`host:port`) that resolves to every replica's peer address,
    /// looked up every few seconds, instead of `--peer` (the operator names
    /// the server's headless `<name>-peers` Service).
    #[arg(
        long,
        env = "MCP_WARDEN_PEERS_DNS",
        conflicts_with = "peers",
        requires = "peer_key_file"
    )]
    pub(super) peers_dns: Option<String>,
    /// A file listing every replica's peer address (one per line, or
    /// comma-separated), read again every few seconds, instead of `--peer`:
    /// the operator writes it (ConfigMap `<name>-peers`) from the pods it
    /// sees, since its NetworkPolicy closes DNS to the pod.
    #[arg(
        long,
        env = "MCP_WARDEN_PEERS_FILE",
        conflicts_with_all = ["peers", "peers_dns"],
        requires = "peer_key_file"
    )]
    pub(super) peers_file: Option<PathBuf>,
    /// Seconds to keep serving live sessions after SIGTERM.
    #[arg(long, default_value_t = 20)]
    pub(super) drain_timeout_secs: u64,
    /// Where audit lines go: stdout, stderr, off or file:PATH (default
    /// stdout; stderr with --stdio).
    #[arg(long)]
    pub(super) audit: Option<AuditSink>,
    /// A `file:` audit sink is rotated before it grows past this many
    /// bytes (0: never): `PATH` becomes `PATH.1`, and so on.
    #[arg(long, default_value_t = Rotation::default().max_bytes)]
    pub(super) audit_max_bytes: u64,
    /// Rotated audit files kept (`PATH.1` … `PATH.<N>`); older ones are deleted.
    #[arg(long, default_value_t = Rotation::default().keep)]
    pub(super) audit_keep: usize,
    /// Also send audit records to this HTTP store (`http://…`, POSTs of
    /// `application/x-ndjson` batches, retried with backoff).
    #[arg(long, env = "MCP_WARDEN_AUDIT_HTTP")]
    pub(super) audit_http: Option<hyper::Uri>,
    /// Records held for the HTTP store while it is unreachable; beyond
    /// this, new records are dropped (counted and logged).
    #[arg(long, default_value_t = 10_000)]
    pub(super) audit_http_buffer: usize,
    /// Records per POST to the HTTP store, at most.
    #[arg(long, default_value_t = 500)]
    pub(super) audit_http_batch: usize,
    /// File holding a bearer token for the HTTP store.
    #[arg(long, env = "MCP_WARDEN_AUDIT_HTTP_TOKEN_FILE")]
    pub(super) audit_http_token_file: Option<PathBuf>,
    /// Threads that serve clients; 0 (the default) is one per CPU core. A
    /// sidecar limited to one core or less does well with 1: a call then
    /// costs the fewest system calls (six, no wake-ups across threads).
    #[arg(long, env = "MCP_WARDEN_THREADS", default_value_t = 0)]
    pub(super) threads: usize,
    /// Seconds between policy file checks.
    #[arg(long, default_value_t = 2)]
    pub(super) policy_poll_secs: u64,
    /// Give the server command (after `--`) an environment variable
    /// (repeatable): `NAME` passes the facade's own value, `NAME=VALUE` sets
    /// it. Nothing else of the facade's environment reaches the server but
    /// PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TZ and TMPDIR.
    /// `MCP_WARDEN_SERVER_ENV` lists more names, comma-separated.
    #[arg(long = "server-env", value_name = "NAME[=VALUE]")]
    pub(super) server_env: Vec<String>,
    #[command(flatten)]
    pub(super) gateway: gateway::GatewayArgs,
    /// The server command (after `--`).
    #[arg(last = true)]
    pub(super) command: Vec<String>,
}
