//! An OS image pull in progress, as the node's status shows it while the agent stages: the
//! helper's progress ([`PullProgress`]) kept in `/run/hearth/os-pull.json` (replaced atomically
//! at each change, removed when the staging ends and when the agent starts) and put into the
//! status document's `progress` as `osPull` ([`OsPull`], the wire form: `hearth-agent status`,
//! and the reports to hearth-server, which the follow loop sends while the pull runs:
//! `follow.rs`).

use std::path::Path;

use hearth_api::{AgentStatus, OsPull, OS_PULL_KEY};
use hearth_hostops::fs::Root;
use hearth_hostops::os::{ProgressSink, PullPhase, PullProgress};

/// Where the pull in progress is kept.
pub const OS_PULL_PATH: &str = "/run/hearth/os-pull.json";

/// The largest pull record read back.
const MAX_BYTES: u64 = 64 * 1024;

/// A sink that keeps the pull's progress under the root at `root` (failures logged: progress
/// is for people, the pull goes on).
pub fn sink(root: &Path) -> ProgressSink {
    let root = root.to_path_buf();
    std::sync::Arc::new(move |p: &PullProgress| {
        let Ok(json) = serde_json::to_vec(p) else {
            return;
        };
        let written =
            Root::open(&root).and_then(|r| r.write_atomic(OS_PULL_PATH, &json, 0o644, None));
        if let Err(e) = written {
            tracing::debug!(error = %e, "cannot record the pull's progress");
        }
    })
}

/// Forgets the pull (it ended, or the agent starts: a pull is never left running).
pub fn clear(root: &Root) {
    if let Err(e) = root.remove(OS_PULL_PATH) {
        tracing::debug!(error = %e, "cannot remove {OS_PULL_PATH}");
    }
}

/// The pull in progress under `root`, if any.
pub fn read(root: &Path) -> Option<PullProgress> {
    use std::io::Read;
    let path = hearth_hostops::os::paths::inside(root, OS_PULL_PATH);
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The pull as the node's status has it ([`OsPull`], the wire form).
pub fn to_wire(p: &PullProgress) -> OsPull {
    OsPull {
        image: p.image.clone(),
        phase: match p.phase {
            PullPhase::Fetching => "fetching",
            PullPhase::Importing => "importing",
        }
        .into(),
        layers_done: p.layers_done,
        layers_total: p.layers_total,
        bytes_done: p.bytes_done,
        bytes_total: p.bytes_total,
    }
}

/// Puts the pull in progress under `root` into `doc`'s progress, while the agent applies.
pub fn attach(doc: &mut AgentStatus, root: &Path) {
    let Some(serde_json::Value::Object(progress)) = doc.progress.as_mut() else {
        return;
    };
    if let Some(pull) = read(root).and_then(|p| serde_json::to_value(to_wire(&p)).ok()) {
        progress.insert(OS_PULL_KEY.into(), pull);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_is_recorded_attached_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let p = PullProgress {
            image: "registry.example/os@sha256:ab".into(),
            phase: PullPhase::Fetching,
            layers_done: 1,
            layers_total: 2,
            bytes_done: 5,
            bytes_total: 9,
        };
        sink(dir.path())(&p);
        assert_eq!(read(dir.path()), Some(p));
        let idle_doc = || crate::status::status_document(&crate::journal::Journal::default());
        let mut doc = idle_doc();
        doc.progress = Some(serde_json::json!({"phase": "applying", "step": 3, "total": 4}));
        attach(&mut doc, dir.path());
        let progress = doc.progress.clone().unwrap();
        assert_eq!(progress[OS_PULL_KEY]["bytesDone"], 5);
        assert_eq!(progress[OS_PULL_KEY]["phase"], "fetching");
        assert_eq!(progress["step"], 3);
        // Not applying: nothing to attach to.
        let mut idle = idle_doc();
        attach(&mut idle, dir.path());
        assert_eq!(idle.progress, None);
        clear(&root);
        assert_eq!(read(dir.path()), None);
    }
}
