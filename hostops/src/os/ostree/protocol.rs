//! The protocol between [`OstreeBackend`](super::OstreeBackend) (the client, in the agent) and
//! `hearth-ostree-helper` (the process that links libostree): **one request per helper
//! process**. The client writes one JSON [`Request`] on the helper's standard input and closes
//! it; the helper writes one JSON [`Response`] on its standard output and exits 0. The helper's
//! log lines go to its standard error.
//!
//! ```json
//! {"version":1,"root":"/","config":{…},"op":{"stage":{"change":{…}}}}
//! {"version":1,"ok":{"staged":{…}}}
//! {"version":1,"error":{"NotFound":{"reference":"…","repo":"…","why":"…"}}}
//! ```
//!
//! The error is an [`OsError`] as serde writes it (the variant name is the kind), so it maps
//! back to the very error the helper produced. Both sides check [`PROTOCOL_VERSION`]: a helper
//! that gets another version answers with an [`OsError::Helper`] naming both versions, and the
//! client refuses a response of another version the same way (the helper and the agent come
//! from the same release). Sizes are bounded on both sides: [`MAX_REQUEST_BYTES`] (read by
//! the helper), [`MAX_RESPONSE_BYTES`] (read by the client).
//!
//! [`parse_response`] is the pure half of the client: bytes and exit status in, the reply or
//! an [`OsError`] naming the helper, the operation, the signal or exit code and the tail of the
//! helper's standard error out.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::os::change::OsChange;
use crate::os::config::OsConfig;
use crate::os::error::OsError;
use crate::os::status::{OsExpectation, OsStatus, RollbackOutcome, StagedDeployment};

/// The protocol version both sides speak.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest request the helper reads (1 MiB; a request is an [`OsConfig`] and an
/// [`OsChange`], both validated and far smaller).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The largest response the client reads (4 MiB; a status of a sysroot with many deployments is
/// a few KiB). A longer one is refused, and the helper is killed.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// The helper's executable name.
pub const HELPER_NAME: &str = "hearth-ostree-helper";

/// One operation of the libostree backend, run by the helper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Op {
    /// [`OstreeBackend::status`](super::OstreeBackend::status).
    Status {},
    /// [`OstreeBackend::stage`](super::OstreeBackend::stage).
    Stage {
        /// The change.
        change: OsChange,
    },
    /// [`OstreeBackend::verify_booted`](super::OstreeBackend::verify_booted).
    VerifyBooted {
        /// What the boot must show.
        expected: OsExpectation,
    },
    /// [`OstreeBackend::rollback`](super::OstreeBackend::rollback).
    Rollback {},
    /// [`OstreeBackend::adopt_kernel_arguments`](super::OstreeBackend::adopt_kernel_arguments).
    AdoptKernelArguments {
        /// The arguments to record as hearth's.
        kargs: Vec<String>,
    },
}

impl Op {
    /// `status`, `stage`, ... for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Status {} => "status",
            Op::Stage { .. } => "stage",
            Op::VerifyBooted { .. } => "verify-booted",
            Op::Rollback {} => "rollback",
            Op::AdoptKernelArguments { .. } => "adopt-kernel-arguments",
        }
    }
}

/// What the client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The root of the host (`/` in production).
    pub root: PathBuf,
    /// The OS configuration.
    pub config: OsConfig,
    /// The operation.
    pub op: Op,
}

/// The result of a successful operation, one variant per [`Op`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Reply {
    /// For [`Op::Status`].
    Status(Box<OsStatus>),
    /// For [`Op::Stage`].
    Staged(Box<StagedDeployment>),
    /// For [`Op::VerifyBooted`].
    Differences(Vec<String>),
    /// For [`Op::Rollback`].
    Rollback(RollbackOutcome),
    /// For [`Op::AdoptKernelArguments`]: hearth's arguments after.
    Kargs(Vec<String>),
}

/// What the helper answers: the reply or the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// The operation succeeded.
    Ok(Reply),
    /// It failed.
    Error(OsError),
}

/// The helper's response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The outcome.
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Response {
    /// A response of this version.
    pub fn new(outcome: Outcome) -> Response {
        Response {
            version: PROTOCOL_VERSION,
            outcome,
        }
    }
}

/// The error naming the helper.
pub fn helper_error(helper: &str, message: impl Into<String>) -> OsError {
    OsError::Helper {
        helper: helper.to_string(),
        message: message.into(),
    }
}

/// The refusal of a message of another protocol version, `who` being "the agent" or "the
/// helper" (the side that sent it).
pub fn version_mismatch(helper: &str, who: &str, got: u64) -> OsError {
    helper_error(
        helper,
        format!(
            "{who} speaks protocol version {got}, this side speaks version {PROTOCOL_VERSION}: \
             install hearth-agent and {HELPER_NAME} from the same hearth release"
        ),
    )
}

/// How the helper process ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it (number).
    Signal(i32),
}

impl Exit {
    fn describe(self) -> String {
        match self {
            Exit::Code(c) => format!("exited with status {c}"),
            Exit::Signal(s) => {
                let name = nix::sys::signal::Signal::try_from(s)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|_| format!("signal {s}"));
                format!("was killed by signal {name} ({s})")
            }
        }
    }
}

/// The client's reading of a finished helper: `stdout` (at most [`MAX_RESPONSE_BYTES`] + 1
/// bytes read), how it ended, and the last lines of its standard error. A complete response of
/// this version is honoured whatever the exit (it is written after the work is done); anything
/// else is an [`OsError::Helper`] naming the operation, the exit and the tail.
pub fn parse_response(
    helper: &str,
    op: &str,
    stdout: &[u8],
    exit: Exit,
    stderr_tail: &[String],
) -> Result<Reply, OsError> {
    let tail = if stderr_tail.is_empty() {
        "it wrote nothing on its standard error".to_string()
    } else {
        format!(
            "the last lines of its standard error: {}",
            stderr_tail.join(" | ")
        )
    };
    let fail = |what: String| helper_error(helper, format!("{op}: {what}; {tail}"));
    if stdout.len() > MAX_RESPONSE_BYTES {
        return Err(fail(format!(
            "its response is longer than {MAX_RESPONSE_BYTES} bytes ({})",
            exit.describe()
        )));
    }
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err(fail(format!("it {} without a response", exit.describe())));
    }
    let value: serde_json::Value = serde_json::from_slice(stdout).map_err(|e| {
        fail(format!(
            "its response is not JSON ({e}); it {}",
            exit.describe()
        ))
    })?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => return Err(version_mismatch(helper, "the helper", v)),
        None => {
            return Err(fail(format!(
                "its response has no protocol version; it {}",
                exit.describe()
            )))
        }
    }
    let response: Response = serde_json::from_value(value).map_err(|e| {
        fail(format!(
            "its response is not a protocol response ({e}); it {}",
            exit.describe()
        ))
    })?;
    if exit != Exit::Code(0) {
        tracing::warn!(
            helper,
            op,
            "the OS helper {} after a complete response: {tail}",
            exit.describe()
        );
    }
    match response.outcome {
        Outcome::Ok(reply) => Ok(reply),
        Outcome::Error(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "/usr/libexec/hearth/hearth-ostree-helper";

    fn tail() -> Vec<String> {
        vec!["ERROR something broke".into()]
    }

    #[test]
    fn requests_and_responses_round_trip() {
        let req = Request {
            version: PROTOCOL_VERSION,
            root: "/".into(),
            config: OsConfig::default(),
            op: Op::AdoptKernelArguments {
                kargs: vec!["quiet".into()],
            },
        };
        let json = serde_json::to_string(&req).unwrap();
        assert!(
            json.starts_with(r#"{"version":1,"root":"/","config":"#),
            "{json}"
        );
        assert!(json.ends_with(r#""op":{"adoptKernelArguments":{"kargs":["quiet"]}}}"#));
        assert_eq!(serde_json::from_str::<Request>(&json).unwrap(), req);

        let ok = Response::new(Outcome::Ok(Reply::Differences(vec!["x".into()])));
        let json = serde_json::to_vec(&ok).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&json),
            r#"{"version":1,"ok":{"differences":["x"]}}"#
        );
        let got = parse_response(H, "verify-booted", &json, Exit::Code(0), &[]).unwrap();
        assert_eq!(got, Reply::Differences(vec!["x".into()]));

        let err = OsError::NoRollback("only one deployment".into());
        let json = serde_json::to_vec(&Response::new(Outcome::Error(err.clone()))).unwrap();
        assert_eq!(
            parse_response(H, "rollback", &json, Exit::Code(0), &[]).unwrap_err(),
            err
        );
    }

    #[test]
    fn a_crash_names_the_signal_the_operation_and_the_tail() {
        let e = parse_response(H, "stage", b"", Exit::Signal(11), &tail()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, OsError::Helper { .. }));
        for want in [H, "stage", "SIGSEGV (11)", "ERROR something broke"] {
            assert!(msg.contains(want), "{want:?} missing in {msg}");
        }
        let msg = parse_response(H, "status", b"", Exit::Code(3), &[])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("exited with status 3 without a response"),
            "{msg}"
        );
        assert!(msg.contains("nothing on its standard error"), "{msg}");
    }

    #[test]
    fn garbage_oversize_and_other_versions_are_refused() {
        let msg = parse_response(H, "status", b"{\"vers", Exit::Code(0), &tail())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not JSON"), "{msg}");
        let msg = parse_response(
            H,
            "status",
            br#"{"version":1,"ok":{"nope":1}}"#,
            Exit::Code(0),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("not a protocol response"), "{msg}");
        let msg = parse_response(H, "status", br#"{"version":2,"ok":{}}"#, Exit::Code(0), &[])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("protocol version 2") && msg.contains("same hearth release"),
            "{msg}"
        );
        let big = vec![b' '; MAX_RESPONSE_BYTES + 1];
        let msg = parse_response(H, "status", &big, Exit::Signal(9), &[])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("longer than") && msg.contains("SIGKILL"),
            "{msg}"
        );
    }
}
