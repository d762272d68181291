//! One controller at a time: a `coordination.k8s.io/v1` Lease (`hearth-system/hearth-controller`
//! by default), as Kubernetes' own controllers elect their leader.
//!
//! A controller takes the Lease when nobody holds it or its holder has not renewed it for
//! [`LEASE_DURATION`]; every write carries the `resourceVersion` it read, so of two controllers
//! that try at once one wins and the other is refused (409) and reads again. The holder renews
//! every [`RENEW_EVERY`]; one that cannot renew for [`GIVE_UP_AFTER`] (or finds another
//! holder) stops deciding and exits, before its Lease runs out for the others — so two
//! controllers never hand out configs at the same time, and `maxUnavailable` holds.

use anyhow::{bail, Context, Result};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::time::Duration;

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

/// Who holds `lease` and whether their hold has run out at `now`.
fn holder(lease: &Value, now: jiff::Timestamp) -> (Option<String>, bool) {
    let spec = &lease["spec"];
    let who = spec["holderIdentity"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let renewed = spec["renewTime"]
        .as_str()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok());
    let duration = spec["leaseDurationSeconds"]
        .as_i64()
        .unwrap_or(LEASE_DURATION.as_secs() as i64);
    let expired = match renewed {
        Some(r) => r
            .checked_add(jiff::SignedDuration::from_secs(duration))
            .map_or(true, |until| until < now),
        None => true,
    };
    (who, expired)
}

/// The Lease this controller holds.
#[derive(Debug)]
pub struct Lease {
    api: Api<DynamicObject>,
    name: String,
    identity: String,
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
        let lease = Lease {
            api,
            name: name.to_string(),
            identity: identity.to_string(),
        };
        let mut waiting_for: Option<String> = None;
        loop {
            match lease.try_take().await {
                Ok(None) => {
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
    async fn try_take(&self) -> Result<Option<String>> {
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
        let (who, expired) = holder(&value, now);
        let mine = who.as_deref() == Some(self.identity.as_str());
        if !mine && !expired {
            return Ok(who);
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

    /// Renews the Lease until that fails for [`GIVE_UP_AFTER`] or another controller holds
    /// it; then returns why (the caller stops deciding at once).
    pub async fn keep(&self) -> anyhow::Error {
        let mut last_ok = std::time::Instant::now();
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            // A renewal that hangs counts as failed: the holder must stop before its Lease runs
            // out, however slow the API server is.
            let attempt = match tokio::time::timeout(RENEW_EVERY, self.try_take()).await {
                Ok(r) => r,
                Err(_) => Err(anyhow::anyhow!("no answer within {RENEW_EVERY:?}")),
            };
            match attempt {
                Ok(None) => last_ok = std::time::Instant::now(),
                Ok(Some(other)) => {
                    return anyhow::anyhow!("the controller lease is now held by {other}: stopping")
                }
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "cannot renew the controller lease");
                    if last_ok.elapsed() >= GIVE_UP_AFTER {
                        return anyhow::anyhow!(
                            "the controller lease could not be renewed for {GIVE_UP_AFTER:?}: stopping before another controller takes over ({e:#})"
                        );
                    }
                }
            }
        }
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
    fn a_lease_runs_out_after_its_duration_without_renewal() {
        let t0: jiff::Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let lease = json!({"spec": {"holderIdentity": "a", "renewTime": micro_time(t0), "leaseDurationSeconds": 15}});
        let at = |s: i64| t0.checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
        assert_eq!(holder(&lease, at(14)), (Some("a".into()), false));
        assert_eq!(holder(&lease, at(16)), (Some("a".into()), true));
        // Never renewed, or nobody: free.
        assert!(holder(&json!({"spec": {}}), t0).1);
        assert_eq!(holder(&json!({"spec": {"holderIdentity": ""}}), t0).0, None);
    }

    #[test]
    fn micro_time_is_what_kubernetes_reads() {
        let t: jiff::Timestamp = "2026-11-24T10:00:00.5Z".parse().unwrap();
        assert_eq!(micro_time(t), "2026-11-24T10:00:00.500000Z");
    }
}
