//! Readiness, and what the server is: the facade is ready once the upstream
//! MCP server answers. Retries with backoff until it does.
//!
//! The era is decided here, once (the spec's rule for clients: it is a
//! property of the server, cached for its life): unless `--upstream-era`
//! says, the probe sends `server/discover` with modern `_meta`. A result
//! that lists 2026-07-28 makes the server modern: one shared channel (the
//! hub) serves every caller. Anything else — an error that is not a
//! recognized modern one, silence, an HTTP 4xx without a modern error —
//! makes it legacy, and the probe's `initialize` gives its capabilities (a
//! process gets both at once: a legacy server may ignore requests before
//! its handshake, and waiting on that silence would delay every start).
//! When the first legacy client comes, a modern HTTP server is also asked
//! `initialize` on a link of its own ([`legacy_sessions`]): one that opens
//! legacy sessions too serves legacy clients on sessions of their own (its
//! requests to the client need one), modern clients on the hub.
//!
//! Before it says ready the facade reads the server's tool list once (on the
//! probe's own process for a legacy server, on the hub for a modern one), so
//! the registry — pins, quarantine, the `/tools` inventory the operator
//! publishes — is complete when the pod turns Ready, not only after a
//! client's first `tools/list`. A server that does not list in
//! [`INVENTORY_WAIT`] is ready all the same; its list is still read in the
//! background (and `/tools` says `listed: false` until then).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::era;
use crate::jsonrpc::{self, Kind, Message, RequestId};
use crate::session::channel::{client_info, Channel, Era};
use crate::session::context::{Context, EraChoice, UpstreamInfo};
use crate::upstream::{self, Link, LinkEvent, LinkMode};

/// How long `server/discover` may stay unanswered once the same process
/// answered `initialize` (a dual-era server answers both, in order; a
/// legacy one may ignore requests before its handshake).
const DISCOVER_GRACE: Duration = Duration::from_secs(1);
/// How long a modern HTTP server may take to say whether it opens legacy
/// sessions too.
const LEGACY_TOO_WAIT: Duration = Duration::from_secs(5);
/// How long the server may take to answer at all.
const ANSWER_WAIT: Duration = Duration::from_secs(60);
/// How long readiness waits for the first tool list.
const INVENTORY_WAIT: Duration = Duration::from_secs(10);
/// Pages of the first tool list followed at most.
const INVENTORY_PAGES: usize = 100;

pub async fn until_ready(app: Arc<Context>, router: Arc<super::Router>) {
    let mut delay = Duration::from_millis(200);
    loop {
        match probe(&app).await {
            Ok((info, link)) => {
                let era = info.era;
                let lists_tools = info.capabilities.get("tools").is_some();
                // The hub first: whoever learns the era finds it.
                let hub = match era {
                    Era::Modern => {
                        let hub = Channel::start(app.clone(), Era::Modern, "shared".into(), false);
                        let _ = router.hub.set(hub.clone());
                        Some(hub)
                    }
                    Era::Legacy => {
                        app.spares.refill();
                        None
                    }
                };
                app.set_upstream(info);
                // The first tool list, waited for a while; a slow server's
                // finishes in the background (the operator waits for it).
                let inventory = tokio::spawn(inventory(app.clone(), link, hub, lists_tools));
                let _ = tokio::time::timeout(INVENTORY_WAIT, inventory).await;
                app.ready.store(true, Ordering::Relaxed);
                tracing::info!(
                    upstream = app.target.kind(),
                    era = ?era,
                    "upstream MCP server answered; ready"
                );
                return;
            }
            Err(e) => tracing::warn!(error = %e, "upstream MCP server not ready yet"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Read the server's whole tool list into the registry: a legacy server's
/// on the probe's own link (then closed), a modern one's on the hub.
async fn inventory(
    app: Arc<Context>,
    link: Option<Probe>,
    hub: Option<Arc<Channel>>,
    lists_tools: bool,
) {
    if !lists_tools {
        app.registry.mark_listed();
        return;
    }
    match (hub, link) {
        (Some(hub), _) => hub.refresh_tools().await,
        (None, Some((link, mut events))) => {
            if let Some(tools) = legacy_tools(&link, &mut events).await {
                let policy = app.policy.load_full();
                app.registry.observe(tools, &policy, &app.metrics);
            }
        }
        (None, None) => {}
    }
}

type Probe = (Link, tokio::sync::mpsc::Receiver<LinkEvent>);

/// What the server is (the era questions), and the link that answered,
/// kept for the tool list (a legacy server's is listed on it).
async fn probe(app: &Context) -> Result<(UpstreamInfo, Option<Probe>), String> {
    let choice = app.limits.upstream_era;
    let modern_mode = LinkMode {
        modern: true,
        ..LinkMode::default()
    };
    match (&app.target, choice) {
        (_, EraChoice::Legacy) => {
            let (link, mut events) = connect(app, &LinkMode::default()).await?;
            let info = initialize(&link, &mut events).await?;
            Ok((info, Some((link, events))))
        }
        (_, EraChoice::Modern) => {
            let (link, mut events) = connect(app, &modern_mode).await?;
            Ok((discover(&link, &mut events).await?, None))
        }
        // HTTP: a modern POST first; a legacy server refuses it at once.
        (upstream::UpstreamTarget::Http(_), EraChoice::Auto) => {
            let (link, mut events) = connect(app, &modern_mode).await?;
            match discover(&link, &mut events).await {
                Ok(info) => Ok((info, None)),
                Err(e) => {
                    tracing::info!(reason = %e, "the MCP server is not modern; speaking the legacy protocol");
                    let (link, mut events) = connect(app, &LinkMode::default()).await?;
                    let info = initialize(&link, &mut events).await?;
                    Ok((info, Some((link, events))))
                }
            }
        }
        // A process: both questions at once on the same one (the process is
        // the probe's alone). A modern answer to `server/discover` wins; a
        // legacy server answers `initialize` and ignores or refuses the other.
        (_, EraChoice::Auto) => {
            let (link, mut events) = connect(app, &LinkMode::default()).await?;
            let info = both(&link, &mut events).await?;
            Ok((info, Some((link, events))))
        }
    }
}

/// A legacy server's whole tool list, on the probe's link (its handshake
/// finished with `notifications/initialized` first). `None` when the server
/// has no tools capability, refuses, or the link ends.
async fn legacy_tools(
    link: &Link,
    events: &mut tokio::sync::mpsc::Receiver<LinkEvent>,
) -> Option<Vec<Value>> {
    let initialized = jsonrpc::notification("notifications/initialized", &json!({}));
    link.send(Message::parse(initialized).ok()?).await.ok()?;
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for page in 0..INVENTORY_PAGES {
        let id = RequestId::number(TOOLS_ID + page as u64);
        let params = match cursor.take() {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let request = Message::parse(jsonrpc::request(&id, "tools/list", &params)).ok()?;
        let mut answer = exchange(link, events, request, &id).await.ok()?.to_value();
        if answer.get("error").is_some() {
            return None;
        }
        if let Some(Value::Array(page)) = answer.pointer_mut("/result/tools").map(Value::take) {
            tools.extend(page);
        }
        match answer.pointer("/result/nextCursor") {
            Some(c) if !c.is_null() => cursor = Some(c.clone()),
            _ => return Some(tools),
        }
    }
    Some(tools)
}

/// Whether legacy clients get sessions of their own on the server: always
/// on a legacy server; on a modern HTTP server found by `auto`, if it opens
/// legacy sessions too. Asked once, when the first legacy client comes, so
/// a server only modern clients use never sees an `initialize`.
pub async fn legacy_sessions(app: &Context, router: &super::Router) -> bool {
    let Some(info) = app.upstream.get() else {
        return false;
    };
    if info.era == Era::Legacy {
        return true;
    }
    let asks = app.limits.upstream_era == EraChoice::Auto
        && matches!(app.target, upstream::UpstreamTarget::Http(_));
    *router
        .legacy_too
        .get_or_init(|| async { asks && opens_legacy_sessions(app).await })
        .await
}

/// Whether a modern HTTP server opens legacy sessions too: a legacy
/// `initialize` on a link of its own, ended at once (a modern-only server
/// refuses it straight away; silence counts as no).
async fn opens_legacy_sessions(app: &Context) -> bool {
    let Ok((link, mut events)) = connect(app, &LinkMode::default()).await else {
        return false;
    };
    let opened = tokio::time::timeout(LEGACY_TOO_WAIT, initialize(&link, &mut events))
        .await
        .is_ok_and(|answer| answer.is_ok());
    if opened {
        tracing::info!("the MCP server also opens legacy sessions; legacy clients get their own");
    }
    opened
}

async fn connect(
    app: &Context,
    mode: &LinkMode,
) -> Result<(Link, tokio::sync::mpsc::Receiver<LinkEvent>), String> {
    // The probe is the facade's own request: its credential is the facade's.
    let mut mode = mode.clone();
    mode.credential = app.facade_credential().await?;
    upstream::connect(&app.target, &app.link_limits, &mode)
        .await
        .map_err(|e| e.to_string())
}

const DISCOVER_ID: u64 = 1;
const INITIALIZE_ID: u64 = 2;
const TOOLS_ID: u64 = 3;

fn discover_request() -> Result<Message, String> {
    let mut params = serde_json::Map::new();
    params.insert(
        "_meta".into(),
        Value::Object(era::modern_meta(&json!({}), &client_info())),
    );
    let bytes = jsonrpc::request(
        &RequestId::number(DISCOVER_ID),
        "server/discover",
        &Value::Object(params),
    );
    Message::parse(bytes).map_err(|_| "probe message".to_string())
}

fn initialize_request() -> Result<Message, String> {
    let params = json!({
        "protocolVersion": era::LATEST_LEGACY,
        "capabilities": {},
        "clientInfo": { "name": "mcp-warden-readiness-probe", "version": env!("CARGO_PKG_VERSION") },
    });
    let bytes = jsonrpc::request(&RequestId::number(INITIALIZE_ID), "initialize", &params);
    Message::parse(bytes).map_err(|_| "probe message".to_string())
}

/// `server/discover` and `initialize` on one process: modern if the first
/// is answered with a modern result (waiting [`DISCOVER_GRACE`] for it once
/// `initialize` succeeded), else legacy if `initialize` succeeded.
async fn both(
    link: &Link,
    events: &mut tokio::sync::mpsc::Receiver<LinkEvent>,
) -> Result<UpstreamInfo, String> {
    link.send(discover_request()?)
        .await
        .map_err(|e| e.to_string())?;
    link.send(initialize_request()?)
        .await
        .map_err(|e| e.to_string())?;
    let mut legacy: Option<Result<UpstreamInfo, String>> = None;
    let mut discover_done = false;
    let mut deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    loop {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => return Err("the link closed".into()),
            Err(_) => {
                return legacy.unwrap_or_else(|| {
                    Err(format!("no answer within {} s", ANSWER_WAIT.as_secs()))
                })
            }
        };
        let bytes = match event {
            LinkEvent::Message { bytes, .. } => bytes,
            LinkEvent::Failed { reason, .. } | LinkEvent::Closed { reason } => {
                return legacy.unwrap_or(Err(reason))
            }
        };
        let Ok(m) = Message::parse(bytes) else {
            continue;
        };
        if m.kind != Kind::Response {
            continue;
        }
        match m.id.as_ref().and_then(RequestId::as_number) {
            Some(DISCOVER_ID) => {
                discover_done = true;
                if let Ok(info) = modern_info(&m) {
                    return Ok(info);
                }
            }
            Some(INITIALIZE_ID) => {
                let info = legacy_info(&m);
                if info.is_ok() {
                    deadline = deadline.min(tokio::time::Instant::now() + DISCOVER_GRACE);
                }
                legacy = Some(info);
            }
            _ => continue,
        }
        if discover_done {
            if let Some(result) = legacy.take() {
                return result;
            }
        }
    }
}

/// `server/discover` as a modern client sends it.
async fn discover(
    link: &Link,
    events: &mut tokio::sync::mpsc::Receiver<LinkEvent>,
) -> Result<UpstreamInfo, String> {
    let id = RequestId::number(DISCOVER_ID);
    // A recognized modern error names a modern server: when it says the
    // version the facade asked for is served after all, ask again (the
    // spec's retry), rather than falling back to legacy.
    for _ in 0..3 {
        let answer = tokio::time::timeout(
            ANSWER_WAIT,
            exchange(link, events, discover_request()?, &id),
        )
        .await
        .map_err(|_| "no answer to server/discover".to_string())??;
        if !retry_with_supported(&answer) {
            return modern_info(&answer);
        }
    }
    Err("server/discover kept refusing a version it lists as supported".into())
}

/// Whether `answer` is an UnsupportedProtocolVersion error whose supported
/// list holds a version the facade speaks.
fn retry_with_supported(answer: &Message) -> bool {
    let value = answer.to_value();
    let Some(error) = value.get("error") else {
        return false;
    };
    error.get("code").and_then(Value::as_i64) == Some(era::codes::UNSUPPORTED_VERSION)
        && error
            .pointer("/data/supported")
            .and_then(Value::as_array)
            .is_some_and(|v| v.iter().any(|v| v.as_str().is_some_and(era::is_modern)))
}

/// The legacy handshake's first half: the server's answer says what it is.
async fn initialize(
    link: &Link,
    events: &mut tokio::sync::mpsc::Receiver<LinkEvent>,
) -> Result<UpstreamInfo, String> {
    let id = RequestId::number(INITIALIZE_ID);
    let answer = tokio::time::timeout(
        ANSWER_WAIT,
        exchange(link, events, initialize_request()?, &id),
    )
    .await
    .map_err(|_| format!("no answer to initialize within {} s", ANSWER_WAIT.as_secs()))??;
    legacy_info(&answer)
}

/// A modern server's `server/discover` result, if that is what `answer` is.
fn modern_info(answer: &Message) -> Result<UpstreamInfo, String> {
    let value = answer.to_value();
    if let Some(error) = value.get("error") {
        return Err(format!("server/discover was refused: {error}"));
    }
    let result = value.get("result").cloned().unwrap_or_default();
    let speaks_modern = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|v| v.as_str().is_some_and(era::is_modern)));
    if !speaks_modern {
        return Err("server/discover lists no protocol version the facade speaks".into());
    }
    Ok(UpstreamInfo {
        era: Era::Modern,
        capabilities: result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        server_info: result
            .pointer("/_meta")
            .and_then(|m| m.get(era::meta::SERVER_INFO))
            .or_else(|| result.get("serverInfo"))
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// A legacy server's `initialize` result.
fn legacy_info(answer: &Message) -> Result<UpstreamInfo, String> {
    let value = answer.to_value();
    if value.get("error").is_some() {
        return Err("initialize was refused".into());
    }
    let result = value.get("result").cloned().unwrap_or_default();
    Ok(UpstreamInfo {
        era: Era::Legacy,
        capabilities: result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        server_info: result
            .get("serverInfo")
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// Send `msg` and wait for the answer with `id` (HTTP may hand it back at once).
async fn exchange(
    link: &Link,
    events: &mut tokio::sync::mpsc::Receiver<LinkEvent>,
    msg: Message,
    id: &RequestId,
) -> Result<Message, String> {
    if let Some(answer) = link.send(msg).await.map_err(|e| e.to_string())? {
        return Ok(answer);
    }
    while let Some(event) = events.recv().await {
        match event {
            LinkEvent::Message { bytes, .. } => {
                if let Ok(m) = Message::parse(bytes) {
                    if m.kind == Kind::Response && m.id.as_ref() == Some(id) {
                        return Ok(m);
                    }
                }
            }
            LinkEvent::Failed { reason, .. } | LinkEvent::Closed { reason } => return Err(reason),
        }
    }
    Err("the link closed".to_string())
}
