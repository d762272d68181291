//! Issue 9, "trust under hostile input": the server against hostile or careless clients, over
//! real TLS (HTTP/1.1 and HTTP/2). See docs/security.md.
//!
//! One test binary, one module per concern: `render_lock` (rendering off the writer lock),
//! `credentials` (bootstrap tokens, enrolled names, the metrics token), `refusals` (Status
//! documents over HTTP/1.1 and HTTP/2, slow clients), `slots` (FleetLock slot holders),
//! `private_state` (file modes), `node_identity` (a node acts only as itself), `hang_up` (a
//! change whose client hangs up is carried through).

#[path = "../common/mod.rs"]
mod common;

use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

mod credentials;
mod hang_up;
mod node_identity;
mod private_state;
mod refusals;
mod render_lock;
mod slots;

/// A guard against a deadlock, not a measurement: what it bounds either answers at once or
/// never (before the fix it waited for a render that the test holds forever).
const DEADLOCK_GUARD: Duration = Duration::from_secs(60);

async fn guarded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLOCK_GUARD, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not complete while a render was held"))
}

async fn wait_for_file(p: &Path) {
    guarded("the render", async {
        while !p.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The value of a metric without labels.
async fn metric(api: &Api, name: &str) -> u64 {
    let text = api.get("/metrics").await.text;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .parse()
        .unwrap()
}
