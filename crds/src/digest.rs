//! Short SHA-256 digests in lowercase hex: host names past 63 characters, rewritten label keys,
//! applied-content hashes. One spelling, so the operator and the syncer always agree on a hash.

use sha2::{Digest, Sha256};

/// Lowercase hex of the first `bytes` bytes (at most 32) of the SHA-256 of `input`.
pub fn sha256_hex_prefix(input: &[u8], bytes: usize) -> String {
    Sha256::digest(input)
        .iter()
        .take(bytes)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The whole SHA-256 of `input`, 64 hex digits.
pub fn sha256_hex(input: &[u8]) -> String {
    sha256_hex_prefix(input, 32)
}

/// 16 hex digits of the SHA-256 of `input`: names and applied-content hashes.
pub fn short_hash(input: &[u8]) -> String {
    sha256_hex_prefix(input, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sha256("abc") is the FIPS 180-2 test vector.
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn digests_are_prefixes_of_the_standard_sha256() {
        assert_eq!(sha256_hex(b"abc"), ABC);
        assert_eq!(short_hash(b"abc"), &ABC[..16]);
        assert_eq!(sha256_hex_prefix(b"abc", 12), &ABC[..24]);
        assert_eq!(sha256_hex_prefix(b"abc", 99), ABC);
    }
}
