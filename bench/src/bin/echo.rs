//! A minimal, fast MCP server for benchmarks: one tool, `echo`, that returns
//! its `message` argument as text. So the cost measured through a proxy is the
//! proxy's, not the server's.
//!
//!     mcp-bench-echo stdio                       newline-delimited JSON-RPC on stdin/stdout
//!     mcp-bench-echo http --listen 127.0.0.1:P   Streamable HTTP on /mcp: sessions
//!                                                (Mcp-Session-Id), JSON answers, DELETE
//!         [--tls-cert CERT.pem --tls-key KEY.pem]  the same over TLS (rustls, HTTP/1.1):
//!                                                the HTTPS upstream the facade's cost over TLS
//!                                                is measured against
//!
//! Handles initialize, ping, tools/list, tools/call; answers other requests
//! with -32601 and ignores notifications.

use std::collections::HashSet;
use std::convert::Infallible;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

fn tool_list() -> Value {
    json!({"tools": [{
        "name": "echo",
        "description": "Returns the message it is given.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "Text to echo back"}},
            "required": ["message"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    }]})
}

/// The answer to one message, or None for a notification / response.
fn handle(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?;
    let method = msg.get("method")?.as_str().unwrap_or("");
    let result = match method {
        "initialize" => {
            let asked = msg
                .pointer("/params/protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let version = VERSIONS
                .iter()
                .find(|v| **v == asked)
                .copied()
                .unwrap_or("2025-06-18");
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "mcp-bench-echo", "version": "0.1.0"}
            })
        }
        // Dual-era: a modern (2026-07-28) client asks this instead of
        // initializing, and every request of its stands alone.
        "server/discover" => json!({
            "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18"],
            "capabilities": {"tools": {"listChanged": false}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcp-bench-echo", "version": "0.1.0"}}
        }),
        "ping" => json!({}),
        "tools/list" => tool_list(),
        "tools/call" => {
            let name = msg.pointer("/params/name").and_then(Value::as_str);
            let text = msg
                .pointer("/params/arguments/message")
                .and_then(Value::as_str);
            match (name, text) {
                (Some("echo"), Some(t)) => json!({"content": [{"type": "text", "text": t}]}),
                (Some("echo"), None) => json!({
                    "content": [{"type": "text", "text": "missing string argument `message`"}],
                    "isError": true
                }),
                _ => {
                    return Some(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": "unknown tool"}}))
                }
            }
        }
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("method not found: {method}")}}))
        }
    };
    let mut result = result;
    if modern(msg) {
        result["resultType"] = json!("complete");
    }
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Whether a request is a modern client's (its version in `_meta`).
fn modern(msg: &Value) -> bool {
    msg.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        == Some("2026-07-28")
        || msg.get("method").and_then(Value::as_str) == Some("server/discover")
}

fn stdio() {
    let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let answers: Vec<Value> = match &msg {
            Value::Array(batch) => batch.iter().filter_map(handle).collect(),
            m => handle(m).into_iter().collect(),
        };
        for a in answers {
            serde_json::to_writer(&mut out, &a).unwrap();
            out.write_all(b"\n").unwrap();
        }
        // Flush once nothing more is waiting: pipelined requests share a write.
        if input.buffer().is_empty() && out.flush().is_err() {
            return;
        }
    }
}

struct Sessions {
    live: Mutex<HashSet<String>>,
    next: AtomicU64,
    salt: u64,
}

fn reply(status: StatusCode, body: Bytes, session: Option<&str>) -> Response<Full<Bytes>> {
    let mut b = Response::builder().status(status);
    if !body.is_empty() {
        b = b.header("content-type", "application/json");
    }
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(Full::new(body)).unwrap()
}

async fn serve(
    req: Request<Incoming>,
    sessions: Arc<Sessions>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() != "/mcp" {
        return Ok(reply(StatusCode::NOT_FOUND, Bytes::new(), None));
    }
    let sid = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let known = |s: &Option<String>| {
        s.as_ref()
            .is_some_and(|s| sessions.live.lock().unwrap().contains(s))
    };
    match *req.method() {
        Method::DELETE => {
            let gone = sid
                .as_ref()
                .is_some_and(|s| sessions.live.lock().unwrap().remove(s));
            let status = if gone {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            return Ok(reply(status, Bytes::new(), None));
        }
        Method::POST => {}
        _ => return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new(), None)),
    }
    let Ok(body) = req.into_body().collect().await else {
        return Ok(reply(StatusCode::BAD_REQUEST, Bytes::new(), None));
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return Ok(reply(StatusCode::BAD_REQUEST, Bytes::new(), None));
    };
    let is_init = msg.get("method").and_then(Value::as_str) == Some("initialize");
    if is_init {
        let n = sessions.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:016x}{:016x}", sessions.salt, n);
        sessions.live.lock().unwrap().insert(id.clone());
        let answer = handle(&msg).unwrap();
        let body = Bytes::from(serde_json::to_vec(&answer).unwrap());
        return Ok(reply(StatusCode::OK, body, Some(&id)));
    }
    if sid.is_none() {
        return Ok(reply(StatusCode::BAD_REQUEST, Bytes::new(), None));
    }
    if !known(&sid) {
        return Ok(reply(StatusCode::NOT_FOUND, Bytes::new(), None));
    }
    let answers: Vec<Value> = match &msg {
        Value::Array(batch) => batch.iter().filter_map(handle).collect(),
        m => handle(m).into_iter().collect(),
    };
    Ok(match answers.len() {
        0 => reply(StatusCode::ACCEPTED, Bytes::new(), None),
        1 if !msg.is_array() => {
            let body = Bytes::from(serde_json::to_vec(&answers[0]).unwrap());
            reply(StatusCode::OK, body, None)
        }
        _ => reply(
            StatusCode::OK,
            Bytes::from(serde_json::to_vec(&answers).unwrap()),
            None,
        ),
    })
}

/// A TLS acceptor for the certificate chain and key (PEM), ALPN http/1.1.
fn tls_acceptor(cert: &str, key: &str) -> tokio_rustls::TlsAcceptor {
    use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .expect("--tls-cert: PEM certificates");
    let key = PrivateKeyDer::from_pem_file(key).expect("--tls-key: a PEM private key");
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("the certificate and key match");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Serve one connection (plain or TLS) with keep-alive.
async fn serve_connection<IO>(io: IO, sessions: Arc<Sessions>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| serve(req, sessions.clone()));
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

fn http(listen: SocketAddr, tls: Option<tokio_rustls::TlsAcceptor>) {
    // One thread: the fast upstream takes at most one core of the two.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.expect("bind");
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let sessions = Arc::new(Sessions {
            live: Mutex::new(HashSet::new()),
            next: AtomicU64::new(1),
            salt,
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        eprintln!("mcp-bench-echo listening on {scheme}://{listen}/mcp");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let sessions = sessions.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            serve_connection(stream, sessions).await;
                        }
                    }
                    None => serve_connection(stream, sessions).await,
                }
            });
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("stdio") => stdio(),
        Some("http") => {
            let flag = |name: &str| {
                args.iter()
                    .position(|a| a == name)
                    .and_then(|i| args.get(i + 1))
                    .map(String::as_str)
            };
            let listen = flag("--listen").unwrap_or("127.0.0.1:3001");
            let tls = match (flag("--tls-cert"), flag("--tls-key")) {
                (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)),
                (None, None) => None,
                _ => panic!("give --tls-cert and --tls-key together"),
            };
            http(listen.parse().expect("--listen ADDR:PORT"), tls);
        }
        _ => {
            eprintln!("usage: mcp-bench-echo stdio | http --listen 127.0.0.1:PORT [--tls-cert C --tls-key K]");
            std::process::exit(2);
        }
    }
}
