//! How far an OS image pull is while it runs: [`PullProgress`], which the helper writes as a
//! line of its standard error (`PROGRESS {json}`, [`PROGRESS_PREFIX`]) and the client hands to
//! the caller's [`ProgressSink`] as it comes (`OsBackend::stage_with_progress`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The start of a progress line on the helper's standard error.
pub const PROGRESS_PREFIX: &str = "PROGRESS ";

/// What a pull is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PullPhase {
    /// Fetching the layers the node does not have into its OCI layout (under the signature
    /// policy).
    Fetching,
    /// Importing the image's layers into the sysroot's repository.
    Importing,
}

/// How far a pull is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PullProgress {
    /// The image, as the config names it.
    pub image: String,
    /// What it is doing.
    pub phase: PullPhase,
    /// Layers done in this phase.
    pub layers_done: u32,
    /// Layers this phase has to do (fetching: those the node lacks).
    pub layers_total: u32,
    /// Bytes done in this phase (compressed, as the registry serves them).
    pub bytes_done: u64,
    /// Bytes this phase has to do.
    pub bytes_total: u64,
}

impl PullProgress {
    /// The line the helper writes.
    pub fn line(&self) -> String {
        // Encoding cannot fail: strings and numbers.
        format!(
            "{PROGRESS_PREFIX}{}",
            serde_json::to_string(self).unwrap_or_default()
        )
    }

    /// The progress of a line of the helper's standard error, if it is one.
    pub fn parse_line(line: &str) -> Option<PullProgress> {
        let p: PullProgress = serde_json::from_str(line.strip_prefix(PROGRESS_PREFIX)?).ok()?;
        (p.layers_done <= p.layers_total && p.bytes_done <= p.bytes_total && p.image.len() <= 4096)
            .then_some(p)
    }
}

/// Where progress goes while an operation runs (called from the client's task: keep it short).
pub type ProgressSink = Arc<dyn Fn(&PullProgress) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_nonsense_is_not_progress() {
        let p = PullProgress {
            image: "registry.example/os@sha256:ab".into(),
            phase: PullPhase::Fetching,
            layers_done: 1,
            layers_total: 3,
            bytes_done: 10,
            bytes_total: 300,
        };
        assert_eq!(PullProgress::parse_line(&p.line()), Some(p.clone()));
        assert!(p.line().starts_with("PROGRESS {\"image\""));
        let past = PullProgress {
            layers_done: 4,
            ..p.clone()
        };
        assert_eq!(PullProgress::parse_line(&past.line()), None);
        assert_eq!(PullProgress::parse_line("INFO x: PROGRESS {}"), None);
        assert_eq!(PullProgress::parse_line("PROGRESS {\"image\": 1}"), None);
    }
}
