//! Which addresses the facade may connect to (pure): the SSRF guard.
//!
//! Every address a connection would go to — each address a name resolves
//! to, on every connection, so a name that changes its answer (DNS
//! rebinding) is caught on the connection that would use the new answer —
//! is judged here. Global unicast addresses pass. Every other address (the
//! pod itself, the cluster, the node, a cloud's metadata service,
//! documentation and benchmarking ranges, multicast, reserved space) is
//! refused unless the configuration names a block that holds it
//! (`--upstream-allow-cidr`).
//!
//! The blocks are data, not code: `special_addresses.txt` beside this file
//! is the IANA IPv4 and IPv6 Special-Purpose Address Registries (every
//! entry with its "Globally Reachable" value) plus the address-space
//! blocks that are not global unicast (multicast, IETF-reserved IPv6 space,
//! the deprecated site-local `fec0::/10`). An address is refused when the
//! most specific block holding it is not marked globally reachable (so
//! `192.0.0.9`, PCP anycast, passes inside the refused `192.0.0.0/24`); the
//! refusal names the block's class (`loopback`, `private`, `link-local`,
//! `shared`, `documentation`, …). A test checks every such block against
//! the guard, so an edit of either cannot drop one.
//!
//! IPv6 addresses that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`,
//! IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are
//! judged first by the IPv4 address they lead to, then as IPv6 addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use ipnet::IpNet;

/// The registries' data (see the module header).
const SPECIAL_ADDRESSES: &str = include_str!("special_addresses.txt");

/// One block of the data file.
#[derive(Clone, Debug)]
struct Block {
    net: IpNet,
    /// The registry's "Globally Reachable" is `true` (else `false` or `n/a`).
    global: bool,
    /// What a refusal calls it.
    class: &'static str,
}

/// The blocks, most specific first (so the first that holds an address is
/// the one that decides).
fn blocks() -> &'static [Block] {
    static BLOCKS: OnceLock<Vec<Block>> = OnceLock::new();
    BLOCKS.get_or_init(|| {
        let mut blocks: Vec<Block> = SPECIAL_ADDRESSES
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| parse_block(l).unwrap_or_else(|e| panic!("special_addresses.txt: {e}: {l}")))
            .collect();
        blocks.sort_by_key(|b| std::cmp::Reverse(b.net.prefix_len()));
        blocks
    })
}

fn parse_block(line: &'static str) -> Result<Block, String> {
    let mut cols = line.split_whitespace();
    let (Some(net), Some(global), Some(class)) = (cols.next(), cols.next(), cols.next()) else {
        return Err("needs a block, a reachability and a class".into());
    };
    let net: IpNet = net.parse().map_err(|e| format!("{net}: {e}"))?;
    if net != net.trunc() {
        return Err(format!("{net} has host bits set"));
    }
    let global = match global {
        "true" => true,
        "false" | "n/a" => false,
        other => return Err(format!("reachability {other:?} is not true, false or n/a")),
    };
    Ok(Block { net, global, class })
}

/// The addresses the configuration allows beyond global unicast.
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

/// The class of `ip` when it is not global unicast.
pub fn class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(_) => listed(ip),
        IpAddr::V6(v6) => embedded_v4(v6)
            .and_then(|v4| listed(IpAddr::V4(v4)))
            .or_else(|| listed(ip)),
    }
}

/// The class of the most specific block holding `ip`, unless that block is
/// globally reachable.
fn listed(ip: IpAddr) -> Option<&'static str> {
    let block = blocks().iter().find(|b| b.net.contains(&ip))?;
    (!block.global).then_some(block.class)
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
        for public in [
            "93.184.216.34",
            "2606:4700::1111",
            "8.8.8.8",
            "1.1.1.1",
            "2001:4860:4860::8888",
            "64:ff9b::808:808",
            "192.0.0.9",
        ] {
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
            ("203.0.113.7", "documentation"),
            ("2001:db8::1", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("192.0.0.1", "ietf-protocol"),
            ("2002:0808:0808::1", "6to4"),
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
    fn local_use_nat64_and_site_local_are_refused() {
        let guard = Guard::default();
        for addr in [
            "64:ff9b:1::a00:1",
            "64:ff9b:1:ffff::1",
            "fec0::1",
            "feff::1",
        ] {
            assert!(guard.check(ip(addr)).is_err(), "{addr}");
        }
    }

    /// The first, a middle and the last address of a block.
    fn samples(net: IpNet) -> [IpAddr; 3] {
        let mid = |a: IpAddr, b: IpAddr| match (a, b) {
            (IpAddr::V4(a), IpAddr::V4(b)) => IpAddr::V4(Ipv4Addr::from(
                ((u32::from(a) as u64 + u32::from(b) as u64) / 2) as u32,
            )),
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let (a, b) = (u128::from(a), u128::from(b));
                IpAddr::V6(Ipv6Addr::from(a / 2 + b / 2 + (a % 2 + b % 2) / 2))
            }
            _ => unreachable!(),
        };
        [
            net.network(),
            mid(net.network(), net.broadcast()),
            net.broadcast(),
        ]
    }

    /// Every registry block not marked globally reachable is refused, at
    /// its first, middle and last address, unless a more specific block
    /// that is globally reachable holds that address (judged from the data
    /// file's own lines, not through the guard's lookup).
    #[test]
    fn every_block_not_globally_reachable_is_refused() {
        let guard = Guard::default();
        let lines: Vec<Block> = SPECIAL_ADDRESSES
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| parse_block(l).unwrap())
            .collect();
        let mut judged = 0;
        for block in lines.iter().filter(|b| !b.global) {
            for addr in samples(block.net) {
                let decider = lines
                    .iter()
                    .filter(|b| b.net.contains(&addr))
                    .max_by_key(|b| b.net.prefix_len())
                    .unwrap();
                if decider.global {
                    continue;
                }
                assert!(guard.check(addr).is_err(), "{addr} in {}", block.net);
                judged += 1;
            }
        }
        assert!(judged > 150, "{judged}");
        // The globally reachable ones pass (the NAT64 prefix by the IPv4
        // address it carries).
        for block in lines
            .iter()
            .filter(|b| b.global && b.net.to_string() != "64:ff9b::/96")
        {
            assert_eq!(guard.check(block.net.network()), Ok(()), "{}", block.net);
        }
    }

    /// The registries' blocks that are not globally reachable, pinned here
    /// so that dropping a line of the data file fails a test too.
    #[test]
    fn the_data_file_holds_every_registry_block() {
        let listed: Vec<IpNet> = blocks().iter().map(|b| b.net).collect();
        for net in [
            "0.0.0.0/8",
            "0.0.0.0/32",
            "10.0.0.0/8",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "169.254.0.0/16",
            "172.16.0.0/12",
            "192.0.0.0/24",
            "192.0.0.0/29",
            "192.0.0.8/32",
            "192.0.0.170/32",
            "192.0.0.171/32",
            "192.0.2.0/24",
            "192.88.99.0/24",
            "192.88.99.2/32",
            "192.168.0.0/16",
            "198.18.0.0/15",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "240.0.0.0/4",
            "255.255.255.255/32",
            "224.0.0.0/4",
            "::1/128",
            "::/128",
            "::ffff:0:0/96",
            "64:ff9b:1::/48",
            "100::/64",
            "100:0:0:1::/64",
            "2001::/23",
            "2001::/32",
            "2001:2::/48",
            "2001:10::/28",
            "2001:db8::/32",
            "2002::/16",
            "3fff::/20",
            "5f00::/16",
            "fc00::/7",
            "fe80::/10",
            "fec0::/10",
            "ff00::/8",
        ] {
            let net: IpNet = net.parse().unwrap();
            assert!(listed.contains(&net), "{net} is missing");
            assert!(Guard::default().check(net.network()).is_err(), "{net}");
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
        let v6 = Guard::new(vec![parse_cidr("fec0::/10").unwrap()]);
        assert_eq!(v6.check(ip("fec0::1")), Ok(()));
        assert_eq!(v6.check(ip("fe80::1")), Err("link-local"));
    }

    #[test]
    fn cidr_parsing() {
        assert_eq!(parse_cidr("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_cidr(" ::1 ").unwrap().to_string(), "::1/128");
        assert!(parse_cidr("example.com").is_err());
        assert!(parse_cidr("10.0.0.0/33").is_err());
    }
}
