//! The endpoint guard: which addresses an HTTP MCP session may connect to (a guard against
//! server-side request forgery, SSRF).
//!
//! The central runner runs inside the server, beside its database and on its network: a
//! connector URL must not turn it into a way to reach the loopback interface, private networks,
//! link-local addresses (169.254.169.254 is a cloud's metadata service) and the like. An
//! [`EndpointGuard`] for [`Reach::Public`] refuses every address in [`blocked_range`] unless the
//! installation's [`AllowList`] admits it (`switchyard-server serve --allow-endpoint CIDR|HOST`).
//! A device runner ([`Reach::Device`]) may reach its own machine and its network — that is what
//! local placement is for — but never a link-local address.
//!
//! The guard is enforced where the connection is made, so nothing can change between the check
//! and the connect: the HTTP client resolves host names through [`GuardedResolver`], which
//! screens every address and hands the client only admitted ones (a name re-resolved to a
//! blocked address later — DNS rebinding — finds nothing to connect to); a URL whose host is a
//! literal address is screened before the session opens ([`EndpointGuard::screen`]); and a
//! redirect is screened by the client's redirect policy ([`EndpointGuard::redirect_refusal`]).
//! IPv4 addresses written as IPv6 (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
//! `64:ff9b::a.b.c.d`) are judged as the IPv4 address they carry.

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Which addresses a runner may reach besides the public internet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The central runner: public addresses only, plus what the allow-list admits.
    Public,
    /// A device runner: anything but link-local addresses (cloud metadata services).
    Device,
}

/// A blocked range an address fell into, named for the person who reads the refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockedRange {
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// Unique local IPv6, `fc00::/7` (and the deprecated site-local `fec0::/10`).
    UniqueLocal,
    /// `169.254.0.0/16` (cloud metadata services), `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT, `100.64.0.0/10`.
    SharedAddressSpace,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `240.0.0.0/4` and the broadcast address.
    Reserved,
}

impl BlockedRange {
    /// How the range is written in a refusal.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Unspecified => "an unspecified address (0.0.0.0/8, ::)",
            Self::Loopback => "the loopback interface (127.0.0.0/8, ::1)",
            Self::Private => "a private network (RFC 1918)",
            Self::UniqueLocal => "a unique local IPv6 network (fc00::/7)",
            Self::LinkLocal => "a link-local address (169.254.0.0/16, fe80::/10: cloud metadata)",
            Self::SharedAddressSpace => "carrier-grade NAT space (100.64.0.0/10)",
            Self::Multicast => "a multicast address",
            Self::Reserved => "a reserved or broadcast address (240.0.0.0/4)",
        }
    }
}

/// The range `ip` falls into among those the central runner refuses, if any. An IPv4 address
/// written as IPv6 is judged as the IPv4 address.
pub fn blocked_range(ip: IpAddr) -> Option<BlockedRange> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => blocked_v4(v4),
            None => blocked_v6(v6),
        },
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<BlockedRange> {
    let [a, b, ..] = ip.octets();
    Some(if a == 0 {
        BlockedRange::Unspecified
    } else if ip.is_loopback() {
        BlockedRange::Loopback
    } else if ip.is_private() {
        BlockedRange::Private
    } else if ip.is_link_local() {
        BlockedRange::LinkLocal
    } else if a == 100 && (64..128).contains(&b) {
        BlockedRange::SharedAddressSpace
    } else if ip.is_multicast() {
        BlockedRange::Multicast
    } else if a >= 240 {
        BlockedRange::Reserved
    } else {
        return None;
    })
}

fn blocked_v6(ip: Ipv6Addr) -> Option<BlockedRange> {
    let first = ip.segments()[0];
    Some(if ip.is_unspecified() {
        BlockedRange::Unspecified
    } else if ip.is_loopback() {
        BlockedRange::Loopback
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        BlockedRange::UniqueLocal
    } else if first & 0xffc0 == 0xfe80 {
        BlockedRange::LinkLocal
    } else if ip.is_multicast() {
        BlockedRange::Multicast
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:0:0/96`), compatible (`::/96`,
/// but not `::` and `::1`, which are IPv6's own) and NAT64 (`64:ff9b::/96`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let [.., a, b, c, d] = ip.octets();
    let tail = Ipv4Addr::new(a, b, c, d);
    let compatible = s[..6] == [0; 6] && !ip.is_unspecified() && !ip.is_loopback();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    (compatible || nat64).then_some(tail)
}

/// What an installation admits beyond public addresses: networks (`10.2.0.0/16`, a bare
/// address) and host names (`mcp.internal`, matched exactly, without case).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    nets: Vec<IpNet>,
    hosts: Vec<String>,
}

/// An allow-list entry that is neither a network, an address nor a host name.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{0}` is not an allowed endpoint: give a network (10.2.0.0/16, fd00::/8), an address \
     (127.0.0.1, ::1) or a host name (mcp.internal)"
)]
pub struct BadAllowEntry(pub String);

impl AllowList {
    /// Reads entries as given to `--allow-endpoint` or, comma-separated, in
    /// `SWITCHYARD_ALLOW_ENDPOINTS` (blank entries are skipped).
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, BadAllowEntry> {
        let mut list = Self::default();
        for entry in entries.into_iter().flat_map(|e| e.split(',')) {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            if let Ok(net) = entry.parse::<IpNet>() {
                list.nets.push(net.trunc());
            } else if let Ok(ip) = entry.trim_matches(['[', ']']).parse::<IpAddr>() {
                list.nets.push(IpNet::from(ip));
            } else if is_host_name(entry) {
                list.hosts
                    .push(entry.trim_end_matches('.').to_ascii_lowercase());
            } else {
                return Err(BadAllowEntry(entry.to_owned()));
            }
        }
        Ok(list)
    }

    /// Whether the list admits nothing.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty() && self.hosts.is_empty()
    }

    fn admits_ip(&self, ip: IpAddr) -> bool {
        let v4 = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.nets
            .iter()
            .any(|net| net.contains(&ip) || v4.is_some_and(|v4| net.contains(&v4)))
    }

    fn admits_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.');
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .nets
            .iter()
            .map(ToString::to_string)
            .chain(self.hosts.iter().cloned())
            .collect();
        if entries.is_empty() {
            f.write_str("nothing")
        } else {
            f.write_str(&entries.join(", "))
        }
    }
}

fn is_host_name(entry: &str) -> bool {
    let entry = entry.trim_end_matches('.');
    !entry.is_empty()
        && entry.len() <= 253
        && entry.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Why an endpoint was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The host is, or resolves to, an address the guard refuses.
    #[error(
        "`{host}` is {addr}, {}, which this runner may not reach; an installation owner can \
         admit it with `switchyard-server serve --allow-endpoint {suggest}` \
         (or SWITCHYARD_ALLOW_ENDPOINTS)",
        range.describe()
    )]
    Blocked {
        /// The host as written in the URL.
        host: String,
        /// The address refused.
        addr: IpAddr,
        /// Its range.
        range: BlockedRange,
        /// What an owner would add to the allow-list.
        suggest: String,
    },
    /// The URL has no host, or is not a URL.
    #[error("`{0}` is not an http:// or https:// URL with a host")]
    BadUrl(String),
    /// The host name did not resolve.
    #[error("`{host}` did not resolve: {reason}")]
    Unresolved {
        /// The host name.
        host: String,
        /// The resolver's explanation.
        reason: String,
    },
}

/// Screens the addresses an HTTP MCP session connects to. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointGuard {
    reach: Reach,
    allow: Arc<AllowList>,
}

impl Default for EndpointGuard {
    /// The central runner's guard with nothing allowed: public addresses only.
    fn default() -> Self {
        Self::public(AllowList::default())
    }
}

impl EndpointGuard {
    /// The central runner's guard: public addresses and what `allow` admits.
    pub fn public(allow: AllowList) -> Self {
        Self {
            reach: Reach::Public,
            allow: Arc::new(allow),
        }
    }

    /// A device runner's guard: its own machine and networks, never a link-local address.
    pub fn device() -> Self {
        Self {
            reach: Reach::Device,
            allow: Arc::new(AllowList::default()),
        }
    }

    /// Which runner this guard is for.
    pub fn reach(&self) -> Reach {
        self.reach
    }

    /// The allow-list.
    pub fn allow_list(&self) -> &AllowList {
        &self.allow
    }

    /// Whether `ip`, reached as `host`, may be connected to.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), EndpointError> {
        let Some(range) = blocked_range(ip) else {
            return Ok(());
        };
        let refused = match self.reach {
            Reach::Public => !(self.allow.admits_ip(ip) || self.allow.admits_host(host)),
            Reach::Device => range == BlockedRange::LinkLocal,
        };
        if !refused {
            return Ok(());
        }
        let suggest = match ip {
            IpAddr::V4(_) => format!("{ip}/32"),
            IpAddr::V6(_) => format!("{ip}/128"),
        };
        Err(EndpointError::Blocked {
            host: host.to_owned(),
            addr: ip,
            range,
            suggest,
        })
    }

    /// Screens `url`'s host: a literal address is checked, a name is resolved and each of its
    /// addresses checked (any refused one refuses the URL). Answers the addresses screened.
    pub async fn screen(&self, url: &str) -> Result<Vec<IpAddr>, EndpointError> {
        let bad = || EndpointError::BadUrl(url.to_owned());
        let parsed = url::Url::parse(url).map_err(|_| bad())?;
        match parsed.host().ok_or_else(bad)? {
            url::Host::Ipv4(ip) => self
                .check(&ip.to_string(), IpAddr::V4(ip))
                .map(|()| vec![IpAddr::V4(ip)]),
            url::Host::Ipv6(ip) => self
                .check(&ip.to_string(), IpAddr::V6(ip))
                .map(|()| vec![IpAddr::V6(ip)]),
            url::Host::Domain(name) => {
                let addrs = lookup(name).await?;
                for ip in &addrs {
                    self.check(name, *ip)?;
                }
                Ok(addrs)
            }
        }
    }

    /// Screens a redirect's target before it is followed: a literal address is checked here;
    /// a name is checked by [`GuardedResolver`] when it is connected to. `None` admits it.
    pub fn redirect_refusal(&self, target: &url::Url) -> Option<EndpointError> {
        let (host, ip) = match target.host()? {
            url::Host::Ipv4(ip) => (ip.to_string(), IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => (ip.to_string(), IpAddr::V6(ip)),
            url::Host::Domain(_) => return None,
        };
        self.check(&host, ip).err()
    }

    /// The DNS resolver an HTTP client must use under this guard.
    pub fn resolver(&self) -> GuardedResolver {
        GuardedResolver(self.clone())
    }
}

/// Resolves `name` with the system resolver.
async fn lookup(name: &str) -> Result<Vec<IpAddr>, EndpointError> {
    let unresolved = |reason: String| EndpointError::Unresolved {
        host: name.to_owned(),
        reason,
    };
    let addrs: Vec<IpAddr> = tokio::net::lookup_host((name, 0))
        .await
        .map_err(|e| unresolved(e.to_string()))?
        .map(|addr| addr.ip())
        .collect();
    if addrs.is_empty() {
        return Err(unresolved("no addresses".to_owned()));
    }
    Ok(addrs)
}

/// A reqwest DNS resolver that hands the client only the addresses its [`EndpointGuard`]
/// admits, so the address connected to is one that was checked.
#[derive(Clone, Debug)]
pub struct GuardedResolver(EndpointGuard);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let mut admitted = Vec::new();
            let mut refused = None;
            for ip in lookup(&host).await? {
                match guard.check(&host, ip) {
                    Ok(()) => admitted.push(SocketAddr::new(ip, 0)),
                    Err(e) => refused = Some(e),
                }
            }
            match refused {
                Some(e) if admitted.is_empty() => Err(e.into()),
                _ => Ok(Box::new(admitted.into_iter()) as Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn every_blocked_range_is_refused_and_public_addresses_are_not() {
        let guard = EndpointGuard::default();
        let table = [
            ("0.0.0.0", Some(BlockedRange::Unspecified)),
            ("::", Some(BlockedRange::Unspecified)),
            ("127.0.0.1", Some(BlockedRange::Loopback)),
            ("127.255.0.9", Some(BlockedRange::Loopback)),
            ("::1", Some(BlockedRange::Loopback)),
            ("10.1.2.3", Some(BlockedRange::Private)),
            ("172.16.0.1", Some(BlockedRange::Private)),
            ("172.31.255.255", Some(BlockedRange::Private)),
            ("192.168.1.1", Some(BlockedRange::Private)),
            ("fc00::1", Some(BlockedRange::UniqueLocal)),
            ("fd12:3456::1", Some(BlockedRange::UniqueLocal)),
            ("169.254.169.254", Some(BlockedRange::LinkLocal)),
            ("fe80::1", Some(BlockedRange::LinkLocal)),
            ("100.64.0.1", Some(BlockedRange::SharedAddressSpace)),
            ("100.127.255.254", Some(BlockedRange::SharedAddressSpace)),
            ("224.0.0.1", Some(BlockedRange::Multicast)),
            ("ff02::1", Some(BlockedRange::Multicast)),
            ("255.255.255.255", Some(BlockedRange::Reserved)),
            // IPv4 written as IPv6: mapped, compatible, NAT64.
            ("::ffff:127.0.0.1", Some(BlockedRange::Loopback)),
            ("::ffff:169.254.169.254", Some(BlockedRange::LinkLocal)),
            ("::10.0.0.1", Some(BlockedRange::Private)),
            ("64:ff9b::a9fe:a9fe", Some(BlockedRange::LinkLocal)),
            // Public.
            ("93.184.216.34", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("2606:4700::1111", None),
            ("::ffff:93.184.216.34", None),
        ];
        for (text, expected) in table {
            assert_eq!(blocked_range(ip(text)), expected, "{text}");
            let checked = guard.check("h", ip(text));
            assert_eq!(checked.is_err(), expected.is_some(), "{text}: {checked:?}");
        }
    }

    #[test]
    fn the_allow_list_admits_the_networks_and_hosts_it_names() {
        let allow = AllowList::parse(["127.0.0.0/8, ::1", "10.2.0.0/16", "mcp.internal."]).unwrap();
        let guard = EndpointGuard::public(allow);
        for admitted in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "::ffff:127.0.0.1",
            "10.2.3.4",
        ] {
            assert_eq!(guard.check("h", ip(admitted)), Ok(()), "{admitted}");
        }
        for refused in ["10.3.0.1", "169.254.169.254", "192.168.0.1", "fe80::1"] {
            assert!(guard.check("h", ip(refused)).is_err(), "{refused}");
        }
        // A host name admits whatever it resolves to.
        assert_eq!(guard.check("MCP.internal", ip("192.168.0.7")), Ok(()));
        assert!(AllowList::parse(["not a host"]).is_err());
        assert!(AllowList::parse(["10.0.0.0/33"]).is_err());
    }

    #[test]
    fn a_device_may_reach_its_machine_but_never_link_local() {
        let guard = EndpointGuard::device();
        for admitted in [
            "127.0.0.1",
            "::1",
            "192.168.1.10",
            "fd00::1",
            "93.184.216.34",
        ] {
            assert_eq!(guard.check("h", ip(admitted)), Ok(()), "{admitted}");
        }
        for refused in ["169.254.169.254", "fe80::1", "::ffff:169.254.169.254"] {
            assert!(guard.check("h", ip(refused)).is_err(), "{refused}");
        }
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_unless_allowed() {
        let refused = EndpointGuard::default()
            .screen("http://localhost:9/mcp")
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                EndpointError::Blocked {
                    range: BlockedRange::Loopback,
                    ..
                }
            ),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("--allow-endpoint"),
            "{refused}"
        );
        let resolved = GuardedResolver(EndpointGuard::default())
            .resolve("localhost".parse().unwrap())
            .await;
        assert!(
            resolved.is_err(),
            "the resolver hands out no loopback address"
        );

        let allowed = EndpointGuard::public(AllowList::parse(["127.0.0.0/8", "::1"]).unwrap());
        assert!(allowed.screen("http://localhost:9/mcp").await.is_ok());
        assert!(
            allowed
                .screen("http://[::ffff:127.0.0.1]:9/mcp")
                .await
                .is_ok()
        );
        let by_name = EndpointGuard::public(AllowList::parse(["localhost"]).unwrap());
        let addrs: Vec<_> = by_name
            .resolver()
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty());
        assert!(
            EndpointGuard::default()
                .screen("http://169.254.169.254/latest/meta-data")
                .await
                .is_err()
        );
    }
}
