//! Which addresses the facade may connect to (pure): the SSRF guard.
//!
//! Every address a connection would go to — each address a name resolves
//! to, on every connection, so a name that changes its answer (DNS
//! rebinding) is caught on the connection that would use the new answer —
//! is judged here. Public unicast addresses pass. Addresses that reach the
//! pod itself, the cluster, the node or a cloud's metadata service are
//! refused unless the configuration names a block that holds them
//! (`--upstream-allow-cidr`):
//!
//! | class | blocks |
//! |---|---|
//! | `loopback` | 127.0.0.0/8, ::1 |
//! | `private` | 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7 |
//! | `link-local` | 169.254.0.0/16 (cloud metadata), fe80::/10 |
//! | `shared` | 100.64.0.0/10 (carrier-grade NAT, some clusters' pod ranges) |
//! | `unspecified` | 0.0.0.0/8, :: (connects to the host itself) |
//! | `multicast`, `broadcast`, `reserved` | 224.0.0.0/4, 255.255.255.255, 240.0.0.0/4, ff00::/8 |
//!
//! IPv6 addresses that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`,
//! NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address
//! they lead to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The addresses the configuration allows beyond public unicast.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    allow: Vec<IpNet>,
}

impl Guard {
    /// A guard that also allows every address in `allow`.
    pub fn new(allow: Vec<IpNet>) -> Guard {
        Guard { allow }
    }

    /// `Ok` when the facade may connect to `ip`; else the class that
    /// refuses it (`loopback`, `private`, `link-local`, …).
    pub fn check(&self, ip: IpAddr) -> Result<(), &'static str> {
        let Some(class) = class(ip) else {
            return Ok(());
        };
        let ip = ip.to_canonical();
        if self.allow.iter().any(|net| net.contains(&ip)) {
            return Ok(());
        }
        Err(class)
    }
}

/// The non-public class of `ip`, if it has one.
pub fn class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => class_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => class_v4(v4),
            None => class_v6(v6),
        },
    }
}

fn class_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        _ if a == 100 && (64..128).contains(&b) => "shared",
        _ if a == 0 => "unspecified",
        _ if ip.is_broadcast() => "broadcast",
        _ if ip.is_multicast() => "multicast",
        _ if a >= 240 => "reserved",
        _ => return None,
    })
}

fn class_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if first & 0xfe00 == 0xfc00 => "private",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if ip.is_multicast() => "multicast",
        _ => return None,
    })
}

/// The IPv4 address an IPv6 address leads to, when it carries one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        // NAT64 well-known prefix 64:ff9b::/96.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(v4(hi, lo)),
        // 6to4: 2002:AABB:CCDD::/48.
        [0x2002, hi, lo, ..] => Some(v4(hi, lo)),
        // IPv4-compatible (deprecated) ::a.b.c.d, but not :: and ::1.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => Some(v4(hi, lo)),
        _ => None,
    }
}

/// Parse a CIDR block, or a single address (as /32 or /128).
pub fn parse_cidr(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("`{text}` is not a CIDR block (10.0.0.0/8) or an address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn public_addresses_pass_and_internal_ones_are_refused() {
        let guard = Guard::default();
        for public in ["93.184.216.34", "2606:4700::1111", "8.8.8.8", "203.0.113.7"] {
            assert_eq!(guard.check(ip(public)), Ok(()), "{public}");
        }
        for (addr, class) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("::1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("fd00::1", "private"),
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("100.64.0.1", "shared"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("240.0.0.1", "reserved"),
            // IPv6 spellings of IPv4 addresses are judged as those.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:0a00:0001::1", "private"),
            ("::7f00:1", "loopback"),
        ] {
            assert_eq!(guard.check(ip(addr)), Err(class), "{addr}");
        }
        // Just outside the blocks.
        for edge in ["172.32.0.1", "100.128.0.1", "11.0.0.1", "169.255.0.1"] {
            assert_eq!(guard.check(ip(edge)), Ok(()), "{edge}");
        }
    }

    #[test]
    fn named_blocks_are_allowed_and_nothing_else() {
        let guard = Guard::new(vec![
            parse_cidr("127.0.0.2").unwrap(),
            parse_cidr("10.20.0.0/16").unwrap(),
        ]);
        assert_eq!(guard.check(ip("127.0.0.2")), Ok(()));
        assert_eq!(guard.check(ip("::ffff:127.0.0.2")), Ok(()), "mapped");
        assert_eq!(guard.check(ip("10.20.30.40")), Ok(()));
        assert_eq!(guard.check(ip("127.0.0.1")), Err("loopback"));
        assert_eq!(guard.check(ip("10.21.0.1")), Err("private"));
        assert_eq!(guard.check(ip("169.254.169.254")), Err("link-local"));
    }

    #[test]
    fn cidr_parsing() {
        assert_eq!(parse_cidr("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_cidr(" ::1 ").unwrap().to_string(), "::1/128");
        assert!(parse_cidr("example.com").is_err());
        assert!(parse_cidr("10.0.0.0/33").is_err());
    }
}
