//! Addresses and hosts: which IPs `web_fetch` refuses (every special-purpose range that is not
//! globally reachable, one table: [`SPECIAL_PURPOSE`]) and which hosts are DeepSeek's.
//!
//! An address is looked up in the table by its most specific (longest) matching entry, so a
//! globally reachable exception inside a refused block (PCP anycast `192.0.0.9` inside
//! `192.0.0.0/24`, AMT `2001:3::/32` inside `2001::/23`) is allowed while the rest of the
//! block is refused. The well-known NAT64 prefix `64:ff9b::/96` and the deprecated
//! IPv4-compatible `::/96` carry an IPv4 address in their last 32 bits: they are judged as that
//! address (a NAT64 gateway or a tunnel would deliver to it).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What `web_fetch` does with the addresses of a [`SpecialRange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Refused: not globally reachable (IANA "Globally Reachable" False or N/A), or kept off
    /// for keel's own reasons (said on the entry).
    Refused,
    /// Allowed: a globally reachable exception inside a refused block.
    Allowed,
    /// Judged as the IPv4 address in the last 32 bits.
    ByEmbeddedIpv4,
}

/// One entry of [`SPECIAL_PURPOSE`]: an address block, its registry name and RFC, and what
/// `web_fetch` does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialRange {
    /// The first address of the block.
    pub network: IpAddr,
    /// The prefix length, in bits.
    pub prefix_len: u8,
    /// The block's name in the registry (or, for a block from elsewhere, what it is).
    pub name: &'static str,
    /// The RFC that assigned it.
    pub rfc: &'static str,
    /// Refused, allowed, or judged by the IPv4 address it carries.
    pub reach: Reach,
}

impl SpecialRange {
    /// Whether `ip` is in this block (an address of the other family never is).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix_len))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix_len))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// `127.0.0.0/8 (Loopback, RFC 1122)`.
impl fmt::Display for SpecialRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} ({}, {})",
            self.network, self.prefix_len, self.name, self.rfc
        )
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

#[allow(clippy::too_many_arguments)]
const fn v6(a: u16, b: u16, c: u16, d: u16, e: u16, f: u16, g: u16, h: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h))
}

const fn refused(
    network: IpAddr,
    prefix_len: u8,
    name: &'static str,
    rfc: &'static str,
) -> SpecialRange {
    SpecialRange {
        network,
        prefix_len,
        name,
        rfc,
        reach: Reach::Refused,
    }
}

const fn allowed(
    network: IpAddr,
    prefix_len: u8,
    name: &'static str,
    rfc: &'static str,
) -> SpecialRange {
    SpecialRange {
        network,
        prefix_len,
        name,
        rfc,
        reach: Reach::Allowed,
    }
}

const fn by_ipv4(
    network: IpAddr,
    prefix_len: u8,
    name: &'static str,
    rfc: &'static str,
) -> SpecialRange {
    SpecialRange {
        network,
        prefix_len,
        name,
        rfc,
        reach: Reach::ByEmbeddedIpv4,
    }
}

/// The address blocks `web_fetch` refuses, with the exceptions it allows inside them.
///
/// Every entry of the IANA IPv4 Special-Purpose Address Registry and the IANA IPv6
/// Special-Purpose Address Registry, as of 2025 (IPv4 with RFC 6751's `192.88.99.2`, IPv6 with
/// RFC 9602's `5f00::/16`, RFC 9637's `3fff::/20`, RFC 9665's `2001:1::3` and RFC 9780's dummy
/// prefix), whose "Globally Reachable" is False or N/A is refused (N/A: Teredo `2001::/32`, 6to4
/// `2002::/16`, the deprecated 6to4 relay anycast `192.88.99.0/24`). The globally reachable
/// entries inside them are allowed exceptions. Added to the registries' rows: multicast
/// (`224.0.0.0/4`, `ff00::/8`, from the multicast address space registries), the deprecated
/// site-local `fec0::/10` and the SIIT IPv4-translated `::ffff:0:0:0/96` (both refused), and
/// the two prefixes judged by the IPv4 address they carry (`64:ff9b::/96`, globally reachable
/// in the registry, and the deprecated IPv4-compatible `::/96`). Globally reachable entries
/// outside any refused block (AS112 `192.31.196.0/24`, AMT `192.52.193.0/24`, …) need no row.
#[rustfmt::skip]
pub const SPECIAL_PURPOSE: &[SpecialRange] = &[
    // IANA IPv4 Special-Purpose Address Registry.
    refused(v4(0, 0, 0, 0), 8, "\"This network\"", "RFC 791"),
    refused(v4(0, 0, 0, 0), 32, "\"This host on this network\"", "RFC 1122"),
    refused(v4(10, 0, 0, 0), 8, "Private-Use", "RFC 1918"),
    refused(v4(100, 64, 0, 0), 10, "Shared Address Space", "RFC 6598"),
    refused(v4(127, 0, 0, 0), 8, "Loopback", "RFC 1122"),
    refused(v4(169, 254, 0, 0), 16, "Link Local", "RFC 3927"),
    refused(v4(172, 16, 0, 0), 12, "Private-Use", "RFC 1918"),
    refused(v4(192, 0, 0, 0), 24, "IETF Protocol Assignments", "RFC 6890"),
    refused(v4(192, 0, 0, 0), 29, "IPv4 Service Continuity Prefix", "RFC 7335"),
    refused(v4(192, 0, 0, 8), 32, "IPv4 dummy address", "RFC 7600"),
    allowed(v4(192, 0, 0, 9), 32, "Port Control Protocol Anycast", "RFC 7723"),
    allowed(v4(192, 0, 0, 10), 32, "Traversal Using Relays around NAT Anycast", "RFC 8155"),
    refused(v4(192, 0, 0, 170), 32, "NAT64/DNS64 Discovery", "RFC 8880"),
    refused(v4(192, 0, 0, 171), 32, "NAT64/DNS64 Discovery", "RFC 8880"),
    refused(v4(192, 0, 2, 0), 24, "Documentation (TEST-NET-1)", "RFC 5737"),
    refused(v4(192, 88, 99, 0), 24, "Deprecated (6to4 Relay Anycast)", "RFC 7526"),
    refused(v4(192, 88, 99, 2), 32, "6a44-relay anycast address", "RFC 6751"),
    refused(v4(192, 168, 0, 0), 16, "Private-Use", "RFC 1918"),
    refused(v4(198, 18, 0, 0), 15, "Benchmarking", "RFC 2544"),
    refused(v4(198, 51, 100, 0), 24, "Documentation (TEST-NET-2)", "RFC 5737"),
    refused(v4(203, 0, 113, 0), 24, "Documentation (TEST-NET-3)", "RFC 5737"),
    refused(v4(240, 0, 0, 0), 4, "Reserved", "RFC 1112"),
    refused(v4(255, 255, 255, 255), 32, "Limited Broadcast", "RFC 919"),
    // IPv4 multicast (IANA IPv4 Multicast Address Space Registry).
    refused(v4(224, 0, 0, 0), 4, "Multicast", "RFC 5771"),
    // IANA IPv6 Special-Purpose Address Registry.
    refused(v6(0, 0, 0, 0, 0, 0, 0, 1), 128, "Loopback Address", "RFC 4291"),
    refused(v6(0, 0, 0, 0, 0, 0, 0, 0), 128, "Unspecified Address", "RFC 4291"),
    refused(v6(0, 0, 0, 0, 0, 0xffff, 0, 0), 96, "IPv4-mapped Address", "RFC 4291"),
    by_ipv4(v6(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96, "IPv4-IPv6 Translat.", "RFC 6052"),
    refused(v6(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48, "IPv4-IPv6 Translat.", "RFC 8215"),
    refused(v6(0x100, 0, 0, 0, 0, 0, 0, 0), 64, "Discard-Only Address Block", "RFC 6666"),
    refused(v6(0x100, 0, 0, 1, 0, 0, 0, 0), 64, "Dummy IPv6 Prefix", "RFC 9780"),
    refused(v6(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, "IETF Protocol Assignments", "RFC 2928"),
    refused(v6(0x2001, 0, 0, 0, 0, 0, 0, 0), 32, "TEREDO", "RFC 4380"),
    allowed(v6(0x2001, 1, 0, 0, 0, 0, 0, 1), 128, "Port Control Protocol Anycast", "RFC 7723"),
    allowed(v6(0x2001, 1, 0, 0, 0, 0, 0, 2), 128, "Traversal Using Relays around NAT Anycast", "RFC 8155"),
    allowed(v6(0x2001, 1, 0, 0, 0, 0, 0, 3), 128, "DNS-SD Service Registration Protocol Anycast", "RFC 9665"),
    refused(v6(0x2001, 2, 0, 0, 0, 0, 0, 0), 48, "Benchmarking", "RFC 5180"),
    allowed(v6(0x2001, 3, 0, 0, 0, 0, 0, 0), 32, "AMT", "RFC 7450"),
    allowed(v6(0x2001, 4, 0x112, 0, 0, 0, 0, 0), 48, "AS112-v6", "RFC 7535"),
    refused(v6(0x2001, 0x10, 0, 0, 0, 0, 0, 0), 28, "Deprecated (previously ORCHID)", "RFC 4843"),
    allowed(v6(0x2001, 0x20, 0, 0, 0, 0, 0, 0), 28, "ORCHIDv2", "RFC 7343"),
    allowed(v6(0x2001, 0x30, 0, 0, 0, 0, 0, 0), 28, "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374"),
    refused(v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, "Documentation", "RFC 3849"),
    refused(v6(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, "6to4", "RFC 3056"),
    refused(v6(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, "Documentation", "RFC 9637"),
    refused(v6(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16, "Segment Routing (SRv6) SIDs", "RFC 9602"),
    refused(v6(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, "Unique-Local", "RFC 4193"),
    refused(v6(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "Link-Local Unicast", "RFC 4291"),
    // Not in the registry, refused: site-local (deprecated; IANA IPv6 Address Space) and SIIT's
    // IPv4-translated addresses.
    refused(v6(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "Site-Local (deprecated)", "RFC 3879"),
    refused(v6(0, 0, 0, 0, 0xffff, 0, 0, 0), 96, "IPv4-translated Address", "RFC 2765"),
    // Not in the registry, judged by the IPv4 address it carries: IPv4-compatible (deprecated).
    // `::` and `::1` inside it are refused by their own, longer rows.
    by_ipv4(v6(0, 0, 0, 0, 0, 0, 0, 0), 96, "IPv4-compatible Address (deprecated)", "RFC 4291"),
    // IPv6 multicast (IANA IPv6 Multicast Address Space Registry).
    refused(v6(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "Multicast", "RFC 4291"),
];

/// The most specific entry of [`SPECIAL_PURPOSE`] holding `ip`, if any.
pub fn special_purpose(ip: IpAddr) -> Option<&'static SpecialRange> {
    SPECIAL_PURPOSE
        .iter()
        .filter(|r| r.contains(ip))
        .max_by_key(|r| r.prefix_len)
}

/// Why `web_fetch` refuses an address ([`refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The refused block the address (or the IPv4 address it carries) is in.
    pub range: &'static SpecialRange,
    /// The IPv4 address carried, when the address was judged by it.
    pub carried: Option<Ipv4Addr>,
}

/// `in 127.0.0.0/8 (Loopback, RFC 1122)`, or `carrying 127.0.0.1, in 127.0.0.0/8 (…)`.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.carried {
            Some(v4) => write!(f, "carrying {v4}, in {}", self.range),
            None => write!(f, "in {}", self.range),
        }
    }
}

/// Why `web_fetch` refuses `ip` by default, or `None` for a globally reachable address.
pub fn refusal(ip: IpAddr) -> Option<Refusal> {
    let range = special_purpose(ip)?;
    match range.reach {
        Reach::Refused => Some(Refusal {
            range,
            carried: None,
        }),
        Reach::Allowed => None,
        Reach::ByEmbeddedIpv4 => {
            let IpAddr::V6(v6) = ip else {
                return None;
            };
            let [.., a, b, c, d] = v6.octets();
            let carried = Ipv4Addr::new(a, b, c, d);
            let inner = special_purpose(IpAddr::V4(carried))?;
            (inner.reach == Reach::Refused).then_some(Refusal {
                range: inner,
                carried: Some(carried),
            })
        }
    }
}

/// Whether `ip` is an address `web_fetch` refuses by default ([`refusal`]): anything in a
/// special-purpose block that is not globally reachable ([`SPECIAL_PURPOSE`]).
pub fn is_private(ip: IpAddr) -> bool {
    refusal(ip).is_some()
}

/// Whether `host` is one of DeepSeek's: `deepseek.com` or a name under it (`api.deepseek.com`).
pub fn is_deepseek_host(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "deepseek.com" || host.ends_with(".deepseek.com")
}

/// `scheme://host[:port]` of `url`, or `None` when it is no http(s) URL with a host.
pub fn origin(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url.trim()).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return None;
    }
    Some(parsed.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Every refused block, written out by hand (not read from the table): the block, then its
    /// first address, one inside and its last.
    const REFUSED: &[(&str, [&str; 3])] = &[
        ("0.0.0.0/8", ["0.0.0.0", "0.1.2.3", "0.255.255.255"]),
        ("0.0.0.0/32", ["0.0.0.0", "0.0.0.0", "0.0.0.0"]),
        ("10.0.0.0/8", ["10.0.0.0", "10.1.2.3", "10.255.255.255"]),
        (
            "100.64.0.0/10",
            ["100.64.0.0", "100.100.1.1", "100.127.255.255"],
        ),
        ("127.0.0.0/8", ["127.0.0.0", "127.0.0.1", "127.255.255.255"]),
        (
            "169.254.0.0/16",
            ["169.254.0.0", "169.254.169.254", "169.254.255.255"],
        ),
        (
            "172.16.0.0/12",
            ["172.16.0.0", "172.20.1.1", "172.31.255.255"],
        ),
        ("192.0.0.0/24", ["192.0.0.0", "192.0.0.100", "192.0.0.255"]),
        ("192.0.0.0/29", ["192.0.0.0", "192.0.0.1", "192.0.0.7"]),
        ("192.0.0.8/32", ["192.0.0.8", "192.0.0.8", "192.0.0.8"]),
        (
            "192.0.0.170/32",
            ["192.0.0.170", "192.0.0.170", "192.0.0.170"],
        ),
        (
            "192.0.0.171/32",
            ["192.0.0.171", "192.0.0.171", "192.0.0.171"],
        ),
        ("192.0.2.0/24", ["192.0.2.0", "192.0.2.1", "192.0.2.255"]),
        (
            "192.88.99.0/24",
            ["192.88.99.0", "192.88.99.1", "192.88.99.255"],
        ),
        (
            "192.88.99.2/32",
            ["192.88.99.2", "192.88.99.2", "192.88.99.2"],
        ),
        (
            "192.168.0.0/16",
            ["192.168.0.0", "192.168.1.1", "192.168.255.255"],
        ),
        (
            "198.18.0.0/15",
            ["198.18.0.0", "198.18.5.5", "198.19.255.255"],
        ),
        (
            "198.51.100.0/24",
            ["198.51.100.0", "198.51.100.7", "198.51.100.255"],
        ),
        (
            "203.0.113.0/24",
            ["203.0.113.0", "203.0.113.7", "203.0.113.255"],
        ),
        ("224.0.0.0/4", ["224.0.0.0", "239.1.2.3", "239.255.255.255"]),
        ("240.0.0.0/4", ["240.0.0.0", "250.1.2.3", "255.255.255.254"]),
        (
            "255.255.255.255/32",
            ["255.255.255.255", "255.255.255.255", "255.255.255.255"],
        ),
        ("::1/128", ["::1", "::1", "::1"]),
        ("::/128", ["::", "::", "::"]),
        (
            "::ffff:0:0/96",
            ["::ffff:0:0", "::ffff:8.8.8.8", "::ffff:255.255.255.255"],
        ),
        (
            "::ffff:0:0:0/96",
            ["::ffff:0:0:0", "::ffff:0:808:808", "::ffff:0:ffff:ffff"],
        ),
        (
            "64:ff9b:1::/48",
            [
                "64:ff9b:1::",
                "64:ff9b:1::1",
                "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        ("100::/64", ["100::", "100::1", "100::ffff:ffff:ffff:ffff"]),
        (
            "100:0:0:1::/64",
            [
                "100:0:0:1::",
                "100:0:0:1::1",
                "100:0:0:1:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "2001::/23",
            [
                "2001::",
                "2001:100::1",
                "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "2001::/32",
            ["2001::", "2001::1", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff"],
        ),
        (
            "2001:2::/48",
            ["2001:2::", "2001:2::1", "2001:2:0:ffff:ffff:ffff:ffff:ffff"],
        ),
        (
            "2001:10::/28",
            [
                "2001:10::",
                "2001:12::1",
                "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "2001:db8::/32",
            [
                "2001:db8::",
                "2001:db8::1",
                "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "2002::/16",
            [
                "2002::",
                "2002:808:808::1",
                "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "3fff::/20",
            [
                "3fff::",
                "3fff:1::1",
                "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "5f00::/16",
            [
                "5f00::",
                "5f00:1::1",
                "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "fc00::/7",
            [
                "fc00::",
                "fd12:3456::1",
                "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "fe80::/10",
            [
                "fe80::",
                "fe80::1",
                "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "fec0::/10",
            [
                "fec0::",
                "fec0::1",
                "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
        (
            "ff00::/8",
            [
                "ff00::",
                "ff02::1",
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            ],
        ),
    ];

    /// The globally reachable exceptions inside refused blocks: an address in each.
    const EXCEPTIONS: &[&str] = &[
        "192.0.0.9",
        "192.0.0.10",
        "2001:1::1",
        "2001:1::2",
        "2001:1::3",
        "2001:3::1",
        "2001:3:ffff:ffff:ffff:ffff:ffff:ffff",
        "2001:4:112::1",
        "2001:20::1",
        "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff",
        "2001:30::1",
    ];

    /// Public addresses, some just outside a refused block.
    const PUBLIC: &[&str] = &[
        "8.8.8.8",
        "1.1.1.1",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.0.1.0",
        "192.31.196.1",
        "192.52.193.1",
        "192.88.98.255",
        "192.175.48.1",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::1",
        "2620:4f:8000::1",
        "64:ff9b::808:808",
        "64:ff9b:2::1",
        "2001:200::1",
        "2001:db9::1",
        "2003::1",
        "3ffe::1",
        "3fff:1000::1",
        "::808:808",
    ];

    #[test]
    fn every_refused_block_is_refused_first_inside_and_last() {
        for (block, addrs) in REFUSED {
            for a in addrs {
                assert!(is_private(ip(a)), "{a} ({block}) should be refused");
            }
        }
        // Every refused row of the table is in the hand-written list (nothing untested).
        for r in SPECIAL_PURPOSE.iter().filter(|r| r.reach == Reach::Refused) {
            let listed = REFUSED.iter().any(|(b, _)| {
                let (net, len) = b.split_once('/').unwrap();
                ip(net) == r.network && len.parse::<u8>().unwrap() == r.prefix_len
            });
            assert!(listed, "{r} has no test addresses");
        }
    }

    #[test]
    fn exceptions_inside_refused_blocks_and_public_addresses_are_allowed() {
        for a in EXCEPTIONS.iter().chain(PUBLIC) {
            assert_eq!(refusal(ip(a)), None, "{a} should be allowed");
        }
    }

    #[test]
    fn the_ranges_of_issue_44_are_refused() {
        for a in [
            "::ffff:0:0",
            "::ffff:8.8.8.8",
            "::ffff:127.0.0.1",
            "::ffff:0:8.8.8.8",
            "64:ff9b:1::1",
            "64:ff9b:1::7f00:1",
            "2001::1",
            "100::1",
        ] {
            assert!(is_private(ip(a)), "{a} should be refused");
        }
    }

    #[test]
    fn ipv4_carried_by_nat64_and_compatible_addresses_is_judged() {
        for (a, why) in [
            (
                "64:ff9b::7f00:1",
                "carrying 127.0.0.1, in 127.0.0.0/8 (Loopback, RFC 1122)",
            ),
            (
                "64:ff9b::a00:1",
                "carrying 10.0.0.1, in 10.0.0.0/8 (Private-Use, RFC 1918)",
            ),
            (
                "::169.254.169.254",
                "carrying 169.254.169.254, in 169.254.0.0/16 (Link Local, RFC 3927)",
            ),
            (
                "64:ff9b::c000:8",
                "carrying 192.0.0.8, in 192.0.0.8/32 (IPv4 dummy address, RFC 7600)",
            ),
        ] {
            assert_eq!(refusal(ip(a)).map(|r| r.to_string()).as_deref(), Some(why));
        }
        // A carried exception is allowed like the exception itself.
        assert_eq!(refusal(ip("64:ff9b::c000:9")), None);
    }

    #[test]
    fn a_refusal_names_the_most_specific_block() {
        let why = |a: &str| refusal(ip(a)).map(|r| r.to_string());
        assert_eq!(
            why("2001::1").as_deref(),
            Some("in 2001::/32 (TEREDO, RFC 4380)")
        );
        assert_eq!(
            why("2001:1::4").as_deref(),
            Some("in 2001::/23 (IETF Protocol Assignments, RFC 2928)")
        );
        assert_eq!(
            why("::ffff:8.8.8.8").as_deref(),
            Some("in ::ffff:0.0.0.0/96 (IPv4-mapped Address, RFC 4291)")
        );
        assert_eq!(
            why("100::1").as_deref(),
            Some("in 100::/64 (Discard-Only Address Block, RFC 6666)")
        );
    }

    #[test]
    fn the_table_is_well_formed() {
        for r in SPECIAL_PURPOSE {
            let bits = if r.network.is_ipv4() { 32 } else { 128 };
            assert!(r.prefix_len <= bits, "{r}");
            // No host bits set: the network is the block's first address.
            assert!(r.contains(r.network), "{r}");
            let host_bits_clear = match r.network {
                IpAddr::V4(n) => {
                    u32::from(n)
                        .checked_shl(u32::from(r.prefix_len))
                        .unwrap_or(0)
                        == 0
                }
                IpAddr::V6(n) => {
                    u128::from(n)
                        .checked_shl(u32::from(r.prefix_len))
                        .unwrap_or(0)
                        == 0
                }
            };
            assert!(host_bits_clear, "{r} has host bits set");
            // An exception lies inside a refused block, else it needs no row.
            if r.reach == Reach::Allowed {
                assert!(
                    SPECIAL_PURPOSE.iter().any(|o| o.reach == Reach::Refused
                        && o.prefix_len < r.prefix_len
                        && o.contains(r.network)),
                    "{r} is inside no refused block"
                );
            }
        }
    }

    #[test]
    fn deepseek_hosts_and_origins() {
        assert!(is_deepseek_host("api.deepseek.com"));
        assert!(is_deepseek_host("API.DeepSeek.com."));
        assert!(is_deepseek_host("deepseek.com"));
        assert!(!is_deepseek_host("deepseek.com.evil.example"));
        assert!(!is_deepseek_host("notdeepseek.com"));
        assert_eq!(
            origin("https://api.deepseek.com/v1").as_deref(),
            Some("https://api.deepseek.com")
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/x/y").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin("file:///etc/passwd"), None);
    }
}
