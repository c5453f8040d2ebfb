//! Addresses and hosts: which IPs are not public (loopback, private, link-local, unique-local
//! and the like, IPv4 inside IPv6 included) and which hosts are DeepSeek's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is an address `web_fetch` refuses by default: anything but a public unicast
/// address. IPv4 carried in IPv6 (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
/// `64:ff9b::/96`, 6to4 `2002::/16`) is judged as the IPv4 address it carries.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (b & 0xc0) == 64)
        // IETF protocol assignments, 192.0.0.0/24; benchmarking, 198.18.0.0/15.
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b & 0xfe) == 18)
        // Reserved, 240.0.0.0/4.
        || a >= 240
}

fn private_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return private_v4(v4);
    }
    let s = ip.segments();
    // IPv4-compatible (deprecated) ::a.b.c.d, other than :: and ::1 themselves.
    if s[..6] == [0; 6] && !(ip.is_unspecified() || ip.is_loopback()) {
        return private_v4(embedded(s[6], s[7]));
    }
    // NAT64, 64:ff9b::/96.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return private_v4(embedded(s[6], s[7]));
    }
    // 6to4, 2002::/16: the IPv4 address is in the next 32 bits.
    if s[0] == 0x2002 {
        return private_v4(embedded(s[1], s[2]));
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique local fc00::/7, link-local fe80::/10, site-local fec0::/10 (deprecated).
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // Documentation, 2001:db8::/32.
        || (s[0] == 0x2001 && s[1] == 0x0db8)
}

fn embedded(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
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

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_loopback_link_local_and_unique_local_are_private() {
        for s in [
            "127.0.0.1",
            "127.8.9.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
        ] {
            assert!(is_private(ip(s)), "{s} should be private");
        }
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(!is_private(ip(s)), "{s} should be public");
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
