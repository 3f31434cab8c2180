//! A backend for the gateway link's unit tests: a raw HTTP/1.1 server on
//! loopback that reads each request whole and hands its JSON body and the
//! connection to the test, which answers (or holds the connection open).

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::GatewayTarget;
use crate::upstream::HttpTarget;

/// What a backend that serves nothing answers.
pub(super) const REFUSED: &str =
    "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// Serve `answer` on a loopback port; returns the port.
pub(super) async fn serve<F, Fut>(answer: F) -> u16
where
    F: Fn(Value, TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                if let Some(body) = read_request(&mut conn).await {
                    answer(body, conn).await;
                }
            });
        }
    });
    port
}

/// One request's JSON body (`Null` when it is none), once its head and as
/// many bytes as it says have arrived.
async fn read_request(conn: &mut TcpStream) -> Option<Value> {
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        read.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&read).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let len = text[..end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            })
            .unwrap_or(0);
        if read.len() >= end + 4 + len {
            return Some(serde_json::from_slice(&read[end + 4..end + 4 + len]).unwrap_or_default());
        }
    }
}

/// A gateway with one backend, `name` (prefix `prefix`), at `port`.
pub(super) fn gateway_at(port: u16, name: &str, prefix: &str) -> Arc<GatewayTarget> {
    let config = crate::net::ClientConfig {
        allow: vec!["127.0.0.0/8".parse().unwrap()],
        ..Default::default()
    };
    let target = HttpTarget {
        uri: format!("http://127.0.0.1:{port}/mcp").parse().unwrap(),
        client: crate::net::Client::new(&config).unwrap(),
    };
    let backends = vec![(name.to_string(), prefix.to_string(), target)];
    Arc::new(GatewayTarget::new(backends, None).unwrap())
}
