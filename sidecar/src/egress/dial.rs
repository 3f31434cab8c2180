//! Where an approved request connects: the proxy resolves the name itself
//! (never an address the client offers), judges **every** address with the
//! SSRF guard, and connects to the very addresses it judged.
//!
//! ```text
//! host ─▶ lookup (hickory, every request) ─▶ each address: global? or in a client cidr on this port?
//!          │                                   └ any no ─▶ AddressNotAllowed (nothing is connected)
//!          └▶ TCP connect to the judged addresses in order (connect timeout) ─▶ stream
//! ```
//!
//! Names are looked up fully qualified (never through the resolver's
//! search list). One refused address refuses the request, even when others would pass:
//! an answer that mixes public and private addresses is what a rebinding
//! name looks like, and a real service has no reason to send one. Every
//! request asks the resolver again (answers are cached at most for their
//! TTL), so a name whose answer turns private is refused on the lookup
//! that turns.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use super::clients::Client;
use crate::net::guard::Guard;
use crate::net::resolve::Resolver;

/// Why no connection was made.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("{address} is a {class} address{via}, which no approved block of this client holds on port {port}")]
    NotAllowed {
        address: IpAddr,
        class: &'static str,
        via: String,
        port: u16,
    },
    #[error("{0}")]
    Resolve(String),
    #[error("{0}")]
    Connect(String),
    #[error("connect to {0}: timed out after {1} s")]
    Timeout(String, u64),
}

pub struct Dialer {
    resolver: Resolver,
    guard: Guard,
    connect_timeout: Duration,
}

impl Dialer {
    pub fn new(resolver: Resolver, connect_timeout: Duration) -> Dialer {
        Dialer {
            resolver,
            // No block beyond global unicast: a client's own `cidrs` are
            // the only exceptions, per client and port.
            guard: Guard::new(Vec::new()),
            connect_timeout,
        }
    }

    /// The addresses of `host` the client may reach on `port`, all of them
    /// judged; an error names the first refused one.
    pub async fn judge(
        &self,
        client: &Client,
        host: &str,
        port: u16,
    ) -> Result<Vec<IpAddr>, DialError> {
        // A name is looked up as written, fully qualified: the search list
        // of a pod's resolv.conf (`<ns>.svc.cluster.local`, …) must not
        // turn an approved `pypi.org` into a cluster Service's name.
        let query = if host.parse::<IpAddr>().is_ok() {
            host.to_string()
        } else {
            format!("{host}.")
        };
        let addrs = self
            .resolver
            .lookup(&query)
            .await
            .map_err(DialError::Resolve)?;
        judge_all(&self.guard, client, host, port, &addrs)?;
        Ok(addrs)
    }

    /// A connection to one of `addrs` (already judged), and which.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        addrs: &[IpAddr],
    ) -> Result<(TcpStream, IpAddr), DialError> {
        let work = async {
            let mut last = None;
            for ip in addrs {
                match TcpStream::connect(SocketAddr::new(*ip, port)).await {
                    Ok(tcp) => return Ok((tcp, *ip)),
                    Err(e) => last = Some(format!("connect to {host}:{port} ({ip}): {e}")),
                }
            }
            Err(DialError::Connect(last.unwrap_or_else(|| {
                format!("connect to {host}:{port}: no address")
            })))
        };
        match tokio::time::timeout(self.connect_timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(DialError::Timeout(
                format!("{host}:{port}"),
                self.connect_timeout.as_secs(),
            )),
        }
    }
}

/// Every address must pass: global unicast, or inside one of the client's
/// blocks approved for this port.
fn judge_all(
    guard: &Guard,
    client: &Client,
    host: &str,
    port: u16,
    addrs: &[IpAddr],
) -> Result<(), DialError> {
    for ip in addrs {
        if let Err(class) = guard.check(*ip) {
            if !client.cidr_allows(*ip, port) {
                let via = if host.parse::<IpAddr>().is_ok() {
                    String::new()
                } else {
                    format!(" ({host} resolves to it)")
                };
                return Err(DialError::NotAllowed {
                    address: *ip,
                    class,
                    via,
                    port,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::clients::parse;

    fn client() -> std::sync::Arc<Client> {
        let clients = parse(
            r#"{"version":1,"clients":[{"name":"a/b","tokenSha256":"00000000000000000000000000000000000000000000000000000000000000aa",
                "hosts":[{"host":"x.example","port":443}],
                "cidrs":[{"cidr":"127.0.0.0/8","port":443}]}]}"#,
        )
        .unwrap();
        clients.get("a/b").unwrap()
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn every_address_is_judged() {
        let guard = Guard::new(Vec::new());
        let c = client();
        assert!(judge_all(&guard, &c, "x.example", 443, &ips(&["93.184.216.34"])).is_ok());
        // Loopback only inside the client's block, and only on its port.
        assert!(judge_all(&guard, &c, "x.example", 443, &ips(&["127.0.0.5"])).is_ok());
        assert!(judge_all(&guard, &c, "x.example", 80, &ips(&["127.0.0.5"])).is_err());
        // One private address among public ones refuses the lot.
        let err = judge_all(
            &guard,
            &c,
            "x.example",
            443,
            &ips(&["93.184.216.34", "10.1.2.3"]),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                DialError::NotAllowed {
                    class: "private",
                    ..
                }
            ),
            "{err}"
        );
        // IPv4-mapped IPv6 is judged as the IPv4 address it carries.
        assert!(judge_all(&guard, &c, "x.example", 443, &ips(&["::ffff:10.0.0.1"])).is_err());
        assert!(judge_all(&guard, &c, "x.example", 443, &ips(&["::ffff:127.0.0.1"])).is_ok());
        assert!(judge_all(&guard, &c, "x.example", 443, &ips(&["169.254.169.254"])).is_err());
    }
}
