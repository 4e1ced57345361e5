//! Which addresses the fetcher may connect to.
//!
//! A crawler fetches URLs that strangers wrote, so without a guard a page could point it at
//! the machine it runs on, the private network behind it, or the cloud metadata service that
//! hands out credentials (server-side request forgery). The guard sits where names become
//! addresses, in [`GuardedResolver`], because only there is the real destination known: a
//! public name may resolve to 10.0.0.1. reqwest never asks the resolver about IP-literal
//! hosts, so [`check_url_host`] covers those; the fetcher runs both on every redirect hop.
//!
//! Everything outside ordinary public unicast space is refused unless an allow-list
//! (`--allow-address`) covers it, so tests, demos and intranet crawls opt in explicitly.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use thiserror::Error;
use url::{Host, Url};

/// Kinds of address refused unless allow-listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockedCategory {
    /// 0.0.0.0/8 ("this network") and `::`; connecting to 0.0.0.0 reaches the local host on
    /// Linux.
    Unspecified,
    /// 127.0.0.0/8 and `::1`.
    Loopback,
    /// RFC 1918 networks, IPv6 unique-local (fc00::/7) and deprecated site-local (fec0::/10).
    Private,
    /// 100.64.0.0/10, carrier-grade NAT space: not public, often internal in clouds.
    SharedAddressSpace,
    /// 169.254.0.0/16 and fe80::/10.
    LinkLocal,
    /// Cloud instance-metadata endpoints, which hand out credentials to whoever asks.
    Metadata,
    /// 224.0.0.0/4 and ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// Documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32,
    /// 3fff::/20): never on the Internet, so a host there is a local configuration.
    Documentation,
    /// Benchmarking ranges (198.18.0.0/15, 2001:2::/48), used in practice by local proxies
    /// and lab networks.
    Benchmarking,
    /// Everything else that is not public unicast: 240.0.0.0/4, 192.0.0.0/24, the IETF
    /// protocol block 2001::/23 (Teredo included) and IPv6 outside 2000::/3.
    Reserved,
}

impl BlockedCategory {
    /// A short lower-case name, for error messages, logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::SharedAddressSpace => "shared-address-space",
            Self::LinkLocal => "link-local",
            Self::Metadata => "metadata",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Reserved => "reserved",
        }
    }
}

impl fmt::Display for BlockedCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

use BlockedCategory as C;

/// IPv4 rules, first match wins; `None` marks a public exception inside a wider blocked range.
/// Single metadata addresses come before the link-local, shared and reserved ranges holding them.
const IPV4_RULES: &[([u8; 4], u8, Option<BlockedCategory>)] = &[
    ([169, 254, 169, 254], 32, Some(C::Metadata)), // AWS, GCP, Azure, OpenStack, ...
    ([169, 254, 170, 2], 32, Some(C::Metadata)),   // AWS ECS task credentials
    ([100, 100, 100, 200], 32, Some(C::Metadata)), // Alibaba Cloud
    ([192, 0, 0, 192], 32, Some(C::Metadata)),     // Oracle Cloud (legacy)
    ([192, 0, 0, 9], 32, None),                    // PCP anycast, globally reachable
    ([192, 0, 0, 10], 32, None),                   // TURN anycast, globally reachable
    ([255, 255, 255, 255], 32, Some(C::Broadcast)),
    ([0, 0, 0, 0], 8, Some(C::Unspecified)),
    ([10, 0, 0, 0], 8, Some(C::Private)),
    ([100, 64, 0, 0], 10, Some(C::SharedAddressSpace)),
    ([127, 0, 0, 0], 8, Some(C::Loopback)),
    ([169, 254, 0, 0], 16, Some(C::LinkLocal)),
    ([172, 16, 0, 0], 12, Some(C::Private)),
    ([192, 0, 0, 0], 24, Some(C::Reserved)),
    ([192, 0, 2, 0], 24, Some(C::Documentation)),
    ([192, 168, 0, 0], 16, Some(C::Private)),
    ([198, 18, 0, 0], 15, Some(C::Benchmarking)),
    ([198, 51, 100, 0], 24, Some(C::Documentation)),
    ([203, 0, 113, 0], 24, Some(C::Documentation)),
    ([224, 0, 0, 0], 4, Some(C::Multicast)),
    ([240, 0, 0, 0], 4, Some(C::Reserved)),
];

/// IPv6 rules for addresses that do not embed an IPv4 address, first match wins. Only
/// 2000::/3 is allocated for global unicast, so the last rule refuses everything outside it.
const IPV6_RULES: &[(u128, u8, Option<BlockedCategory>)] = &[
    (0xfd00_0ec2_0000_0000_0000_0000_0000_0254, 128, Some(C::Metadata)), // AWS (IPv6)
    // Globally reachable exceptions inside the IETF protocol block 2001::/23.
    (0x2001_0001_0000_0000_0000_0000_0000_0001, 128, None), // PCP anycast
    (0x2001_0001_0000_0000_0000_0000_0000_0002, 128, None), // TURN anycast
    (0x2001_0001_0000_0000_0000_0000_0000_0003, 128, None), // DNS-SD SRP anycast
    (0x2001_0003_0000_0000_0000_0000_0000_0000, 32, None),  // AMT
    (0x2001_0004_0112_0000_0000_0000_0000_0000, 48, None),  // AS112
    (0x2001_0020_0000_0000_0000_0000_0000_0000, 28, None),  // ORCHIDv2
    (0x2001_0030_0000_0000_0000_0000_0000_0000, 28, None),  // DRIP
    (0x2001_0002_0000_0000_0000_0000_0000_0000, 48, Some(C::Benchmarking)),
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 23, Some(C::Reserved)),
    (0x2001_0db8_0000_0000_0000_0000_0000_0000, 32, Some(C::Documentation)),
    (0x3fff_0000_0000_0000_0000_0000_0000_0000, 20, Some(C::Documentation)),
    (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7, Some(C::Private)),
    (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10, Some(C::LinkLocal)),
    (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10, Some(C::Private)),
    (0xff00_0000_0000_0000_0000_0000_0000_0000, 8, Some(C::Multicast)),
    (0x2000_0000_0000_0000_0000_0000_0000_0000, 3, None),
    (0, 0, Some(C::Reserved)),
];

/// The category of `ip`, or None for an ordinary public address.
///
/// IPv6 forms that carry an IPv4 address (mapped `::ffff:a.b.c.d`, the deprecated compatible
/// `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d` and 6to4 `2002:aabb:ccdd::`) are judged by that IPv4
/// address, since that is where a connection may end up. Metadata endpoints are reported as
/// [`BlockedCategory::Metadata`] even though wider ranges (link-local, shared, private) hold them.
pub fn category(ip: IpAddr) -> Option<BlockedCategory> {
    match ip {
        IpAddr::V4(v4) => category_v4(v4),
        IpAddr::V6(v6) => category_v6(v6),
    }
}

fn category_v4(ip: Ipv4Addr) -> Option<BlockedCategory> {
    let bits = u32::from(ip);
    IPV4_RULES
        .iter()
        .find(|(network, len, _)| {
            prefix_matches(u128::from(bits), u128::from(u32::from_be_bytes(*network)), 32, *len)
        })
        .and_then(|(_, _, verdict)| *verdict)
}

fn category_v6(ip: Ipv6Addr) -> Option<BlockedCategory> {
    let bits = u128::from(ip);
    if ip.is_unspecified() {
        return Some(C::Unspecified);
    }
    if ip.is_loopback() {
        return Some(C::Loopback);
    }
    if let Some(embedded) = embedded_ipv4(bits) {
        return category_v4(embedded);
    }
    IPV6_RULES
        .iter()
        .find(|(network, len, _)| prefix_matches(bits, *network, 128, *len))
        .and_then(|(_, _, verdict)| *verdict)
}

/// IPv6 /96 prefixes whose low 32 bits are an IPv4 address the connection leads to.
const IPV4_CARRYING_PREFIXES: &[u128] = &[
    0x0000_0000_0000_0000_0000_ffff_0000_0000, // ::ffff:0:0/96, IPv4-mapped
    0x0000_0000_0000_0000_0000_0000_0000_0000, // ::/96, IPv4-compatible (:: and ::1 come before)
    0x0064_ff9b_0000_0000_0000_0000_0000_0000, // 64:ff9b::/96, NAT64
];

/// The IPv4 address inside an IPv6 address of a form that leads to it, if any.
fn embedded_ipv4(bits: u128) -> Option<Ipv4Addr> {
    if IPV4_CARRYING_PREFIXES.iter().any(|prefix| prefix_matches(bits, *prefix, 128, 96)) {
        // Truncation keeps the low 32 bits, where these forms put the IPv4 address.
        return Some(Ipv4Addr::from(bits as u32));
    }
    if prefix_matches(bits, 0x2002_0000_0000_0000_0000_0000_0000_0000, 128, 16) {
        // 6to4 (2002::/16): the IPv4 address follows the 16-bit prefix.
        return Some(Ipv4Addr::from((bits >> 80) as u32));
    }
    None
}

/// Whether the top `len` of `width` bits of `bits` equal those of `network`.
fn prefix_matches(bits: u128, network: u128, width: u32, len: u8) -> bool {
    // A prefix as long as the address, or longer, compares every bit.
    let shift = width.saturating_sub(u32::from(len));
    // Shifting a u128 by 128 or more is no number: a zero-length prefix matches all.
    bits.checked_shr(shift).unwrap_or(0) == network.checked_shr(shift).unwrap_or(0)
}

/// Which non-public addresses may be connected to anyway. The default allows none.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    allowed: Vec<IpNet>,
}

impl AddressPolicy {
    /// A policy that lets through any address inside one of `allowed`.
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self { allowed }
    }

    /// Ok for public addresses and for any address inside an allowed network.
    ///
    /// `host` is only for the error message. An IPv4-mapped IPv6 address is allowed by the
    /// IPv4 network holding its IPv4 form, so that allowing 127.0.0.0/8 also covers a resolver
    /// answering `::ffff:127.0.0.1`.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), BlockedAddress> {
        let Some(category) = category(ip) else {
            return Ok(());
        };
        let canonical = ip.to_canonical();
        if self.allowed.iter().any(|network| network.contains(&ip) || network.contains(&canonical)) {
            return Ok(());
        }
        Err(BlockedAddress { host: host.to_owned(), address: ip, category })
    }
}

/// A host led to an address the policy refuses.
#[derive(Debug, Clone, Error)]
#[error("{host} is {address} ({category}), refused (add it with --allow-address to crawl it)")]
pub struct BlockedAddress {
    pub host: String,
    pub address: IpAddr,
    pub category: BlockedCategory,
}

/// A host name could not be turned into addresses.
#[derive(Debug, Error)]
pub enum DnsFailure {
    #[error("cannot resolve {host}: {source}")]
    Lookup {
        host: String,
        #[source]
        source: io::Error,
    },
    #[error("{host} has no addresses")]
    NoAddresses { host: String },
}

/// The resolver given to reqwest: turns names into addresses, then drops those the policy
/// refuses, so a connection can only go to an address that passed the check.
///
/// `--resolve` overrides come first (names compared case-insensitively, a trailing dot
/// ignored); other names go to the system resolver. Addresses are returned with port 0,
/// which reqwest replaces with the URL's port. If every address is refused the lookup fails
/// with the first [`BlockedAddress`]; [`find_cause`] digs it out of reqwest's error.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
    overrides: Arc<HashMap<String, Vec<IpAddr>>>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`; `overrides` pairs host names with addresses, and a name
    /// given several times gets all its addresses, in order.
    pub fn new(policy: AddressPolicy, overrides: Vec<(String, IpAddr)>) -> Self {
        let mut map: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for (host, ip) in overrides {
            map.entry(normalize_host(&host)).or_default().push(ip);
        }
        Self { policy: Arc::new(policy), overrides: Arc::new(map) }
    }

    /// The policy the resolver enforces, for checking IP-literal hosts with [`check_url_host`].
    pub fn policy(&self) -> &AddressPolicy {
        &self.policy
    }

    async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, Box<dyn StdError + Send + Sync>> {
        let candidates: Vec<IpAddr> = match self.overrides.get(&normalize_host(host)) {
            Some(ips) => ips.clone(),
            None => tokio::net::lookup_host((host, 0))
                .await
                .map_err(|source| DnsFailure::Lookup { host: host.to_owned(), source })?
                .map(|address| address.ip())
                .collect(),
        };
        let mut first_refusal = None;
        let mut kept = Vec::with_capacity(candidates.len());
        for ip in candidates {
            match self.policy.check(host, ip) {
                Ok(()) => kept.push(SocketAddr::new(ip, 0)),
                Err(refusal) => {
                    first_refusal.get_or_insert(refusal);
                }
            }
        }
        match (kept.is_empty(), first_refusal) {
            (false, _) => Ok(kept),
            (true, Some(refusal)) => Err(refusal.into()),
            (true, None) => Err(DnsFailure::NoAddresses { host: host.to_owned() }.into()),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.clone();
        Box::pin(async move {
            let addresses = resolver.lookup(name.as_str()).await?;
            let addrs: Addrs = Box::new(addresses.into_iter());
            Ok(addrs)
        })
    }
}

/// Host names are case-insensitive and `example.com.` is `example.com`.
fn normalize_host(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase()
}

/// Checks a URL whose host is an IP literal, which reqwest connects to without asking the
/// resolver. Domain hosts pass here: the resolver checks what they resolve to.
pub fn check_url_host(policy: &AddressPolicy, url: &Url) -> Result<(), BlockedAddress> {
    let ip = match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(Host::Domain(_)) | None => return Ok(()),
    };
    policy.check(url.host_str().unwrap_or_default(), ip)
}

/// Finds an error of type `E` among `error` and its sources.
///
/// reqwest buries the resolver's error several layers down. An `io::Error` wrapping a custom
/// error reports that error's source rather than the error itself, so the wrapped error is
/// looked at too.
pub fn find_cause<'a, E: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a E> {
    let mut current = Some(error);
    while let Some(layer) = current {
        if let Some(found) = layer.downcast_ref::<E>() {
            return Some(found);
        }
        // An `io::Error` reports its wrapped error's source as its own, skipping the
        // wrapped error itself (TLS failures are a rustls error in two io::Errors).
        current = match layer.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(wrapped) => Some(wrapped as &(dyn StdError + 'static)),
            None => layer.source(),
        };
    }
    None
}

/// Parses an `--allow-address` value: an IP address (a single-address network) or a network
/// in CIDR notation. Host bits are cleared, so `10.1.2.3/8` means `10.0.0.0/8`.
pub fn parse_allowed_network(raw: &str) -> Result<IpNet, String> {
    let text = raw.trim();
    if let Ok(network) = text.parse::<IpNet>() {
        return Ok(network.trunc());
    }
    match text.parse::<IpAddr>() {
        Ok(ip) => Ok(IpNet::from(ip)),
        Err(_) => {
            Err(format!("{raw:?} is neither an IP address nor a network such as 10.0.0.0/8 or fd00::/8"))
        }
    }
}

/// Parses a `--resolve` value, `HOST=IP`, into a lower-cased host name and its address.
pub fn parse_resolve(raw: &str) -> Result<(String, IpAddr), String> {
    let Some((host, ip)) = raw.split_once('=') else {
        return Err(format!("{raw:?} is not HOST=IP"));
    };
    let host = normalize_host(host.trim());
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || matches!(c, ':' | '/' | '[' | ']')) {
        return Err(format!("{raw:?}: {host:?} is not a host name"));
    }
    if host.parse::<IpAddr>().is_ok() {
        // reqwest connects to IP literals directly, so such an override would never apply.
        return Err(format!("{raw:?}: the host is already an IP address"));
    }
    let ip = ip.trim();
    let bare = ip.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).unwrap_or(ip);
    match bare.parse::<IpAddr>() {
        Ok(address) => Ok((host, address)),
        Err(_) => Err(format!("{raw:?}: {ip:?} is not an IP address")),
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn net(text: &str) -> IpNet {
        parse_allowed_network(text).unwrap()
    }

    #[test]
    fn categories() {
        let table: &[(&str, Option<BlockedCategory>)] = &[
            // Public.
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("93.184.215.14", None),
            ("192.0.0.9", None),
            ("2606:4700::1", None),
            ("2a00:1450:4001:80b::200e", None),
            ("2001:4:112::1", None),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::808:808", None),
            ("2002:808:808::1", None),
            // Unspecified.
            ("0.0.0.0", Some(C::Unspecified)),
            ("0.1.2.3", Some(C::Unspecified)),
            ("::", Some(C::Unspecified)),
            // Loopback.
            ("127.0.0.1", Some(C::Loopback)),
            ("127.255.255.254", Some(C::Loopback)),
            ("::1", Some(C::Loopback)),
            ("::ffff:127.0.0.1", Some(C::Loopback)),
            ("::127.0.0.1", Some(C::Loopback)),
            ("2002:7f00:1::", Some(C::Loopback)),
            // Private.
            ("10.0.0.1", Some(C::Private)),
            ("172.16.0.1", Some(C::Private)),
            ("172.31.255.255", Some(C::Private)),
            ("192.168.1.1", Some(C::Private)),
            ("fd12:3456::1", Some(C::Private)),
            ("fc00::1", Some(C::Private)),
            ("fec0::1", Some(C::Private)),
            ("::ffff:10.0.0.1", Some(C::Private)),
            ("64:ff9b::a00:1", Some(C::Private)),
            // Just outside private ranges.
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("11.0.0.1", None),
            // Shared address space.
            ("100.64.0.1", Some(C::SharedAddressSpace)),
            ("100.127.255.255", Some(C::SharedAddressSpace)),
            ("100.128.0.0", None),
            // Link-local.
            ("169.254.1.1", Some(C::LinkLocal)),
            ("fe80::1", Some(C::LinkLocal)),
            ("::ffff:169.254.1.1", Some(C::LinkLocal)),
            // Metadata, before the ranges holding them.
            ("169.254.169.254", Some(C::Metadata)),
            ("169.254.170.2", Some(C::Metadata)),
            ("100.100.100.200", Some(C::Metadata)),
            ("192.0.0.192", Some(C::Metadata)),
            ("fd00:ec2::254", Some(C::Metadata)),
            ("::ffff:169.254.169.254", Some(C::Metadata)),
            ("64:ff9b::a9fe:a9fe", Some(C::Metadata)),
            // Multicast.
            ("224.0.0.1", Some(C::Multicast)),
            ("239.255.255.250", Some(C::Multicast)),
            ("ff02::1", Some(C::Multicast)),
            ("ff0e::1", Some(C::Multicast)),
            // Broadcast.
            ("255.255.255.255", Some(C::Broadcast)),
            ("::ffff:255.255.255.255", Some(C::Broadcast)),
            // Documentation.
            ("192.0.2.1", Some(C::Documentation)),
            ("198.51.100.7", Some(C::Documentation)),
            ("203.0.113.9", Some(C::Documentation)),
            ("2001:db8::1", Some(C::Documentation)),
            ("3fff::1", Some(C::Documentation)),
            // Benchmarking.
            ("198.18.0.1", Some(C::Benchmarking)),
            ("198.19.255.255", Some(C::Benchmarking)),
            ("2001:2::1", Some(C::Benchmarking)),
            // Reserved.
            ("240.0.0.1", Some(C::Reserved)),
            ("255.255.255.254", Some(C::Reserved)),
            ("192.0.0.8", Some(C::Reserved)),
            ("2001::1", Some(C::Reserved)),
            ("100::1", Some(C::Reserved)),
            ("64:ff9b:1::1", Some(C::Reserved)),
            ("5f00::1", Some(C::Reserved)),
            ("4000::1", Some(C::Reserved)),
        ];
        for (text, expected) in table {
            assert_eq!(category(ip(text)), *expected, "{text}");
        }
    }

    #[test]
    fn category_names() {
        assert_eq!(C::Loopback.to_string(), "loopback");
        assert_eq!(C::LinkLocal.as_str(), "link-local");
        assert_eq!(C::SharedAddressSpace.as_str(), "shared-address-space");
        assert_eq!(C::Metadata.to_string(), "metadata");
    }

    #[test]
    fn policy_blocks_by_default() {
        let policy = AddressPolicy::default();
        assert!(policy.check("a", ip("8.8.8.8")).is_ok());
        assert!(policy.check("a", ip("2606:4700::1")).is_ok());
        let refusal = policy.check("internal.example", ip("10.1.2.3")).unwrap_err();
        assert_eq!(refusal.host, "internal.example");
        assert_eq!(refusal.address, ip("10.1.2.3"));
        assert_eq!(refusal.category, C::Private);
        assert_eq!(
            refusal.to_string(),
            "internal.example is 10.1.2.3 (private), refused \
             (add it with --allow-address to crawl it)"
        );
        assert_eq!(policy.check("m", ip("169.254.169.254")).unwrap_err().category, C::Metadata);
    }

    #[test]
    fn policy_allows_listed_networks_only() {
        let policy = AddressPolicy::new(vec![net("10.0.0.0/8"), net("fd00::/8")]);
        assert!(policy.check("a", ip("10.200.0.1")).is_ok());
        assert!(policy.check("a", ip("fd12::1")).is_ok());
        assert!(policy.check("a", ip("::ffff:10.0.0.1")).is_ok(), "mapped form of an allowed address");
        assert_eq!(policy.check("a", ip("192.168.0.1")).unwrap_err().category, C::Private);
        assert_eq!(policy.check("a", ip("127.0.0.1")).unwrap_err().category, C::Loopback);

        let single = AddressPolicy::new(vec![net("127.0.0.1")]);
        assert!(single.check("a", ip("127.0.0.1")).is_ok());
        assert_eq!(single.check("a", ip("127.0.0.2")).unwrap_err().category, C::Loopback);
        assert!(single.check("a", ip("::1")).is_err(), "an IPv4 allow does not cover IPv6 loopback");
    }

    #[test]
    fn allowed_network_values() {
        assert_eq!(net("127.0.0.1"), "127.0.0.1/32".parse::<IpNet>().unwrap());
        assert_eq!(net("::1"), "::1/128".parse::<IpNet>().unwrap());
        assert_eq!(net("10.0.0.0/8"), "10.0.0.0/8".parse::<IpNet>().unwrap());
        assert_eq!(net(" fd00::/8 "), "fd00::/8".parse::<IpNet>().unwrap());
        assert_eq!(net("10.1.2.3/8"), "10.0.0.0/8".parse::<IpNet>().unwrap());
        for bad in ["", "localhost", "10.0.0.0/33", "10.0.0/8", "::1/129", "1.2.3.4/"] {
            let error = parse_allowed_network(bad).unwrap_err();
            assert!(error.contains(&format!("{bad:?}")), "{bad}: {error}");
        }
    }

    #[test]
    fn resolve_values() {
        assert_eq!(
            parse_resolve("Site-7.Test=127.0.0.1").unwrap(),
            ("site-7.test".to_owned(), ip("127.0.0.1"))
        );
        assert_eq!(parse_resolve("a.test=::1").unwrap(), ("a.test".to_owned(), ip("::1")));
        assert_eq!(parse_resolve("a.test.=[::1]").unwrap(), ("a.test".to_owned(), ip("::1")));
        for bad in
            ["a.test", "=127.0.0.1", "a.test=", "a.test=nowhere", "a.test:80=127.0.0.1", "1.2.3.4=127.0.0.1"]
        {
            let error = parse_resolve(bad).unwrap_err();
            assert!(error.contains(&format!("{bad:?}")), "{bad}: {error}");
        }
    }

    #[test]
    fn url_hosts() {
        let policy = AddressPolicy::default();
        let refused = |text: &str| check_url_host(&policy, &Url::parse(text).unwrap()).unwrap_err();
        let loopback = refused("http://127.0.0.1:8080/");
        assert_eq!((loopback.category, loopback.address), (C::Loopback, ip("127.0.0.1")));
        let v6 = refused("http://[::1]/");
        assert_eq!((v6.category, v6.address, v6.host.as_str()), (C::Loopback, ip("::1"), "[::1]"));
        assert_eq!(refused("http://169.254.169.254/latest/meta-data/").category, C::Metadata);
        // The URL parser normalizes other IPv4 spellings before the check sees them.
        assert_eq!(refused("http://0x7f.1/").category, C::Loopback);
        assert_eq!(refused("http://[::ffff:a9fe:a9fe]/").category, C::Metadata);
        assert!(check_url_host(&policy, &Url::parse("http://example.com/").unwrap()).is_ok());
        assert!(check_url_host(&policy, &Url::parse("http://8.8.8.8/").unwrap()).is_ok());
        let allowed = AddressPolicy::new(vec![net("127.0.0.0/8")]);
        assert!(check_url_host(&allowed, &Url::parse("http://127.0.0.1:8080/").unwrap()).is_ok());
    }

    #[test]
    fn find_cause_looks_through_sources_and_io_errors() {
        #[derive(Debug, Error)]
        #[error("outer")]
        struct Outer(#[source] io::Error);

        let blocked = BlockedAddress { host: "h".into(), address: ip("10.0.0.1"), category: C::Private };
        let wrapped = Outer(io::Error::other(blocked));
        let found = find_cause::<BlockedAddress>(&wrapped).unwrap();
        assert_eq!(found.address, ip("10.0.0.1"));
        assert!(find_cause::<DnsFailure>(&wrapped).is_none());
        assert!(find_cause::<Outer>(&wrapped).is_some());
    }

    async fn resolve(resolver: &GuardedResolver, host: &str) -> Result<Vec<SocketAddr>, String> {
        match resolver.resolve(Name::from_str(host).unwrap()).await {
            Ok(addrs) => Ok(addrs.collect()),
            Err(error) => Err(error.to_string()),
        }
    }

    #[tokio::test]
    async fn resolver_overrides_and_filtering() {
        let resolver = GuardedResolver::new(
            AddressPolicy::new(vec![net("127.0.0.0/8")]),
            vec![
                ("Mixed.Test".into(), ip("10.0.0.1")),
                ("mixed.test".into(), ip("127.0.0.5")),
                ("mixed.test".into(), ip("8.8.8.8")),
                ("private.test".into(), ip("192.168.0.1")),
                ("private.test".into(), ip("10.0.0.1")),
            ],
        );
        let kept = resolve(&resolver, "MIXED.test").await.unwrap();
        assert_eq!(kept, vec![SocketAddr::new(ip("127.0.0.5"), 0), SocketAddr::new(ip("8.8.8.8"), 0)]);
        let error = resolve(&resolver, "private.test").await.unwrap_err();
        assert!(error.starts_with("private.test is 192.168.0.1 (private)"), "{error}");
        assert!(resolver.policy().check("x", ip("127.0.0.1")).is_ok());
    }

    /// Answers every connection with a fixed 200 "ok".
    async fn serve_ok() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => request.extend_from_slice(&buffer[..read]),
                        }
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                    let _ = stream.write_all(answer).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        port
    }

    fn client(resolver: GuardedResolver) -> reqwest::Client {
        reqwest::Client::builder().dns_resolver(Arc::new(resolver)).no_proxy().build().unwrap()
    }

    /// The error's layers, outermost first, for failure messages.
    fn chain(error: &(dyn StdError + 'static)) -> Vec<String> {
        let mut layers = Vec::new();
        let mut current = Some(error);
        while let Some(layer) = current {
            layers.push(format!("{layer:?}"));
            current = layer.source();
        }
        layers
    }

    #[tokio::test]
    async fn client_refuses_a_name_resolving_to_loopback() {
        let port = serve_ok().await;
        let resolver = GuardedResolver::new(
            AddressPolicy::default(),
            vec![parse_resolve("blocked.test=127.0.0.1").unwrap()],
        );
        let error = client(resolver).get(format!("http://blocked.test:{port}/")).send().await.unwrap_err();
        let blocked = find_cause::<BlockedAddress>(&error).unwrap_or_else(|| panic!("{:#?}", chain(&error)));
        assert_eq!(blocked.category, C::Loopback);
        assert_eq!(blocked.address, ip("127.0.0.1"));
        assert_eq!(blocked.host, "blocked.test");
        assert!(error.is_connect(), "{error:?}");
        assert!(find_cause::<DnsFailure>(&error).is_none());
    }

    #[tokio::test]
    async fn client_reaches_an_allowed_network() {
        let port = serve_ok().await;
        let resolver = GuardedResolver::new(
            AddressPolicy::new(vec![net("127.0.0.0/8")]),
            vec![parse_resolve("blocked.test=127.0.0.1").unwrap()],
        );
        let response = client(resolver).get(format!("http://blocked.test:{port}/")).send().await.unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        assert_eq!(response.text().await.unwrap(), "ok");
    }

    #[tokio::test]
    async fn client_reports_dns_failures() {
        let port = serve_ok().await;
        let resolver = GuardedResolver::new(AddressPolicy::default(), Vec::new());
        let error =
            client(resolver).get(format!("http://nonexistent.invalid:{port}/")).send().await.unwrap_err();
        let failure = find_cause::<DnsFailure>(&error).unwrap_or_else(|| panic!("{:#?}", chain(&error)));
        assert!(failure.to_string().starts_with("cannot resolve nonexistent.invalid: "), "{failure}");
        assert!(find_cause::<BlockedAddress>(&error).is_none());
    }

    #[tokio::test]
    async fn error_chain_depth() {
        let port = serve_ok().await;
        let resolver = GuardedResolver::new(
            AddressPolicy::default(),
            vec![parse_resolve("deep.test=10.0.0.1").unwrap()],
        );
        let error = client(resolver).get(format!("http://deep.test:{port}/")).send().await.unwrap_err();
        let layers = chain(&error);
        assert!(layers.last().is_some_and(|last| last.starts_with("BlockedAddress")), "{layers:#?}");
    }
}
