//! Running one helper process for one request: spawn, write the request, read the response
//! (bounded), forward the standard error to the log (bounded lines, escaped), wait (bounded in
//! time, killed on expiry), and hand the bytes and the exit to
//! [`parse_response`](super::protocol::parse_response).

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tracing::{debug, error, info, warn};

use super::protocol::{helper_error, parse_response, Exit, Reply, Request, MAX_RESPONSE_BYTES};
use crate::os::error::OsError;
use crate::os::progress::{ProgressSink, PullProgress};

/// The longest line of the helper's standard error forwarded to the log as one line (8 KiB;
/// longer lines are cut into pieces of this size).
pub const MAX_LOG_LINE: usize = 8 << 10;

/// How many lines of the helper's standard error an error message quotes, and how many
/// characters of each.
const TAIL_LINES: usize = 8;
const TAIL_LINE_CHARS: usize = 300;

/// Runs the helper at `helper` for `request`, within `limit`; the progress lines it writes go
/// to `progress`.
pub(super) async fn run(
    helper: &Path,
    request: &Request,
    limit: Duration,
    progress: Option<&ProgressSink>,
) -> Result<Reply, OsError> {
    let name = helper.display().to_string();
    let op = request.op.name();
    let body = serde_json::to_vec(request)
        .map_err(|e| helper_error(&name, format!("{op}: encoding the request: {e}")))?;
    let mut child = Command::new(helper)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| helper_error(&name, format!("{op}: starting it: {e}")))?;
    debug!(helper = %name, op, pid = child.id(), "OS helper started");
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(helper_error(&name, format!("{op}: no pipes to it")));
    };
    let exchange = async {
        let write = async {
            // A helper that dies before reading makes this fail (EPIPE): its exit says why.
            if let Err(e) = stdin.write_all(&body).await {
                debug!(helper = %name, "writing the request: {e}");
            }
            drop(stdin);
        };
        let read = async {
            let mut out = Vec::new();
            let mut limited = stdout.take(MAX_RESPONSE_BYTES as u64 + 1);
            if let Err(e) = limited.read_to_end(&mut out).await {
                debug!(helper = %name, "reading the response: {e}");
            }
            if out.len() > MAX_RESPONSE_BYTES {
                // It would block writing the rest: stop it.
                let _ = child.start_kill();
            }
            out
        };
        let (_, out, tail) = tokio::join!(write, read, forward_log(stderr, &name, progress));
        let status = child.wait().await;
        (out, tail, status)
    };
    let (out, tail, status) = match tokio::time::timeout(limit, exchange).await {
        Ok(v) => v,
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(helper_error(
                &name,
                format!(
                    "{op}: no response within {} s; it was killed",
                    limit.as_secs()
                ),
            ));
        }
    };
    let status = status.map_err(|e| helper_error(&name, format!("{op}: waiting for it: {e}")))?;
    let exit = match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    };
    let tail: Vec<String> = tail.into_iter().collect();
    parse_response(&name, op, &out, exit, &tail)
}

/// Forwards the helper's log lines (`LEVEL target: message`, as the helper writes them) to this
/// process's log at the same level, escaped, and its progress lines to `progress`; returns the
/// last [`TAIL_LINES`] log lines.
async fn forward_log(
    stderr: impl AsyncRead + Unpin,
    helper: &str,
    progress: Option<&ProgressSink>,
) -> VecDeque<String> {
    let mut reader = BufReader::new(stderr);
    let mut tail = VecDeque::new();
    loop {
        let mut raw = Vec::new();
        match (&mut reader)
            .take(MAX_LOG_LINE as u64)
            .read_until(b'\n', &mut raw)
            .await
        {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                debug!(helper, "reading its standard error: {e}");
                break;
            }
        }
        let text = String::from_utf8_lossy(&raw);
        if let Some(p) = PullProgress::parse_line(text.trim()) {
            debug!(helper, ?p, "pull progress");
            if let Some(sink) = progress {
                sink(&p);
            }
            continue;
        }
        let line = escape(text.trim());
        if line.is_empty() {
            continue;
        }
        let (level, rest) = match line.split_once(' ') {
            Some((l, r)) if ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&l) => (l, r),
            _ => ("INFO", line.as_str()),
        };
        match level {
            "ERROR" => error!(target: "hearth_ostree_helper", helper, "{rest}"),
            "WARN" => warn!(target: "hearth_ostree_helper", helper, "{rest}"),
            "INFO" => info!(target: "hearth_ostree_helper", helper, "{rest}"),
            _ => debug!(target: "hearth_ostree_helper", helper, "{rest}"),
        }
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line.chars().take(TAIL_LINE_CHARS).collect());
    }
    tail
}

/// Control characters (escape sequences, carriage returns) as `\u{..}` escapes.
fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let escaped = c.is_control() && c != '\t';
            let mut v: Vec<char> = Vec::new();
            if escaped {
                v.extend(c.escape_default());
            } else {
                v.push(c);
            }
            v
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::config::OsConfig;
    use crate::os::ostree::protocol::{Op, PROTOCOL_VERSION};
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("helper");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn request() -> Request {
        Request {
            version: PROTOCOL_VERSION,
            root: "/".into(),
            config: OsConfig::default(),
            op: Op::Status {},
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_helper_past_its_time_limit_is_killed_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let helper = script(
            dir.path(),
            &format!("echo $$ > {}; exec sleep 600", pid_file.display()),
        );
        let e = rt()
            .block_on(run(&helper, &request(), Duration::from_secs(1), None))
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("status: no response within 1 s; it was killed"),
            "{msg}"
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        assert!(
            !Path::new(&format!("/proc/{}", pid.trim())).exists(),
            "the helper {pid} still runs"
        );
    }

    #[test]
    fn a_helper_that_writes_without_end_is_cut_off_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let helper = script(dir.path(), "cat >/dev/null; exec yes");
        let msg = rt()
            .block_on(run(&helper, &request(), Duration::from_secs(120), None))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(&format!("longer than {MAX_RESPONSE_BYTES} bytes"))
                && msg.contains("SIGKILL"),
            "{msg}"
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("a\x1b[31mb\rc\td"), "a\\u{1b}[31mb\\rc\td");
    }

    #[test]
    fn log_lines_are_forwarded_bounded_and_the_tail_kept() {
        let mut input = String::new();
        for i in 0..20 {
            input.push_str(&format!(" INFO libostree: line {i}\n"));
        }
        input.push_str(&"x".repeat(MAX_LOG_LINE * 2 + 5));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        input.push_str("\nPROGRESS {\"image\":\"i\",\"phase\":\"fetching\",\"layersDone\":1,\"layersTotal\":2,\"bytesDone\":5,\"bytesTotal\":9}\n");
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink: ProgressSink = {
            let seen = seen.clone();
            std::sync::Arc::new(move |p: &PullProgress| seen.lock().unwrap().push(p.clone()))
        };
        let tail = rt.block_on(forward_log(input.as_bytes(), "h", Some(&sink)));
        // The progress line went to the sink, not to the log.
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert_eq!(seen.lock().unwrap()[0].bytes_done, 5);
        assert_eq!(tail.len(), TAIL_LINES);
        // The long line came in three pieces, each cut for the tail.
        assert_eq!(tail.iter().filter(|l| l.starts_with('x')).count(), 3);
        assert_eq!(tail[TAIL_LINES - 1].len(), 5);
        assert_eq!(tail[TAIL_LINES - 2].len(), TAIL_LINE_CHARS);
        assert!(tail[0].ends_with("line 15"), "{tail:?}");
    }
}
