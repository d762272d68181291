//! One request in, one response out: size and version checks, then the operation on an opened
//! sysroot (read-only for status and verification, locked for the others).

use hearth_hostops::os::ostree::protocol::{
    helper_error, version_mismatch, Op, Outcome, Reply, Request, Response, HELPER_NAME,
    MAX_REQUEST_BYTES, PROTOCOL_VERSION,
};
use hearth_hostops::os::OsError;

use crate::session::Session;

/// The response to the request bytes `input` (at most [`MAX_REQUEST_BYTES`] + 1 read).
pub(crate) fn serve(input: &[u8]) -> Response {
    let outcome = match parse(input).and_then(|req| run(&req)) {
        Ok(reply) => Outcome::Ok(reply),
        Err(e) => {
            tracing::error!("{e}");
            Outcome::Error(e)
        }
    };
    Response::new(outcome)
}

fn parse(input: &[u8]) -> Result<Request, OsError> {
    if input.len() > MAX_REQUEST_BYTES {
        return Err(helper_error(
            HELPER_NAME,
            format!("the request is longer than {MAX_REQUEST_BYTES} bytes"),
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(input)
        .map_err(|e| helper_error(HELPER_NAME, format!("the request is not JSON: {e}")))?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => return Err(version_mismatch(HELPER_NAME, "the agent", v)),
        None => {
            return Err(helper_error(
                HELPER_NAME,
                "the request has no protocol version (\"version\")",
            ))
        }
    }
    let request: Request = serde_json::from_value(value)
        .map_err(|e| helper_error(HELPER_NAME, format!("the request is invalid: {e}")))?;
    request.config.validate("passed in")?;
    Ok(request)
}

fn run(req: &Request) -> Result<Reply, OsError> {
    let (root, config) = (&req.root, &req.config);
    tracing::debug!(op = req.op.name(), root = %root.display(), "OS operation");
    Ok(match &req.op {
        Op::Status {} => Reply::Status(Box::new(Session::open(root, false)?.status(config)?)),
        Op::Stage { change } => {
            Reply::Staged(Box::new(Session::open(root, true)?.stage(config, change)?))
        }
        Op::VerifyBooted { expected } => {
            Reply::Differences(Session::open(root, false)?.verify_booted(config, expected)?)
        }
        Op::Rollback {} => Reply::Rollback(Session::open(root, true)?.rollback(config)?),
        Op::AdoptKernelArguments { kargs } => {
            Reply::Kargs(Session::open(root, true)?.adopt_kernel_arguments(config, kargs)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(input: &[u8]) -> String {
        match serve(input).outcome {
            Outcome::Error(e) => e.to_string(),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn bad_requests_are_answered_with_the_reason() {
        assert!(error_of(b"nope").contains("not JSON"));
        let big = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert!(error_of(&big).contains("longer than"));
        let msg = error_of(br#"{"version":7,"root":"/","config":{},"op":{"status":{}}}"#);
        assert!(
            msg.contains("the agent speaks protocol version 7")
                && msg.contains(&format!("version {PROTOCOL_VERSION}")),
            "{msg}"
        );
        assert!(error_of(br#"{"root":"/"}"#).contains("no protocol version"));
        let msg = error_of(br#"{"version":1,"root":"/","config":{},"op":{"format":{}}}"#);
        assert!(msg.contains("invalid") && msg.contains("format"), "{msg}");
    }

    #[test]
    fn an_operation_on_a_root_without_a_sysroot_fails_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let req = format!(
            r#"{{"version":1,"root":{},"config":{{}},"op":{{"status":{{}}}}}}"#,
            serde_json::to_string(dir.path()).unwrap()
        );
        let msg = error_of(req.as_bytes());
        assert!(msg.contains(dir.path().to_str().unwrap()), "{msg}");
    }
}
