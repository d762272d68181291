//! gzip (RFC 1952) as Ignition reads it (Go's `compress/gzip`, multistream): members one after
//! another, each a header, a raw deflate stream and a trailer whose CRC-32 and size are checked;
//! anything after the last member that is not another member is an error.
//!
//! The inflating is `miniz_oxide`'s (the pure-Rust deflate that `flate2` uses by default); the
//! 10-byte header and the trailer are read here. Not `flate2` itself: `ostree-ext` (in
//! hearth-ostree-helper) turns on `flate2`'s C zlib backend, and cargo's feature unification
//! would then link libz into every binary of the workspace that uses `flate2`, the agent among
//! them, whose promise is the C library only (agent/tests/links_libc_only.rs).

use std::io::{self, Read};

use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZFlush, MZStatus};

/// A reader of the decompressed bytes of the gzip data in a slice.
#[derive(Debug)]
pub(crate) struct GzDecoder<'a> {
    rest: &'a [u8],
    member: Option<Member>,
}

struct Member {
    state: Box<InflateState>,
    crc: crc32fast::Hasher,
    size: u32,
}

impl<'a> GzDecoder<'a> {
    /// A decoder of `data`, whose first member's header is read now.
    pub(crate) fn new(data: &'a [u8]) -> io::Result<Self> {
        let rest = header(data)?;
        Ok(GzDecoder {
            rest,
            member: Some(Member::new()),
        })
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Member {
    fn new() -> Self {
        Member {
            state: InflateState::new_boxed(DataFormat::Raw),
            crc: crc32fast::Hasher::new(),
            size: 0,
        }
    }
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "the gzip data ends early")
}

/// Reads a member's header (RFC 1952 section 2.3) and returns what follows it.
fn header(data: &[u8]) -> io::Result<&[u8]> {
    const FHCRC: u8 = 0x02;
    const FEXTRA: u8 = 0x04;
    const FNAME: u8 = 0x08;
    const FCOMMENT: u8 = 0x10;
    if data.len() < 10 {
        return Err(
            if data.is_empty() || data.starts_with(&[0x1f, 0x8b][..data.len().min(2)]) {
                truncated()
            } else {
                invalid("not gzip data (no gzip header)")
            },
        );
    }
    if data[0] != 0x1f || data[1] != 0x8b {
        return Err(invalid("not gzip data (no gzip header)"));
    }
    if data[2] != 8 {
        return Err(invalid(
            "unknown gzip compression method (only deflate is defined)",
        ));
    }
    let flags = data[3];
    if flags & 0xe0 != 0 {
        return Err(invalid("reserved gzip header flags are set"));
    }
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let len = data.get(at..at + 2).ok_or_else(truncated)?;
        at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
        if at > data.len() {
            return Err(truncated());
        }
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let end = data[at..]
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(truncated)?;
            at += end + 1;
        }
    }
    if flags & FHCRC != 0 {
        let stored = data.get(at..at + 2).ok_or_else(truncated)?;
        let crc = crc32fast::hash(&data[..at]);
        if u16::from_le_bytes([stored[0], stored[1]]) != (crc & 0xffff) as u16 {
            return Err(invalid("the gzip header's checksum does not match"));
        }
        at += 2;
    }
    Ok(&data[at..])
}

impl Read for GzDecoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let Some(member) = &mut self.member else {
                if self.rest.is_empty() {
                    return Ok(0);
                }
                self.rest = header(self.rest)?;
                self.member = Some(Member::new());
                continue;
            };
            let step = inflate(&mut member.state, self.rest, buf, MZFlush::None);
            self.rest = &self.rest[step.bytes_consumed..];
            let written = &buf[..step.bytes_written];
            member.crc.update(written);
            member.size = member.size.wrapping_add(step.bytes_written as u32);
            match step.status {
                Ok(MZStatus::StreamEnd) => {
                    let trailer = self.rest.get(..8).ok_or_else(truncated)?;
                    let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
                    let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
                    if crc != member.crc.clone().finalize() {
                        return Err(invalid("the gzip data's checksum does not match"));
                    }
                    if size != member.size {
                        return Err(invalid("the gzip data's length does not match"));
                    }
                    self.rest = &self.rest[8..];
                    self.member = None;
                }
                Ok(_) => {}
                Err(miniz_oxide::MZError::Buf) => {}
                Err(_) => return Err(invalid("corrupt deflate data in gzip contents")),
            }
            if step.bytes_written > 0 {
                return Ok(step.bytes_written);
            }
            if step.bytes_consumed == 0 && self.member.is_some() {
                // No progress with all the input at hand: the stream stops before its end.
                return Err(truncated());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    }

    fn gunzip(data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        GzDecoder::new(data)?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn members_round_trip_and_concatenate() {
        let big: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        assert_eq!(gunzip(&gzip(&big)).unwrap(), big);
        assert_eq!(gunzip(&gzip(b"")).unwrap(), b"");
        let mut two = gzip(b"first ");
        two.extend(gzip(b"second"));
        assert_eq!(gunzip(&two).unwrap(), b"first second");
        // A header with a name, a comment, an extra field and a header checksum.
        let mut gz = flate2::GzBuilder::new()
            .filename("f.txt")
            .comment("c")
            .extra(vec![1, 2, 3])
            .write(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"named").unwrap();
        let mut named = gz.finish().unwrap();
        assert_eq!(gunzip(&named).unwrap(), b"named");
        // Set FHCRC and insert the header's checksum where it belongs.
        // 10 fixed bytes, XLEN and 3 extra bytes, "f.txt\0", "c\0".
        let header_end = 10 + 2 + 3 + 6 + 2;
        named[3] |= 0x02;
        let crc = (crc32fast::hash(&named[..header_end]) & 0xffff) as u16;
        named.splice(header_end..header_end, crc.to_le_bytes());
        assert_eq!(gunzip(&named).unwrap(), b"named");
        named[header_end] ^= 1;
        assert!(gunzip(&named)
            .unwrap_err()
            .to_string()
            .contains("header's checksum"));
    }

    #[test]
    fn damage_is_refused_with_the_reason() {
        let good = gzip(b"some text that compresses, some text that compresses");
        let err = |data: &[u8]| gunzip(data).unwrap_err().to_string();
        assert!(err(b"x").contains("no gzip header"));
        assert!(err(b"").contains("ends early"));
        assert!(err(&good[..good.len() - 3]).contains("ends early"));
        assert!(err(&good[..12]).contains("ends early"));
        let mut crc = good.clone();
        let n = crc.len();
        crc[n - 8] ^= 1;
        assert!(err(&crc).contains("checksum"));
        let mut size = good.clone();
        size[n - 1] ^= 1;
        assert!(err(&size).contains("length"));
        let mut trailing = good.clone();
        trailing.extend(b"garbage!!!!");
        assert!(err(&trailing).contains("no gzip header"));
        let mut method = good.clone();
        method[2] = 7;
        assert!(err(&method).contains("compression method"));
        let mut flags = good;
        flags[3] = 0x80;
        assert!(err(&flags).contains("reserved"));
    }
}
