//! The bytes of a tunnel, both ways, end to end (the proxy never sees TLS
//! plaintext: it copies what each side sends), with the tunnel's bounds: an
//! idle timeout (no byte either way, or a write that cannot complete, for
//! that long) and a cap on the bytes of the tunnel (both ways together).
//!
//! `tokio::io::copy_bidirectional` has neither bound, so this is its loop
//! with them; a half-close (EOF one way) is passed on and the other way
//! keeps flowing until it ends too.

use std::time::Duration;

use prometheus::IntCounter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const BUF: usize = 32 * 1024;

/// How a tunnel ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Both sides closed.
    Closed,
    /// Nothing moved for the idle timeout.
    Idle,
    /// The byte cap was reached.
    ByteLimit,
    /// A read or write failed (a reset, typically).
    Error(String),
}

impl End {
    /// A sentence for the audit record (`None`: a normal close).
    pub fn detail(&self, idle: Duration, max_bytes: u64) -> Option<String> {
        match self {
            End::Closed => None,
            End::Idle => Some(format!("idle for {} s: closed", idle.as_secs())),
            End::ByteLimit => Some(format!("the tunnel's {max_bytes} bytes are spent: closed")),
            End::Error(e) => Some(format!("ended with an error: {e}")),
        }
    }
}

/// What a tunnel carried.
#[derive(Debug)]
pub struct Relayed {
    pub up: u64,
    pub down: u64,
    pub end: End,
}

/// Copy `client` ⇄ `upstream` until both close or a bound is hit; count
/// bytes as they pass (`up`: client to upstream).
pub async fn relay<C, U>(
    client: C,
    upstream: U,
    idle: Duration,
    max_bytes: u64,
    up_counter: &IntCounter,
    down_counter: &IntCounter,
) -> Relayed
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = tokio::io::split(upstream);
    let mut cbuf = vec![0u8; BUF];
    let mut ubuf = vec![0u8; BUF];
    let (mut client_open, mut upstream_open) = (true, true);
    let (mut up, mut down) = (0u64, 0u64);
    let end = loop {
        if !client_open && !upstream_open {
            break End::Closed;
        }
        tokio::select! {
            read = cr.read(&mut cbuf), if client_open => match read {
                Ok(0) => {
                    client_open = false;
                    let _ = uw.shutdown().await;
                }
                Ok(n) => {
                    if up + down + n as u64 > max_bytes {
                        break End::ByteLimit;
                    }
                    match tokio::time::timeout(idle, uw.write_all(&cbuf[..n])).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => break End::Error(e.to_string()),
                        Err(_) => break End::Idle,
                    }
                    up += n as u64;
                    up_counter.inc_by(n as u64);
                }
                Err(e) => break End::Error(e.to_string()),
            },
            read = ur.read(&mut ubuf), if upstream_open => match read {
                Ok(0) => {
                    upstream_open = false;
                    let _ = cw.shutdown().await;
                }
                Ok(n) => {
                    if up + down + n as u64 > max_bytes {
                        break End::ByteLimit;
                    }
                    match tokio::time::timeout(idle, cw.write_all(&ubuf[..n])).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => break End::Error(e.to_string()),
                        Err(_) => break End::Idle,
                    }
                    down += n as u64;
                    down_counter.inc_by(n as u64);
                }
                Err(e) => break End::Error(e.to_string()),
            },
            _ = tokio::time::sleep(idle) => break End::Idle,
        }
    };
    if end != End::Closed {
        let _ = uw.shutdown().await;
        let _ = cw.shutdown().await;
    }
    Relayed { up, down, end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    fn counters() -> (IntCounter, IntCounter) {
        (
            IntCounter::new("u", "u").unwrap(),
            IntCounter::new("d", "d").unwrap(),
        )
    }

    #[tokio::test]
    async fn bytes_flow_both_ways_and_a_half_close_passes_on() {
        let (client, mut client_far) = duplex(1024);
        let (upstream, mut upstream_far) = duplex(1024);
        let (u, d) = counters();
        let task = tokio::spawn(async move {
            relay(client, upstream, Duration::from_secs(5), 1 << 20, &u, &d).await
        });
        client_far.write_all(b"hello").await.unwrap();
        client_far.shutdown().await.unwrap();
        let mut got = Vec::new();
        upstream_far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello");
        // The other way still flows after the client's half-close.
        upstream_far.write_all(b"a longer answer").await.unwrap();
        upstream_far.shutdown().await.unwrap();
        let mut answer = Vec::new();
        client_far.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"a longer answer");
        let r = task.await.unwrap();
        assert_eq!((r.up, r.down, r.end), (5, 15, End::Closed));
    }

    #[tokio::test]
    async fn the_byte_cap_cuts_the_tunnel() {
        let (client, mut client_far) = duplex(1 << 16);
        let (upstream, mut upstream_far) = duplex(1 << 16);
        let (u, d) = counters();
        let task = tokio::spawn(async move {
            relay(client, upstream, Duration::from_secs(5), 100, &u, &d).await
        });
        upstream_far.write_all(&[7u8; 60]).await.unwrap();
        let mut first = [0u8; 60];
        client_far.read_exact(&mut first).await.unwrap();
        upstream_far.write_all(&[7u8; 60]).await.unwrap();
        let r = task.await.unwrap();
        assert_eq!((r.down, r.end), (60, End::ByteLimit));
    }

    #[tokio::test]
    async fn an_idle_tunnel_is_closed() {
        let (client, mut client_far) = duplex(1024);
        let (upstream, _upstream_far) = duplex(1024);
        let (u, d) = counters();
        let started = std::time::Instant::now();
        let task = tokio::spawn(async move {
            relay(
                client,
                upstream,
                Duration::from_millis(300),
                1 << 20,
                &u,
                &d,
            )
            .await
        });
        // Activity resets the clock; silence then ends the tunnel.
        tokio::time::sleep(Duration::from_millis(200)).await;
        client_far.write_all(b"x").await.unwrap();
        let r = task.await.unwrap();
        assert_eq!((r.up, r.down, r.end), (1, 0, End::Idle));
        assert!(started.elapsed() >= Duration::from_millis(480));
    }
}
