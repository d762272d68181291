//! `data:` URLs (RFC 2397) as Ignition uses them for inline file contents: base64 or
//! percent-encoded, optionally gzip-compressed (Ignition's `compression: gzip`).
//!
//! The split into media type and data is written here on purpose, not taken from the `data-url`
//! crate: that one follows the WHATWG fetch standard, while Ignition reads RFC 2397 as Go's
//! `vincent-petithory/dataurl` does, and hearth must accept and decode exactly what Ignition will
//! write at first boot. The decoding itself is the `base64` crate and gzip over `miniz_oxide`
//! ([`crate::gzip`]; percent-decoding is a short loop), with the output bounded ([`MAX_DECODED_BYTES`]) before it is allocated.

use base64::Engine;
use std::io::Read;

use crate::gzip::GzDecoder;

/// The most a single decoded (and decompressed) file may hold. Larger contents are refused so
/// that a small manifest cannot expand into gigabytes (a "zip bomb").
pub const MAX_DECODED_BYTES: usize = 256 * 1024 * 1024;

/// Why a `data:` URL could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataUrlError {
    /// The URL does not start with `data:`.
    #[error("not a data: URL")]
    NotData,
    /// No comma separates the media type from the data.
    #[error("malformed data: URL: no ',' separates the media type from the data")]
    NoComma,
    /// The base64 payload is invalid.
    #[error("invalid base64 in data: URL: {0}")]
    Base64(String),
    /// The percent-encoded payload is not valid.
    #[error("invalid percent-encoding in data: URL")]
    Percent,
    /// The compression is not supported.
    #[error("unsupported compression {0:?}: only \"gzip\" (or none) is supported")]
    Compression(String),
    /// The gzip stream is corrupt.
    #[error("contents are not valid gzip data: {0}")]
    Gzip(String),
    /// The decoded content is too large.
    #[error("decoded contents exceed {} MiB", MAX_DECODED_BYTES / (1024 * 1024))]
    TooLarge,
}

/// The URL scheme of a resource source, lower-cased (`data`, `http`, `s3`...), if it has one.
pub fn scheme(source: &str) -> Option<String> {
    let (scheme, _) = source.split_once(':')?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    Some(scheme.to_ascii_lowercase())
}

/// Decodes a `data:` URL and then its compression (`None`, `""` or `"gzip"`).
pub fn decode(source: &str, compression: Option<&str>) -> Result<Vec<u8>, DataUrlError> {
    decode_limited(source, compression, MAX_DECODED_BYTES)
}

/// [`decode`], refusing ([`DataUrlError::TooLarge`]) contents larger than `limit` bytes (or
/// [`MAX_DECODED_BYTES`], whichever is smaller). Decoding stops as soon as the limit is crossed:
/// a gzip stream is never inflated past it, and base64 whose length announces more is not
/// decoded at all.
pub fn decode_limited(
    source: &str,
    compression: Option<&str>,
    limit: usize,
) -> Result<Vec<u8>, DataUrlError> {
    let limit = limit.min(MAX_DECODED_BYTES);
    let compressed = matches!(compression, Some("gzip"));
    // Compressed data may be larger than its result; the URL itself is bounded by the manifest.
    let raw = decode_url(source, if compressed { usize::MAX } else { limit })?;
    match compression {
        None | Some("") => Ok(raw),
        Some("gzip") => {
            let mut out = Vec::new();
            GzDecoder::new(&raw)
                .and_then(|gz| gz.take(limit as u64 + 1).read_to_end(&mut out))
                .map_err(|e| DataUrlError::Gzip(e.to_string()))?;
            if out.len() > limit {
                return Err(DataUrlError::TooLarge);
            }
            Ok(out)
        }
        Some(other) => Err(DataUrlError::Compression(other.to_string())),
    }
}

/// The size of the decoded contents, counted without keeping them (a gzip stream is inflated
/// into a counter), refusing contents larger than `limit` as [`decode_limited`] does.
pub fn decoded_len(
    source: &str,
    compression: Option<&str>,
    limit: usize,
) -> Result<usize, DataUrlError> {
    let limit = limit.min(MAX_DECODED_BYTES);
    match compression {
        Some("gzip") => {
            let raw = decode_url(source, usize::MAX)?;
            let n = GzDecoder::new(&raw)
                .and_then(|gz| std::io::copy(&mut gz.take(limit as u64 + 1), &mut std::io::sink()))
                .map_err(|e| DataUrlError::Gzip(e.to_string()))?;
            if n > limit as u64 {
                return Err(DataUrlError::TooLarge);
            }
            Ok(n as usize)
        }
        _ => decode_limited(source, compression, limit).map(|v| v.len()),
    }
}

fn decode_url(source: &str, limit: usize) -> Result<Vec<u8>, DataUrlError> {
    let rest = source
        .get(..5)
        .filter(|p| p.eq_ignore_ascii_case("data:"))
        .map(|_| &source[5..])
        .ok_or(DataUrlError::NotData)?;
    let (meta, data) = rest.split_once(',').ok_or(DataUrlError::NoComma)?;
    let is_base64 = meta
        .rsplit(';')
        .next()
        .is_some_and(|last| last.trim().eq_ignore_ascii_case("base64"));
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(data).collect();
    if data.contains('%') && std::str::from_utf8(data.as_bytes()).is_err() {
        return Err(DataUrlError::Percent);
    }
    if !is_base64 {
        if bytes.len() > limit.min(MAX_DECODED_BYTES) {
            return Err(DataUrlError::TooLarge);
        }
        return Ok(bytes);
    }
    let cleaned: Vec<u8> = bytes
        .into_iter()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    // Every 4 base64 characters make at most 3 bytes: refuse before decoding what must be too
    // large.
    if cleaned.len() / 4 * 3 > limit.min(MAX_DECODED_BYTES).saturating_add(3) {
        return Err(DataUrlError::TooLarge);
    }
    let engine = if cleaned.ends_with(b"=") || cleaned.len() % 4 == 0 {
        &base64::engine::general_purpose::STANDARD
    } else {
        &base64::engine::general_purpose::STANDARD_NO_PAD
    };
    let out = engine
        .decode(&cleaned)
        .map_err(|e| DataUrlError::Base64(e.to_string()))?;
    if out.len() > limit.min(MAX_DECODED_BYTES) {
        return Err(DataUrlError::TooLarge);
    }
    Ok(out)
}

/// Encodes bytes as a base64 `data:` URL (what hearth writes when it builds configs).
pub fn encode(bytes: &[u8]) -> String {
    format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn percent_and_base64_forms() {
        assert_eq!(
            decode("data:,hello%20world%0A", None).unwrap(),
            b"hello world\n"
        );
        assert_eq!(decode("data:,", None).unwrap(), b"");
        assert_eq!(
            decode("data:text/plain;charset=utf-8;base64,aGk=", None).unwrap(),
            b"hi"
        );
        assert_eq!(decode("data:;base64,aGk", None).unwrap(), b"hi");
        assert_eq!(
            decode("data:text/plain;charset=utf-8;base64,", None).unwrap(),
            b""
        );
        assert_eq!(
            decode("data:,GROUP%3Dstable%0A", None).unwrap(),
            b"GROUP=stable\n"
        );
    }

    #[test]
    fn errors_are_specific() {
        assert_eq!(decode("http://x", None), Err(DataUrlError::NotData));
        assert_eq!(decode("data:text/plain", None), Err(DataUrlError::NoComma));
        assert!(matches!(
            decode("data:;base64,!!!", None),
            Err(DataUrlError::Base64(_))
        ));
        assert!(matches!(
            decode("data:,x", Some("bzip2")),
            Err(DataUrlError::Compression(_))
        ));
        assert!(matches!(
            decode("data:,x", Some("gzip")),
            Err(DataUrlError::Gzip(_))
        ));
    }

    #[test]
    fn gzip_round_trip() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"compressed content").unwrap();
        let url = encode(&gz.finish().unwrap());
        assert_eq!(decode(&url, Some("gzip")).unwrap(), b"compressed content");
    }

    #[test]
    fn limits_stop_decoding() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[0u8; 10_000]).unwrap();
        let url = encode(&gz.finish().unwrap());
        assert_eq!(
            decode_limited(&url, Some("gzip"), 10_000).unwrap().len(),
            10_000
        );
        assert_eq!(
            decode_limited(&url, Some("gzip"), 9_999),
            Err(DataUrlError::TooLarge)
        );
        assert_eq!(decoded_len(&url, Some("gzip"), 10_000), Ok(10_000));
        assert_eq!(
            decoded_len(&url, Some("gzip"), 10),
            Err(DataUrlError::TooLarge)
        );
        let plain = encode(&[7u8; 100]);
        assert_eq!(decoded_len(&plain, None, 100), Ok(100));
        assert_eq!(
            decode_limited(&plain, None, 99),
            Err(DataUrlError::TooLarge)
        );
        assert_eq!(
            decode_limited("data:,abc", None, 2),
            Err(DataUrlError::TooLarge)
        );
    }

    #[test]
    fn schemes() {
        assert_eq!(scheme("data:,x").as_deref(), Some("data"));
        assert_eq!(scheme("HTTPS://a/b").as_deref(), Some("https"));
        assert_eq!(scheme("/etc/x"), None);
    }
}
