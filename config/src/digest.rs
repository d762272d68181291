//! Content digests of container images as references and reports carry them: `sha256:` and 64
//! lower-case hex digits, the one algorithm hearth accepts (a `sha512:` reference is refused
//! where it is parsed).

/// The prefix of a sha256 digest.
pub const SHA256: &str = "sha256:";

/// Whether `d` is a sha256 digest: `sha256:` and 64 lower-case hex digits.
pub fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix(SHA256).is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_lower_case_sha256_digests() {
        assert!(is_sha256_digest(&format!("sha256:{}", "0f".repeat(32))));
        assert!(!is_sha256_digest(&format!("sha256:{}", "0F".repeat(32))));
        assert!(!is_sha256_digest("sha256:0f"));
        assert!(!is_sha256_digest(&format!("sha512:{}", "0f".repeat(64))));
        assert!(!is_sha256_digest(&format!("sha256:{}é", "0f".repeat(31))));
    }
}
