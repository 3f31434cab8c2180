//! Name resolution without the C library: a pure-Rust stub resolver
//! (hickory) configured from `resolv.conf` and the hosts file.
//!
//! The release binary is linked statically and runs on an image without NSS
//! modules, where `getaddrinfo` cannot resolve names; this reads the same
//! files glibc would (`nameserver`, `search`, `ndots`, `options timeout`
//! and `attempts` of `/etc/resolv.conf`, or `--resolv-conf`) and asks the
//! name servers itself. Answers are cached for their TTL (at most
//! [`MAX_TTL`]): each connection asks again once that has passed, and the
//! SSRF guard judges every answer, cached or not.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hickory_resolver::config::ResolveHosts;
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::TokioResolver;
use tokio::sync::OnceCell;

/// The longest an answer is reused, whatever its TTL says.
const MAX_TTL: Duration = Duration::from_secs(300);

pub struct Resolver {
    resolv_conf: PathBuf,
    inner: OnceCell<Result<TokioResolver, String>>,
}

impl Resolver {
    /// A resolver configured from `resolv_conf` (read at the first lookup).
    pub fn new(resolv_conf: PathBuf) -> Resolver {
        Resolver {
            resolv_conf,
            inner: OnceCell::new(),
        }
    }

    /// The addresses of `host`: itself when it is an address literal, else
    /// what the name servers (or the hosts file) say, in their order.
    pub async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, String> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let resolver = self
            .inner
            .get_or_init(|| async { build(&self.resolv_conf) })
            .await
            .as_ref()
            .map_err(Clone::clone)?;
        let answer = resolver
            .lookup_ip(host)
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?;
        let addrs: Vec<IpAddr> = answer.iter().collect();
        if addrs.is_empty() {
            return Err(format!("cannot resolve {host}: no addresses"));
        }
        Ok(addrs)
    }
}

fn build(path: &Path) -> Result<TokioResolver, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "cannot read the resolver configuration {}: {e}",
            path.display()
        )
    })?;
    let (config, mut opts) = hickory_resolver::system_conf::parse_resolv_conf(text)
        .map_err(|e| format!("cannot parse {}: {e}", path.display()))?;
    opts.use_hosts_file = ResolveHosts::Always;
    opts.positive_max_ttl = Some(MAX_TTL);
    opts.negative_max_ttl = Some(Duration::from_secs(30));
    let mut builder =
        TokioResolver::builder_with_config(config, TokioConnectionProvider::default());
    *builder.options_mut() = opts;
    Ok(builder.build())
}
