//! Sending a request to one of several servers (the replicas of one site, which share their
//! store): one at a time, sticky (the last that answered is tried first), moving to the next
//! one
//!
//! - for any request, when nothing was sent: the connection or the TLS handshake failed;
//! - for any request, also when the answer is a 503 `ReplicaUnavailable`: the replica did not
//!   act on it (cut off from etcd, or its view behind etcd's), so nothing was written;
//! - for a read (`GET`, which `get -w` polls are too), also when the answer did not come in time
//!   or broke off, or was any other 5xx.
//!
//! A change (apply, delete, label, ...) whose request went out and whose answer was lost is not
//! sent again elsewhere: it may or may not have been applied, and the error says so, naming the
//! server, and says to check with `hearth get`. A change answered any other 5xx is not sent
//! elsewhere either (the store may have failed during the write: the answer stands). A 4xx is
//! the fleet's answer, the same on every replica: never retried. Errors name every server tried.

use super::conn::{error_chain, Client, ServerError};
use anyhow::anyhow;
use reqwest::Method;
use serde_json::Value;

/// Why a request did not get an answer it can use from one server.
enum Failed {
    /// Try the next server (the reason, for the error if none answers).
    Next(String),
    /// Stop here with this error.
    Stop(anyhow::Error),
}

impl Client {
    /// `method path` with an optional `(content type, body)`, through the servers as the module
    /// says; the answer's JSON on success, a [`ServerError`] for an error answer.
    pub(super) fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> anyhow::Result<Value> {
        let read = method == Method::GET || method == Method::HEAD;
        self.request_as(method, path, body, read)
    }

    /// [`Client::request`] for a request that changes nothing whatever its method (`apply
    /// --dry-run`): sent again to the next server like a read.
    pub(super) fn request_changing_nothing(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> anyhow::Result<Value> {
        self.request_as(method, path, body, true)
    }

    /// The servers other than the one in use that do not answer `GET path`, with why (what
    /// `hearth login` warns about).
    pub(super) fn unanswered(&self, path: &str) -> Vec<(String, String)> {
        let current = self.current.get();
        let mut out = Vec::new();
        for (i, base) in self.servers.iter().enumerate() {
            if i == current {
                continue;
            }
            match self.once(base, &Method::GET, path, None, true, true) {
                Ok(_) => {}
                Err(Failed::Next(why)) => out.push((base.clone(), why)),
                Err(Failed::Stop(e)) => out.push((base.clone(), format!("{e:#}"))),
            }
        }
        out
    }

    fn request_as(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        read: bool,
    ) -> anyhow::Result<Value> {
        let n = self.servers.len();
        let start = self.current.get() % n;
        let mut tried: Vec<String> = Vec::new();
        for i in 0..n {
            let at = (start + i) % n;
            let base = &self.servers[at];
            let last = i + 1 == n;
            match self.once(base, &method, path, body.as_ref(), read, last) {
                Ok(v) => {
                    self.current.set(at);
                    return Ok(v);
                }
                Err(Failed::Next(why)) => {
                    tried.push(format!("{base}: {why}"));
                    self.current.set((at + 1) % n);
                }
                Err(Failed::Stop(e)) if tried.is_empty() => return Err(e),
                Err(Failed::Stop(e)) => {
                    return Err(e.context(format!(
                        "from {base}, after {} did not answer ({})",
                        if tried.len() == 1 {
                            "another server"
                        } else {
                            "other servers"
                        },
                        tried.join("; ")
                    )))
                }
            }
        }
        if n == 1 {
            // One server: the message it always had.
            let why = tried.pop().unwrap_or_default();
            return Err(anyhow!("cannot reach {why}"));
        }
        Err(anyhow!(
            "no hearth-server answered ({} tried): {}",
            n,
            tried.join("; ")
        ))
    }

    /// One try against `base`. `last`: no server is left after this one, so an error answer is
    /// returned as it is.
    fn once(
        &self,
        base: &str,
        method: &Method,
        path: &str,
        body: Option<&(&str, Vec<u8>)>,
        read: bool,
        last: bool,
    ) -> Result<Value, Failed> {
        let mut req = self.http.request(method.clone(), format!("{base}{path}"));
        if let Some((content_type, bytes)) = body {
            req = req
                .header("content-type", *content_type)
                .body(bytes.clone());
        }
        if !self.token.is_empty() {
            req = req.bearer_auth(&self.token);
        }
        let lost = |why: String| {
            if read {
                Failed::Next(why)
            } else {
                Failed::Stop(anyhow!(
                    "{base} did not answer after the change was sent ({why}): it may or may not have been applied (a server carries through a change it has read even when its client is gone, so it may still be under way); check with `hearth get` in a moment before running it again"
                ))
            }
        };
        let resp = match req.send() {
            Ok(r) => r,
            // Nothing was sent: any request may go to the next server.
            Err(e) if e.is_connect() => return Err(Failed::Next(with_hint(base, error_chain(&e)))),
            Err(e) => return Err(lost(error_chain(&e))),
        };
        let status = resp.status().as_u16();
        let text = match resp.text() {
            Ok(t) => t,
            Err(e) => return Err(lost(error_chain(&e))),
        };
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let answer = ServerError { status, body, text };
        if moves_on(read, &answer) && !last {
            return Err(Failed::Next(answer.to_string()));
        }
        Err(Failed::Stop(answer.into()))
    }
}

/// Whether an error answer sends the request to the next server (see the module).
fn moves_on(read: bool, answer: &ServerError) -> bool {
    let untouched = answer.status == 503
        && answer.body.get("reason").and_then(Value::as_str)
            == Some(hearth_api::admin::REPLICA_UNAVAILABLE);
    untouched || (read && answer.status >= 500)
}

/// What to do about a connection that failed, when its cause says: a server reached but not
/// trusted (the CLI's `--ca` is not the server's CA), or nothing listening where a URL without a
/// port points (hearth-server listens on 22623).
fn with_hint(base: &str, why: String) -> String {
    let hint = if why.contains("UnknownIssuer") || why.contains("invalid peer certificate") {
        Some(
            "the server was reached, but its certificate is not signed by the CA this command \
             trusts: pass --ca with the server's CA (<state-dir>/pki/ca.crt on the server), or \
             run hearth login --ca with it"
                .to_string(),
        )
    } else if why.contains("Connection refused") && !has_port(base) {
        Some(format!(
            "nothing answers on {base}'s default port (443); hearth-server listens on 22623: \
             {}:22623",
            base.trim_end_matches('/')
        ))
    } else {
        None
    };
    match hint {
        Some(h) => format!("{why} ({h})"),
        None => why,
    }
}

/// Whether a URL names its port (`https://host:22623`, `https://[::1]:22623`).
fn has_port(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split('/').next().unwrap_or(rest);
    match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.contains(':'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(status: u16, reason: &str) -> ServerError {
        let body = json!({"kind": "Status", "code": status, "reason": reason, "message": "m"});
        ServerError {
            status,
            text: body.to_string(),
            body,
        }
    }

    #[test]
    fn a_failed_connection_says_what_to_do_when_its_cause_tells() {
        let untrusted = with_hint(
            "https://h:22623",
            "error sending request: invalid peer certificate: UnknownIssuer".into(),
        );
        assert!(untrusted.contains("pass --ca"), "{untrusted}");
        let refused = with_hint("https://h", "tcp connect error: Connection refused".into());
        assert!(refused.contains("https://h:22623"), "{refused}");
        let with_port = with_hint("https://h:8443", "Connection refused".into());
        assert_eq!(with_port, "Connection refused");
        assert!(has_port("https://[::1]:22623/x") && !has_port("https://[::1]/x"));
    }

    #[test]
    fn a_change_moves_on_only_when_the_replica_did_not_act() {
        // A replica cut off from etcd wrote nothing: a change may go elsewhere.
        assert!(moves_on(false, &answer(503, "ReplicaUnavailable")));
        // The store failed, perhaps mid-write: the answer stands for a change.
        assert!(!moves_on(false, &answer(503, "ServiceUnavailable")));
        assert!(!moves_on(false, &answer(500, "InternalError")));
        // The fleet's answer, the same everywhere.
        assert!(!moves_on(false, &answer(409, "Conflict")));
        assert!(!moves_on(true, &answer(404, "NotFound")));
        // The reason counts only on a 503.
        assert!(!moves_on(false, &answer(409, "ReplicaUnavailable")));
    }

    #[test]
    fn a_read_moves_on_after_any_5xx() {
        assert!(moves_on(true, &answer(503, "ServiceUnavailable")));
        assert!(moves_on(true, &answer(500, "InternalError")));
        assert!(moves_on(true, &answer(503, "ReplicaUnavailable")));
    }
}
