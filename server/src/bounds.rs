//! What a node says is bounded before it is stored: a node is not trusted, and its status
//! report ends up in the store, in events, in `hearth describe node` and in every snapshot copy.
//! Free text is cut (at a character boundary, saying so), lists keep their newest entries,
//! names that must be exact are refused. The values are in docs/security.md.

use crate::api::{AgentStatus, HistoryItem};
use crate::error::ApiError;
use crate::text::{cut, cut_front};
use std::collections::BTreeMap;

/// `reason` of a status report (it carries a failing unit's last log lines).
pub const MAX_REASON: usize = 8 * 1024;
/// Drift lines kept (the first ones), and the length of each.
pub const MAX_DRIFT_LINES: usize = 100;
/// The length of one drift line, history reason or other short text.
pub const MAX_LINE: usize = 1024;
/// History items kept (the newest).
pub const MAX_HISTORY: usize = 50;
/// `progress` as JSON.
pub const MAX_PROGRESS: usize = 4 * 1024;
/// A config name (`current`, `desired`), `apiVersion`, `kind`, a time.
pub const MAX_NAME: usize = 253;
/// Labels a node may enroll with.
pub const MAX_LABELS: usize = 64;
/// A label key (a DNS subdomain prefix, `/`, a name) and a label value.
pub const MAX_LABEL_KEY: usize = 317;
/// A label value.
pub const MAX_LABEL_VALUE: usize = 63;
/// Request outcomes a status report may carry (the newest are kept; the agent keeps 8).
pub const MAX_REQUEST_RESULTS: usize = 16;
/// Run-once action records a status report may carry (the newest are kept; the agent keeps 64).
pub const MAX_ACTION_RUNS: usize = 64;
/// The output tail of one action record (the agent keeps 4 KiB; the end is kept here too).
pub const MAX_ACTION_TAIL: usize = 4 * 1024;
/// A FleetLock client's `id` and `group`.
pub const MAX_FLEETLOCK_FIELD: usize = 256;

/// [`cut`] of an owned string: `s` itself when it fits, without a copy (a report's strings
/// nearly always fit: copying each one doubled the allocations of every report).
fn fit(s: String, max: usize) -> String {
    if s.len() <= max {
        s
    } else {
        cut(&s, max)
    }
}

/// [`cut_front`] of an owned string: `s` itself when it fits.
fn fit_front(s: String, max: usize) -> String {
    if s.len() <= max {
        s
    } else {
        cut_front(&s, max)
    }
}

fn name(field: &str, v: &Option<String>) -> Result<(), ApiError> {
    match v {
        Some(s) if s.len() > MAX_NAME => Err(ApiError::bad_request(format!(
            "{field} is {} bytes long; at most {MAX_NAME}",
            s.len()
        ))),
        _ => Ok(()),
    }
}

/// The report as it may be stored: names checked (400 when too long), text cut, lists bounded.
pub fn status_report(mut s: AgentStatus) -> Result<AgentStatus, ApiError> {
    name("current", &s.current)?;
    name("desired", &s.desired)?;
    s.api_version = s.api_version.map(|v| fit(v, MAX_NAME));
    s.kind = s.kind.map(|v| fit(v, MAX_NAME));
    s.last_transition = s.last_transition.map(|v| fit(v, MAX_NAME));
    s.reason = s.reason.map(|r| fit(r, MAX_REASON));
    if let Some(p) = &s.progress {
        let len = serde_json::to_vec(p).map(|b| b.len()).unwrap_or(usize::MAX);
        if len > MAX_PROGRESS {
            s.progress = Some(serde_json::json!({
                "cut": format!("the progress document was {len} bytes; hearth-server keeps at most {MAX_PROGRESS}")
            }));
        }
    }
    let drift_total = s.drift.len();
    s.drift.truncate(MAX_DRIFT_LINES);
    for d in &mut s.drift {
        *d = fit(std::mem::take(d), MAX_LINE);
    }
    if drift_total > MAX_DRIFT_LINES {
        s.drift.push(format!(
            "... and {} more drifted paths (hearth-server keeps {MAX_DRIFT_LINES})",
            drift_total - MAX_DRIFT_LINES
        ));
    }
    if s.history.len() > MAX_HISTORY {
        s.history.drain(..s.history.len() - MAX_HISTORY);
    }
    for h in &mut s.history {
        // Every field named, so that a new one cannot go unbounded.
        let HistoryItem {
            time,
            state: _,
            reason,
            desired,
        } = h;
        *time = fit(std::mem::take(time), MAX_NAME);
        *reason = reason.take().map(|r| fit(r, MAX_LINE));
        *desired = desired.take().map(|d| fit(d, MAX_NAME));
    }
    if s.request_results.len() > MAX_REQUEST_RESULTS {
        s.request_results
            .drain(..s.request_results.len() - MAX_REQUEST_RESULTS);
    }
    for r in &mut s.request_results {
        r.message = fit(std::mem::take(&mut r.message), MAX_LINE);
        r.path = r.path.take().map(|p| fit(p, MAX_LINE));
    }
    if s.actions.len() > MAX_ACTION_RUNS {
        s.actions.drain(..s.actions.len() - MAX_ACTION_RUNS);
    }
    for a in &mut s.actions {
        a.name = fit(std::mem::take(&mut a.name), MAX_NAME);
        a.config = fit(std::mem::take(&mut a.config), MAX_NAME);
        a.script_digest = fit(std::mem::take(&mut a.script_digest), MAX_NAME);
        a.started_at = fit(std::mem::take(&mut a.started_at), MAX_NAME);
        a.output_tail = fit_front(std::mem::take(&mut a.output_tail), MAX_ACTION_TAIL);
    }
    if let Some(os) = &mut s.os {
        // Every field named, so that a new one cannot go unbounded.
        let hearth_api::BootedOs {
            deployment,
            image,
            image_digest,
            version,
        } = os;
        *deployment = fit(std::mem::take(deployment), MAX_NAME);
        *image = fit(std::mem::take(image), MAX_LINE);
        // A digest is `sha256:` and 64 hex digits, or it is not kept (views cut it by bytes).
        *image_digest = image_digest
            .take()
            .filter(|d| hearth_config::digest::is_sha256_digest(d));
        *version = version.take().map(|v| fit(v, MAX_NAME));
    }
    Ok(s)
}

/// Labels a node enrolls with: bounded in count and size (400 otherwise).
pub fn labels(labels: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if labels.len() > MAX_LABELS {
        return Err(ApiError::bad_request(format!(
            "labels: {} labels; a node enrolls with at most {MAX_LABELS}",
            labels.len()
        )));
    }
    for (k, v) in labels {
        if k.is_empty()
            || k.len() > MAX_LABEL_KEY
            || k.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ApiError::bad_request(format!(
                "labels: invalid label key {:?} (1 to {MAX_LABEL_KEY} bytes, no spaces)",
                cut(k, 64)
            )));
        }
        if v.len() > MAX_LABEL_VALUE || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ApiError::bad_request(format!(
                "labels: the value of {k} is not a label value (at most {MAX_LABEL_VALUE} bytes, no spaces)"
            )));
        }
    }
    Ok(())
}

/// The longest validity a token may be given (`ttlSeconds`): ten years.
pub const MAX_TOKEN_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;

/// `ttlSeconds` of a token request, bounded: more than [`MAX_TOKEN_TTL_SECONDS`] is refused (a
/// huge value would otherwise wrap the expiry round into the past).
pub fn token_ttl(seconds: u64) -> Result<std::time::Duration, crate::error::ApiError> {
    if seconds > MAX_TOKEN_TTL_SECONDS {
        return Err(crate::error::ApiError::bad_request(format!(
            "ttlSeconds: {seconds} is more than the {MAX_TOKEN_TTL_SECONDS} (ten years) a token may \
             live; use 0 for no expiry"
        )));
    }
    Ok(std::time::Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_char_boundaries_and_says_so() {
        let s = "é".repeat(10);
        let c = cut(&s, 5);
        assert!(c.starts_with("éé"));
        assert!(c.contains("16 more bytes"), "{c}");
        assert_eq!(cut("short", 5), "short");
        let f = cut_front(&s, 5);
        assert!(f.ends_with("éé") && f.starts_with("[16 bytes cut"), "{f}");
        assert_eq!(cut_front("short", 5), "short");
    }

    #[test]
    fn a_reported_os_is_bounded_and_its_digest_checked() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let report = |image_digest: &str| AgentStatus {
            state: hearth_api::NodeState::Done,
            os: Some(hearth_api::BootedOs {
                deployment: "d".repeat(5000),
                image: "i".repeat(5000),
                image_digest: Some(image_digest.to_string()),
                version: Some("v".repeat(5000)),
            }),
            ..serde_json::from_value(serde_json::json!({"state": "Done"})).unwrap()
        };
        let kept = status_report(report(&digest)).unwrap().os.unwrap();
        assert_eq!(kept.image_digest.as_deref(), Some(digest.as_str()));
        assert!(kept.image.len() < 1100 && kept.deployment.len() < 300);
        assert!(kept.version.unwrap().len() < 300);
        let odd = status_report(report("sha256:éééé")).unwrap().os.unwrap();
        assert_eq!(
            odd.image_digest, None,
            "a digest that is not one is not kept"
        );
    }
}
