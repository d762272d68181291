//! Issue 9, "trust under hostile input": the server against hostile or careless clients, over
//! real TLS (HTTP/1.1 and HTTP/2). See docs/security.md.
//!
//! One test binary, one module per concern: `bodies` (who may hold memory with a request body;
//! `nosniff` on every answer), `render_lock` (rendering off the writer lock),
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

mod bodies;
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

/// A server whose renders wait while `gate/hold` exists (the hidden test hook
/// `render_gate`), with a worker MachineConfig `10-a` applied; the directories live as long as
/// it does.
struct Gated {
    _dir: tempfile::TempDir,
    gate: tempfile::TempDir,
    server: hearth_server::serve::Running,
    api: Api,
}

impl Gated {
    async fn start() -> Gated {
        let dir = tempfile::tempdir().unwrap();
        let gate = tempfile::tempdir().unwrap();
        let server = start(
            dir.path(),
            hearth_server::app::Options {
                render_gate: Some(gate.path().to_path_buf()),
                ..options(5)
            },
        )
        .await;
        let api = Api::admin(&server);
        let r = api.apply_text("a.yaml", &worker_mc("10-a", "one")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        Gated {
            _dir: dir,
            gate,
            server,
            api,
        }
    }

    /// Holds every render from now on, until [`Gated::release`].
    fn hold(&self) {
        std::fs::write(self.gate.path().join("hold"), b"").unwrap();
    }

    /// Waits until a render is held.
    async fn rendering(&self) {
        wait_for_file(&self.gate.path().join("rendering")).await;
    }

    /// Holds renders, applies `text` as `file` and hangs up once its render is held (the
    /// request's future is dropped: reqwest closes the connection).
    async fn apply_held_then_hang_up(&self, file: &str, text: &str) {
        self.hold();
        let apply = {
            let (api, file, text) = (self.api.clone(), file.to_string(), text.to_string());
            tokio::spawn(async move { api.apply_text(&file, &text).await })
        };
        self.rendering().await;
        apply.abort();
        assert!(apply.await.unwrap_err().is_cancelled());
    }

    /// Waits until one admin's change waits for its turn (`hearth_server_admin_changes_waiting`).
    async fn one_change_waiting_for_its_turn(&self) {
        guarded("a change waiting for its turn", async {
            while metric(&self.api, "hearth_server_admin_changes_waiting").await != 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    /// Lets renders that start from now on through, while the held ones stay held.
    fn pass(&self) {
        std::fs::write(self.gate.path().join("pass"), b"").unwrap();
    }

    /// Lets renders go on.
    fn release(&self) {
        std::fs::remove_file(self.gate.path().join("hold")).unwrap();
    }
}
