//! A Service range (`10.96.0.0/12`) and the address maths of the API server's ClusterIP
//! allocator: which addresses it hands out dynamically, and which it leaves for static choice.

use std::{fmt, net::IpAddr, str::FromStr};

use serde::{Deserialize, Serialize};

/// A Service CIDR, held as its network address and prefix length; written as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ServiceCidr {
    network: u128,
    prefix: u32,
    ipv4: bool,
}

impl ServiceCidr {
    fn bits(&self) -> u32 {
        if self.ipv4 { 32 } else { 128 }
    }

    fn size(&self) -> u128 {
        1u128
            .checked_shl(self.bits() - self.prefix)
            .unwrap_or(u128::MAX)
    }

    fn offset_of(&self, ip: IpAddr) -> Option<u128> {
        let value = match (ip, self.ipv4) {
            (IpAddr::V4(v4), true) => u32::from(v4) as u128,
            (IpAddr::V6(v6), false) => u128::from(v6),
            _ => return None,
        };
        let offset = value.wrapping_sub(self.network);
        (value >= self.network && offset < self.size()).then_some(offset)
    }

    /// The address `n` after the network address (kubeadm's DNS is the 10th).
    pub fn nth(&self, n: u128) -> Option<IpAddr> {
        (n < self.size()).then(|| self.address(self.network + n))
    }

    fn address(&self, value: u128) -> IpAddr {
        if self.ipv4 {
            IpAddr::V4((value as u32).into())
        } else {
            IpAddr::V6(value.into())
        }
    }

    /// Whether the API server's allocator may hand `ip` out on its own: inside the range,
    /// above the lower band it keeps for static choice (KEP-3070: min(max(16, size/16), 256)
    /// addresses after the network address) and below the IPv4 broadcast address.
    pub fn is_dynamic(&self, ip: IpAddr) -> bool {
        let Some(offset) = self.offset_of(ip) else {
            return false;
        };
        let size = self.size();
        let reserved = if size <= 16 {
            0
        } else {
            (size / 16).clamp(16, 256)
        };
        let last = if self.ipv4 { size - 2 } else { size - 1 };
        offset > reserved && offset <= last
    }
}

impl FromStr for ServiceCidr {
    type Err = String;

    /// Parses `<address>/<prefix>`; the address may have host bits set (they are dropped).
    fn from_str(text: &str) -> Result<Self, String> {
        let invalid = || format!("{text:?} is not a CIDR such as 10.96.0.0/12");
        let (ip, prefix) = text.split_once('/').ok_or_else(invalid)?;
        let ip: IpAddr = ip.parse().map_err(|_| invalid())?;
        let prefix: u32 = prefix.parse().map_err(|_| invalid())?;
        let (value, bits) = match ip {
            IpAddr::V4(v4) => (u32::from(v4) as u128, 32),
            IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        if prefix > bits {
            return Err(invalid());
        }
        let host_bits = bits - prefix;
        let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
        Ok(ServiceCidr {
            network: value & mask,
            prefix,
            ipv4: ip.is_ipv4(),
        })
    }
}

impl TryFrom<String> for ServiceCidr {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<ServiceCidr> for String {
    fn from(cidr: ServiceCidr) -> String {
        cidr.to_string()
    }
}

impl fmt::Display for ServiceCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address(self.network), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> ServiceCidr {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_network_address_is_taken_whatever_address_the_cidr_is_written_with() {
        assert_eq!(cidr("10.96.3.4/12").to_string(), "10.96.0.0/12");
        assert_eq!(cidr("fd00::1:2/108").to_string(), "fd00::/108");
        assert_eq!(cidr("10.96.0.0/12").nth(10), Some(ip("10.96.0.10")));
        assert_eq!(cidr("10.0.0.0/30").nth(4), None);
    }

    #[test]
    fn malformed_cidrs_are_refused_with_an_example() {
        for bad in [
            "10.96.0.0",
            "10.96.0.0/33",
            "fd00::/129",
            "ten/8",
            "10.96.0.0/x",
        ] {
            let err = bad.parse::<ServiceCidr>().unwrap_err();
            assert!(err.contains("such as 10.96.0.0/12"), "{bad}: {err}");
        }
    }

    /// The bands of the allocator's own tests (bitmap_test.go, Test_calculateRangeOffset):
    /// /16 keeps 256 addresses, /24 keeps 16, /28 none.
    #[test]
    fn the_static_band_is_the_allocators() {
        let c = cidr("10.96.0.0/16");
        assert!(!c.is_dynamic(ip("10.96.0.10")));
        assert!(!c.is_dynamic(ip("10.96.1.0")));
        assert!(c.is_dynamic(ip("10.96.1.1")));
        assert!(c.is_dynamic(ip("10.96.255.254")));
        assert!(!c.is_dynamic(ip("10.96.255.255")), "broadcast");
        assert!(!c.is_dynamic(ip("10.97.0.1")), "outside");
        assert!(!c.is_dynamic(ip("fd00::1")), "other family");
        let c = cidr("192.168.0.0/24");
        assert!(!c.is_dynamic(ip("192.168.0.16")));
        assert!(c.is_dynamic(ip("192.168.0.17")));
        assert!(cidr("192.168.0.0/28").is_dynamic(ip("192.168.0.1")));
        let c = cidr("fd00::/108");
        assert!(!c.is_dynamic(ip("fd00::100")));
        assert!(c.is_dynamic(ip("fd00::101")));
        assert!(c.is_dynamic(ip("fd00::f:ffff")));
    }
}
