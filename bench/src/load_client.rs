//! The load generator's MCP client (`mcp-bench-load`): one keep-alive HTTP/1
//! connection per worker, a POST with the session's headers (or a modern
//! client's per-request ones), the JSON-RPC response picked out of a JSON or
//! SSE body, and opening and deleting sessions. Kept apart so `load.rs` stays
//! about driving the load and reporting it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub struct Target {
    pub addr: String, // host:port
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub version: String,
    /// A modern (2026-07-28) client: no session; version and capabilities in
    /// every request's `_meta`, `Mcp-Method`/`Mcp-Name` headers.
    pub modern: Option<String>,
}

pub struct Session {
    pub id: Option<String>,
    pub version: String,
}

pub async fn connect(t: &Target) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = tokio::net::TcpStream::connect(&t.addr)
        .await
        .map_err(|e| format!("connect {}: {e}", t.addr))?;
    stream.set_nodelay(true).ok();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub body: Bytes,
    pub sse: bool,
}

pub async fn post(
    tx: &mut SendRequest<Full<Bytes>>,
    t: &Target,
    s: Option<&Session>,
    method: Method,
    body: Bytes,
) -> Result<Answer, String> {
    let mut b = Request::builder()
        .method(method)
        .uri(&t.path)
        .header("host", &t.addr)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = s {
        if let Some(id) = &s.id {
            b = b.header("mcp-session-id", id);
        }
        b = b.header("mcp-protocol-version", &s.version);
    }
    if let Some(tool) = &t.modern {
        b = b
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool);
    }
    for (k, v) in &t.headers {
        b = b.header(k, v);
    }
    let req = b.body(Full::new(body)).map_err(|e| e.to_string())?;
    let fut = async {
        tx.ready().await.map_err(|e| format!("connection: {e}"))?;
        let resp = tx
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        let session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            session,
            body,
            sse,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, fut)
        .await
        .map_err(|_| "timeout".to_string())?
}

/// The JSON-RPC response with this id in a JSON or SSE body.
pub fn response_for(a: &Answer, id: u64) -> Option<Value> {
    let matches =
        |v: &Value| v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none();
    if a.sse {
        let text = std::str::from_utf8(&a.body).ok()?;
        for event in text.split("\n\n") {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&data.join("\n")) {
                if matches(&v) {
                    return Some(v);
                }
            }
        }
        None
    } else {
        let v: Value = serde_json::from_slice(&a.body).ok()?;
        match v {
            Value::Array(items) => items.into_iter().find(matches),
            v if matches(&v) => Some(v),
            _ => None,
        }
    }
}

pub async fn open_session(t: &Target, n: u64) -> Result<Session, String> {
    if t.modern.is_some() {
        return Ok(Session {
            id: None,
            version: "2026-07-28".into(),
        });
    }
    let mut tx = connect(t).await?;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": t.version, "capabilities": {},
        "clientInfo": {"name": "mcp-bench-load", "version": format!("{n}")}}});
    let a = post(
        &mut tx,
        t,
        None,
        Method::POST,
        Bytes::from(init.to_string()),
    )
    .await?;
    if a.status != 200 {
        return Err(format!(
            "initialize: HTTP {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        ));
    }
    let r = response_for(&a, 0).ok_or("initialize: no response")?;
    let version = r
        .pointer("/result/protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("initialize failed: {r}"))?
        .to_string();
    let s = Session {
        id: a.session,
        version,
    };
    let note = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let a = post(&mut tx, t, Some(&s), Method::POST, note).await?;
    if a.status != 202 && a.status != 200 {
        return Err(format!("notifications/initialized: HTTP {}", a.status));
    }
    Ok(s)
}

pub async fn close_session(t: &Target, s: &Session) {
    if s.id.is_none() {
        return;
    }
    if let Ok(mut tx) = connect(t).await {
        let _ = tokio::time::timeout(
            Duration::from_secs(3),
            post(&mut tx, t, Some(s), Method::DELETE, Bytes::new()),
        )
        .await;
    }
}
