//! An HTTP proxy for HTTPS targets: `HTTPS_PROXY` (or `https_proxy`) and
//! `NO_PROXY`, as curl and most tools read them. The facade opens a tunnel
//! with `CONNECT host:port` and speaks TLS to the target through it, so the
//! proxy sees only the host name. Plain `http://` targets (the server in the
//! pod, on loopback) never go through a proxy.
//!
//! Through a proxy the proxy resolves the name: the facade's SSRF guard
//! then judges only targets given as addresses, and the proxy is where
//! egress by name is controlled.

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The proxy settings read from the environment.
#[derive(Clone, Debug, Default)]
pub struct Proxy {
    /// `host`, `port`, and `Proxy-Authorization` from the URL's userinfo.
    https: Option<(String, u16, Option<String>)>,
    no_proxy: Vec<String>,
}

impl Proxy {
    /// From `HTTPS_PROXY`/`https_proxy` and `NO_PROXY`/`no_proxy`.
    pub fn from_env() -> Result<Proxy, String> {
        let get = |upper: &str, lower: &str| {
            std::env::var(lower)
                .or_else(|_| std::env::var(upper))
                .ok()
                .filter(|v| !v.trim().is_empty())
        };
        let no_proxy = get("NO_PROXY", "no_proxy").unwrap_or_default();
        Proxy::parse(get("HTTPS_PROXY", "https_proxy").as_deref(), &no_proxy)
    }

    pub fn parse(https: Option<&str>, no_proxy: &str) -> Result<Proxy, String> {
        let https = match https {
            None => None,
            Some(url) => Some(parse_proxy_url(url)?),
        };
        let no_proxy = no_proxy
            .split(',')
            .map(|s| s.trim().trim_start_matches('.').to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        Ok(Proxy { https, no_proxy })
    }

    /// The proxy to reach `host` through, if any.
    pub fn for_host(&self, host: &str) -> Option<(&str, u16, Option<&str>)> {
        let (phost, port, auth) = self.https.as_ref()?;
        let host = host.to_ascii_lowercase();
        let excluded = self.no_proxy.iter().any(|entry| {
            entry == "*"
                || host == *entry
                || host.ends_with(&format!(".{entry}"))
                || entry
                    .parse::<ipnet::IpNet>()
                    .ok()
                    .zip(host.parse::<std::net::IpAddr>().ok())
                    .is_some_and(|(net, ip)| net.contains(&ip))
        });
        (!excluded).then_some((phost.as_str(), *port, auth.as_deref()))
    }
}

fn parse_proxy_url(url: &str) -> Result<(String, u16, Option<String>), String> {
    let bad = || {
        format!(
            "HTTPS_PROXY `{}` is not an http://host:port URL",
            redact_userinfo(url)
        )
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| (!url.contains("://")).then_some(url))
        .ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or("");
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let uri: hyper::Uri = format!("http://{hostport}/").parse().map_err(|_| bad())?;
    let host = uri.host().ok_or_else(bad)?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let auth = userinfo.map(|u| {
        let decoded = percent_decode(u);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(decoded)
        )
    });
    Ok((host, uri.port_u16().unwrap_or(80), auth))
}

/// `user:password@` shown as `…@`: a proxy URL in an error never shows its password.
fn redact_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((_, after)) => format!("{scheme}://…@{after}"),
            None => url.to_string(),
        },
        None => url
            .split_once('@')
            .map_or(url.to_string(), |(_, a)| format!("…@{a}")),
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Ask the proxy on `tcp` for a tunnel to `host:port`.
pub async fn connect_tunnel(
    tcp: &mut TcpStream,
    host: &str,
    port: u16,
    auth: Option<&str>,
) -> Result<(), String> {
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = auth {
        head.push_str("Proxy-Authorization: ");
        head.push_str(auth);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    // Read the answer's head byte by byte: what follows it is the tunnel's.
    let mut answer = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() > 8 * 1024 {
            return Err("proxy: the CONNECT answer is too long".into());
        }
        match tcp.read(&mut byte).await {
            Ok(0) => return Err("proxy: closed the connection during CONNECT".into()),
            Ok(_) => answer.push(byte[0]),
            Err(e) => return Err(format!("proxy: {e}")),
        }
    }
    let status_line = String::from_utf8_lossy(&answer);
    let status_line = status_line.lines().next().unwrap_or("");
    let code = status_line.split_whitespace().nth(1).unwrap_or("");
    if code.starts_with('2') {
        Ok(())
    } else {
        Err(format!(
            "proxy refused the tunnel to {target}: {status_line}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_applies_except_where_no_proxy_says() {
        let p = Proxy::parse(
            Some("http://user:p%40ss@proxy.corp:3128"),
            "internal.corp, .svc,10.0.0.0/8,localhost",
        )
        .unwrap();
        let (host, port, auth) = p.for_host("api.example.com").unwrap();
        assert_eq!((host, port), ("proxy.corp", 3128));
        assert_eq!(
            auth,
            Some(
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode("user:p@ss")
                )
                .as_str()
            )
        );
        for direct in [
            "internal.corp",
            "a.internal.corp",
            "x.ns.svc",
            "10.1.2.3",
            "LOCALHOST",
        ] {
            assert!(p.for_host(direct).is_none(), "{direct}");
        }
        assert!(Proxy::parse(None, "").unwrap().for_host("a").is_none());
        assert!(Proxy::parse(Some("http://p:1"), "*")
            .unwrap()
            .for_host("a")
            .is_none());
    }

    #[test]
    fn a_bad_proxy_url_is_refused_without_its_password() {
        let e = Proxy::parse(Some("socks5://u:secret@p:1"), "").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(Proxy::parse(Some("proxy.corp:8080"), "").is_ok());
    }
}
