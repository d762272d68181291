//! Bounds on everything the agent reads from the network: the size of a body and the time a
//! request may take. An answer over its size limit is refused as soon as its `Content-Length`
//! says so, or as soon as the bytes read pass the limit (a body that never ends is never held in
//! memory); a request that does not finish in time is refused with the limit it broke.
//!
//! | what | size | time |
//! |---|---|---|
//! | `apply --once-from http(s)://…` | [`MAX_CONFIG_BYTES`] | connect [`CONNECT_TIMEOUT`], total [`FETCH_TIMEOUT`] |
//! | the desired config from hearth-server (long-poll) | [`MAX_CONFIG_BYTES`] | connect [`CONNECT_TIMEOUT`], the poll's wait + 30 s |
//! | enrollment, reboot-slot answers | [`MAX_ANSWER_BYTES`] | connect [`CONNECT_TIMEOUT`], 60 s / 30 s |
//! | error answers (the message shown) | [`MAX_ERROR_BYTES`] | as the request |

use std::time::Duration;

/// The largest MachineConfig the agent reads from the network: 64 MiB, what hearth-server
/// accepts in one `hearth apply`.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;
/// The largest small answer (enrollment, reboot slot): 1 MiB.
pub const MAX_ANSWER_BYTES: u64 = 1 << 20;
/// The largest error answer read for its message: 64 KiB.
pub const MAX_ERROR_BYTES: u64 = 64 << 10;
/// How long a connection (TCP and TLS) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `apply --once-from http(s)://…` may take in all (connect, headers, body).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The answer is larger than the limit.
    #[error("refused: the answer is larger than {limit} (the limit for {what}){}", .declared.map(|d| format!("; it announces {d} bytes")).unwrap_or_default())]
    TooLarge {
        /// What was being read.
        what: &'static str,
        /// The limit, for people (`64 MiB`).
        limit: String,
        /// Its `Content-Length`, when it sent one.
        declared: Option<u64>,
    },
    /// Reading failed (a timeout says which limit it broke).
    #[error("{0}")]
    Read(String),
}

/// `n` bytes for people: `64 MiB`, `1 MiB`, `64 KiB`, `512 bytes`.
pub fn human(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// A transport error for people; a timeout names the limit (`timeout`) it broke.
pub fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
        format!(
            "no complete answer within {} s (connect at most {} s): {message}",
            timeout.as_secs(),
            CONNECT_TIMEOUT.as_secs()
        )
    } else {
        message
    }
}

/// Reads the body of `resp`, at most `max` bytes; `what` names it in a refusal.
pub async fn read_body(
    mut resp: reqwest::Response,
    max: u64,
    what: &'static str,
    timeout: Duration,
) -> Result<Vec<u8>, BodyError> {
    let too_large = |declared| BodyError::TooLarge {
        what,
        limit: human(max),
        declared,
    };
    if let Some(n) = resp.content_length().filter(|n| *n > max) {
        return Err(too_large(Some(n)));
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| BodyError::Read(describe(&e, timeout)))?
    {
        if out.len() as u64 + chunk.len() as u64 > max {
            return Err(too_large(None));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_for_people() {
        assert_eq!(human(MAX_CONFIG_BYTES), "64 MiB");
        assert_eq!(human(MAX_ERROR_BYTES), "64 KiB");
        assert_eq!(human(1000), "1000 bytes");
    }
}
