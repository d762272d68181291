//! One controller at a time: a `coordination.k8s.io/v1` Lease (`hearth-system/hearth-controller`
//! by default), as Kubernetes' own controllers elect their leader.
//!
//! A controller takes the Lease when nobody holds it or its holder has not renewed it for
//! [`LEASE_DURATION`] — measured on the waiting controller's own monotonic clock from when it
//! last saw the Lease change (as client-go does), so clocks that differ between hosts do not
//! matter. Every write carries the `resourceVersion` it read, so of two controllers that try at
//! once one wins and the other is refused (409) and reads again. The holder renews every
//! [`RENEW_EVERY`]; it stops deciding (and the process exits) at the latest [`GIVE_UP_AFTER`]
//! after the start of its last successful renewal — a deadline on a timer, whatever the API
//! server does meanwhile — or when it finds another holder: before a waiting controller can
//! count the Lease as run out, so two controllers never hand out configs at the same time, and
//! `maxUnavailable` holds.

use anyhow::{bail, Context, Result};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long a Lease holds without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the holder renews it.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long the holder goes on without a successful renewal before it stops (well before the
/// Lease runs out for the others).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

fn leases() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
        "leases",
    )
}

/// A Lease's time (`MicroTime`: RFC 3339 with microseconds, UTC).
fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Who holds `lease`, and what changes whenever its holder renews it.
fn holder(lease: &Value) -> (Option<String>, String) {
    let spec = &lease["spec"];
    let who = spec["holderIdentity"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let record = format!(
        "{}|{}|{}",
        spec["holderIdentity"], spec["renewTime"], lease["metadata"]["resourceVersion"]
    );
    (who, record)
}

/// What a waiting controller saw of the Lease, and since when (its own monotonic clock).
#[derive(Debug, Default)]
struct Seen(Option<(String, Instant)>);

impl Seen {
    /// Whether the hold recorded as `record` has run out at `now`: it has not changed for
    /// `duration` since this controller first saw it so.
    fn run_out(&mut self, record: &str, duration: Duration, now: Instant) -> bool {
        match &self.0 {
            Some((r, since)) if r == record => now.duration_since(*since) >= duration,
            _ => {
                self.0 = Some((record.to_string(), now));
                false
            }
        }
    }
}

/// The Lease this controller holds.
#[derive(Debug)]
pub struct Lease {
    api: Api<DynamicObject>,
    name: String,
    identity: String,
    /// When the last successful renewal (or the taking) started.
    renewed: Instant,
}

impl Lease {
    /// Waits until this controller (`identity`) holds the Lease `namespace/name`.
    pub async fn acquire(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
    ) -> Result<Lease> {
        let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &leases());
        let mut lease = Lease {
            api,
            name: name.to_string(),
            identity: identity.to_string(),
            renewed: Instant::now(),
        };
        let mut seen = Seen::default();
        let mut waiting_for: Option<String> = None;
        loop {
            let started = Instant::now();
            let attempt = tokio::time::timeout(RENEW_EVERY, lease.try_take(Some(&mut seen)))
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {RENEW_EVERY:?}")));
            match attempt {
                Ok(None) => {
                    lease.renewed = started;
                    tracing::info!(lease = %format!("{namespace}/{name}"), identity, "holding the controller lease");
                    return Ok(lease);
                }
                Ok(Some(other)) => {
                    if waiting_for.as_deref() != Some(other.as_str()) {
                        tracing::info!(holder = %other, "another controller holds the lease; waiting to take over");
                        waiting_for = Some(other);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "cannot take the controller lease; trying again")
                }
            }
            tokio::time::sleep(RENEW_EVERY).await;
        }
    }

    /// Takes (or renews) the Lease if nobody else holds it; `Some(holder)` when another does.
    /// `seen`: a waiting controller's record of the Lease (`None`: the holder renewing, which
    /// takes it only if it is still its own).
    async fn try_take(&self, seen: Option<&mut Seen>) -> Result<Option<String>> {
        let now = jiff::Timestamp::now();
        let current = self
            .api
            .get_opt(&self.name)
            .await
            .context("reading the lease")?;
        let Some(current) = current else {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": LEASE_DURATION.as_secs(),
                    "acquireTime": micro_time(now),
                    "renewTime": micro_time(now),
                    "leaseTransitions": 0,
                },
            }))?;
            return match self.api.create(&PostParams::default(), &obj).await {
                Ok(_) => Ok(None),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    Ok(Some("(just created by another)".into()))
                }
                Err(e) => Err(e).context("creating the lease"),
            };
        };
        let value = serde_json::to_value(&current)?;
        let (who, record) = holder(&value);
        let mine = who.as_deref() == Some(self.identity.as_str());
        if !mine {
            let duration = value["spec"]["leaseDurationSeconds"]
                .as_u64()
                .map_or(LEASE_DURATION, Duration::from_secs);
            let free = match seen {
                // Nobody holds it: free at once.
                _ if who.is_none() => true,
                Some(seen) => seen.run_out(&record, duration, Instant::now()),
                None => false,
            };
            if !free {
                return Ok(Some(who.unwrap_or_default()));
            }
        }
        let mut next = value.clone();
        next["spec"]["holderIdentity"] = json!(self.identity);
        next["spec"]["leaseDurationSeconds"] = json!(LEASE_DURATION.as_secs());
        next["spec"]["renewTime"] = json!(micro_time(now));
        if !mine {
            next["spec"]["acquireTime"] = json!(micro_time(now));
            let transitions = value["spec"]["leaseTransitions"].as_i64().unwrap_or(0);
            next["spec"]["leaseTransitions"] = json!(transitions + 1);
        }
        let obj: DynamicObject = serde_json::from_value(next)?;
        // The resourceVersion read above makes this a compare-and-swap.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &obj)
            .await
        {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some("(changed meanwhile)".into())),
            Err(e) => Err(e).context("writing the lease"),
        }
    }

    /// Renews the Lease until another controller holds it or [`GIVE_UP_AFTER`] has passed
    /// since the start of the last successful renewal; then returns why (the caller stops
    /// deciding at once). The deadline is a timer: a renewal that hangs does not extend it.
    pub async fn keep(&mut self) -> anyhow::Error {
        loop {
            let deadline = self.renewed + GIVE_UP_AFTER;
            let renew = async {
                tokio::time::sleep(RENEW_EVERY).await;
                let started = Instant::now();
                (started, self.try_take(None).await)
            };
            match tokio::time::timeout_at(deadline.into(), renew).await {
                Ok((started, Ok(None))) => self.renewed = started,
                Ok((_, Ok(Some(other)))) => {
                    return anyhow::anyhow!("the controller lease is now held by {other}: stopping")
                }
                Ok((_, Err(e))) => {
                    tracing::warn!(error = %format!("{e:#}"), "cannot renew the controller lease")
                }
                Err(_) => {
                    return anyhow::anyhow!(
                        "the controller lease could not be renewed for {GIVE_UP_AFTER:?}: stopping before another controller may take over"
                    )
                }
            }
        }
    }
}

impl Lease {
    /// Gives the Lease up, if this controller still holds it: no holder, so that a waiting
    /// controller takes it at its next try rather than after the Lease runs out (a controller
    /// stopped with SIGTERM). A compare-and-swap on what was read; bounded by [`RENEW_EVERY`].
    /// `true` when it gave it up, `false` when it no longer held it.
    pub async fn release(&self) -> Result<bool> {
        let release = async {
            let Some(current) = self
                .api
                .get_opt(&self.name)
                .await
                .context("reading the lease")?
            else {
                return Ok(false);
            };
            let mut value = serde_json::to_value(&current)?;
            if holder(&value).0.as_deref() != Some(self.identity.as_str()) {
                return Ok(false);
            }
            value["spec"]["holderIdentity"] = Value::Null;
            value["spec"]["renewTime"] = json!(micro_time(jiff::Timestamp::now()));
            let obj: DynamicObject = serde_json::from_value(value)?;
            self.api
                .replace(&self.name, &PostParams::default(), &obj)
                .await
                .context("writing the lease")?;
            Ok(true)
        };
        tokio::time::timeout(RENEW_EVERY, release)
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {RENEW_EVERY:?}")))
    }
}

/// This process's identity in the Lease: the host name and the process id.
pub fn identity() -> String {
    format!("{}_{}", crate::pki::hostname(), std::process::id())
}

/// Refuses a Lease name or namespace that is not a DNS label/subdomain.
pub fn check_name(what: &str, s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !ok {
        bail!("{what} {s:?} is not a Kubernetes name (a-z, 0-9, '-', '.')");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_runs_out_when_it_has_not_changed_for_its_duration_on_the_waiters_clock() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let d = Duration::from_secs(15);
        let mut seen = Seen::default();
        // First seen: not run out, whatever its renewTime says (another host's clock).
        assert!(!seen.run_out("a|t1|1", d, at(0)));
        assert!(!seen.run_out("a|t1|1", d, at(14)));
        assert!(seen.run_out("a|t1|1", d, at(15)));
        // Renewed meanwhile: the wait starts again.
        let mut seen = Seen::default();
        assert!(!seen.run_out("a|t1|1", d, at(0)));
        assert!(!seen.run_out("a|t2|2", d, at(10)));
        assert!(!seen.run_out("a|t2|2", d, at(24)));
        assert!(seen.run_out("a|t2|2", d, at(25)));
    }

    #[test]
    fn the_holder_and_its_record_come_from_the_object() {
        let l = json!({"metadata": {"resourceVersion": "7"}, "spec": {"holderIdentity": "a", "renewTime": "x"}});
        let (who, record) = holder(&l);
        assert_eq!(who.as_deref(), Some("a"));
        assert!(record.contains("\"x\"") && record.contains("7"));
        assert_eq!(holder(&json!({"spec": {"holderIdentity": ""}})).0, None);
    }

    #[test]
    fn micro_time_is_what_kubernetes_reads() {
        let t: jiff::Timestamp = "2026-11-24T10:00:00.5Z".parse().unwrap();
        assert_eq!(micro_time(t), "2026-11-24T10:00:00.500000Z");
    }
}
