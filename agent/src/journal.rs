//! The agent's journal: what it is doing, written atomically before every step, so that a
//! `kill -9` or a power cut at any point converges when the agent starts again.
//!
//! The journal is one JSON document at [`JOURNAL_PATH`] in the target root (version 2). It
//! holds the names of the current and desired configs with references to their specs, the
//! node-disruption policies in force, the state and its reason, the progress of an apply (phase,
//! step) and the undo records of the steps taken so far. The snapshots the undo records refer to
//! live under [`UNDO_DIR`].
//!
//! The specs themselves are stored once each under [`CONFIG_DIR`], named by the sha256 of their
//! bytes (`<sha256>.json`), so that the journal stays a small document however many files a
//! config has: the daemon reads and rewrites it (a tick, a drift report) without handling two
//! full configs. Crash safety: a spec file is written (atomically) before the journal that refers
//! to it, and files no journal refers to are removed only after the journal is written; so the
//! journal on disk always refers to complete spec files, and a crash leaves at most an
//! unreferenced file that the next save removes. A spec file is checked against its name when
//! read. A reader in another process (`hearth-agent status`) that finds a spec gone because an
//! agent saved a newer journal meanwhile reads the journal again.
//!
//! Version 1 journals (specs inline) are read as they are and written as version 2 by the next
//! save.

use crate::state::{transition, Event, InvalidTransition, State};
use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use hearth_hostops::fs::{FsError, Root};
use hearth_hostops::os::{DeploymentId, OsExpectation};
use hearth_hostops::verify::sha256_hex;
use serde::{Deserialize, Serialize};

/// Where the journal lives in the target root.
pub const JOURNAL_PATH: &str = "/var/lib/hearth/journal.json";
/// Where undo snapshots of the apply in progress live.
pub const UNDO_DIR: &str = "/var/lib/hearth/undo";
/// Where the specs the journal refers to are stored (`<sha256>.json`).
pub const CONFIG_DIR: &str = "/var/lib/hearth/configs";
/// The journal format version this agent writes (1: specs inline; 2: specs under
/// [`CONFIG_DIR`]).
pub const JOURNAL_VERSION: u32 = 2;
/// How many transitions the history keeps.
pub const HISTORY_LEN: usize = 32;

/// A rendered config: its name and its spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedConfig {
    /// `rendered-worker-…` (or the file's MachineConfig name).
    pub name: String,
    /// The spec.
    pub spec: MachineConfigSpec,
}

/// What an apply is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Running the plan's actions (then its service steps).
    Applying,
    /// Undoing the steps of a failed apply.
    RollingBack,
    /// The reboot was requested.
    Rebooting,
    /// Applied and verified, on trial until [`Progress::deadline`]: a status report the server
    /// accepts keeps the change, none before the deadline undoes it (`apply/trial.rs`).
    Trial,
}

/// How far an apply got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// The step being run (0-based index into the plan's actions, then its service steps).
    pub step: usize,
    /// Number of steps.
    pub total: usize,
    /// While rolling back: the failure being undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// While rebooting: the boot id before the reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// While rebooting: how many times the reboot was requested without the node coming back
    /// in the config (a guard against reboot loops).
    #[serde(default)]
    pub reboot_requests: u32,
    /// While rebooting for an OS change: the deployment staged and what the boot must show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsProgress>,
    /// The change is on trial: its deadline in seconds, set when it was applied (kept through
    /// its reboot; the trial starts after the boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_seconds: Option<u32>,
    /// While on trial: the deadline (wall clock, seconds since the Unix epoch), so that a crash
    /// or a reboot during the trial keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<i64>,
    /// The pool's trial policy the apply started with, kept so that an apply resumed after a
    /// crash is still on trial (the restarted daemon does not know it until the server answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_policy: Option<hearth_config::trial::TrialPolicy>,
}

/// The OS part of an apply: written before the reboot, read after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsProgress {
    /// The change, for people (`kernel arguments +a -b, OS image ...`).
    pub change: String,
    /// The deployment the next boot must start, and its kernel arguments.
    pub expect: OsExpectation,
    /// The deployment the change was made from: where an automatic rollback goes.
    pub from: DeploymentId,
    /// Set when the new deployment failed after its boot and the agent rolled back to `from`:
    /// why. The boot after this one must show `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<String>,
}

/// How to undo one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Undo {
    /// Put the path back as its snapshot in [`UNDO_DIR`] says.
    Path {
        /// The path.
        path: String,
    },
    /// Put the unit's enablement back.
    UnitState {
        /// The unit.
        name: String,
        /// Its unit-file state before (`enabled`, `disabled`, ...; none when unknown).
        previous: Option<String>,
    },
}

/// A transition, for `status` and `describe`: the wire type `hearth_api::HistoryItem`, as
/// reported to hearth-server.
pub use hearth_api::HistoryItem as HistoryEntry;

/// The journal document. Its serde form leaves out the configs; [`Journal::save`] and
/// [`Journal::load`] store them next to it (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// Format version.
    pub version: u32,
    /// State.
    pub state: State,
    /// Why the node is in this state (failing step, object and cause; unreconcilable fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the state last changed (RFC 3339, UTC).
    pub last_transition: String,
    /// The config the host is in (verified).
    #[serde(skip)]
    pub current: Option<NamedConfig>,
    /// The config being applied, or the last one asked for.
    #[serde(skip)]
    pub desired: Option<NamedConfig>,
    /// Node-disruption policies the plan was made with.
    #[serde(default)]
    pub policies: DisruptionPolicies,
    /// The apply in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Undo records of the apply in progress, in the order the steps ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undo: Vec<Undo>,
    /// Drift found by the monitor (one line per path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// A config applied before this one still needs its reboot (a new config superseded a
    /// pending reboot): the apply in progress ends in `Rebooting` whatever its own plan says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reboot_pending: bool,
    /// The desired config whose OS deployment failed after its boot and was rolled back: it is
    /// not staged again (no reboot loop) until another config or the force file asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_os: Option<String>,
    /// The desired config whose trial failed (no answer from the server before the deadline)
    /// and was undone: not applied again (no loop) until another config or a force asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_trial: Option<String>,
    /// While a staged OS deployment waits for its reboot and a newer config superseded it: the
    /// OS fields (kernel arguments, kernel type, OS image, extensions) of the config the booted
    /// deployment was made for. The next OS change is planned from these, because kernel
    /// arguments are staged as a diff on the booted deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_base: Option<MachineConfigSpec>,
    /// Recent transitions, oldest first.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    /// The highest id of an admin's request (`hearth node force`, `restore-file`) acted on:
    /// every request up to it is finished and never acted on again (`requests.rs`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests_done: u64,
    /// The force request whose re-apply is under way: written with the apply's start, so a
    /// crash neither loses nor repeats it; finished (moved to `requests_done`) once the apply
    /// ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forcing: Option<u64>,
    /// The outcomes of the last requests acted on, oldest first (reported to the server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_results: Vec<hearth_api::RequestResult>,
    /// Run-once actions: each run recorded (`Running`) before it starts and again when it
    /// ended, so that none runs twice for the same rendered config (`apply/action.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<hearth_api::ActionRun>,
    /// The booted OS deployment as the OS backend last reported it (read once per agent start
    /// and after a boot into a new deployment; reported to the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<hearth_api::BootedOs>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for Journal {
    fn default() -> Self {
        Journal {
            version: JOURNAL_VERSION,
            state: State::Done,
            reason: None,
            last_transition: now_rfc3339(),
            current: None,
            desired: None,
            policies: DisruptionPolicies::default(),
            progress: None,
            undo: Vec::new(),
            drift: Vec::new(),
            reboot_pending: false,
            failed_os: None,
            failed_trial: None,
            os_base: None,
            history: Vec::new(),
            requests_done: 0,
            forcing: None,
            request_results: Vec::new(),
            actions: Vec::new(),
            os: None,
        }
    }
}

/// Journal errors.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading or writing failed.
    #[error("journal {JOURNAL_PATH}: {0}")]
    Fs(#[from] FsError),
    /// The journal cannot be parsed.
    #[error("journal {JOURNAL_PATH} is unreadable ({0}); move it away to start afresh (the host keeps its files)")]
    Parse(String),
    /// A spec the journal refers to is missing or damaged.
    #[error("journal {JOURNAL_PATH}: config {name:?} ({CONFIG_DIR}/{digest}.json) {what}; move the journal away to start afresh (the host keeps its files)")]
    Config {
        /// The config's name.
        name: String,
        /// Its digest.
        digest: String,
        /// What is wrong.
        what: String,
    },
    /// It was written by a newer agent.
    #[error("journal {JOURNAL_PATH} has version {0}, newer than this agent understands ({JOURNAL_VERSION})")]
    Version(u32),
    /// A transition the state machine does not allow (a bug).
    #[error(transparent)]
    Transition(#[from] InvalidTransition),
}

/// The small part of the journal: what a status line or a tick of the daemon needs, read
/// without building the configs (serde skips them).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// State.
    pub state: State,
    /// Reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// The apply in progress.
    #[serde(default)]
    pub progress: Option<Progress>,
    /// The desired config's name.
    #[serde(default, deserialize_with = "name_only")]
    pub desired: Option<String>,
}

fn name_only<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct NameOnly {
        name: String,
    }
    Ok(Option::<NameOnly>::deserialize(d)?.map(|n| n.name))
}

impl Summary {
    /// Reads the summary (a fresh node's when there is no journal).
    pub fn load(root: &Root) -> Result<Summary, JournalError> {
        let Some(bytes) = root.read(JOURNAL_PATH)? else {
            return Ok(Summary {
                state: State::Done,
                reason: None,
                progress: None,
                desired: None,
            });
        };
        serde_json::from_slice(&bytes).map_err(|e| JournalError::Parse(e.to_string()))
    }

    /// The status line (`STATUS=`): state, desired config, reason.
    pub fn status_line(&self) -> String {
        let desired = self.desired.as_deref().unwrap_or("-");
        match &self.reason {
            Some(r) => format!("{} {desired}: {r}", self.state),
            None => format!("{} {desired}", self.state),
        }
    }
}

/// A config as the journal file names it. Version 2: `config` is the digest of its spec under
/// [`CONFIG_DIR`]; version 1: `spec` is the spec itself.
#[derive(Debug, Serialize, Deserialize)]
struct StoredConfig {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<MachineConfigSpec>,
}

/// The journal file as written.
#[derive(Serialize)]
struct DiskOut<'a> {
    #[serde(flatten)]
    journal: &'a Journal,
    #[serde(skip_serializing_if = "Option::is_none")]
    current: Option<StoredConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    desired: Option<StoredConfig>,
}

/// The journal file as read (either version).
#[derive(Deserialize)]
struct DiskIn {
    #[serde(flatten)]
    journal: Journal,
    #[serde(default)]
    current: Option<StoredConfig>,
    #[serde(default)]
    desired: Option<StoredConfig>,
}

/// Only the current config of the journal file.
#[derive(Deserialize)]
struct CurrentOnly {
    version: u32,
    #[serde(default)]
    current: Option<StoredConfig>,
}

fn config_path(digest: &str) -> String {
    format!("{CONFIG_DIR}/{digest}.json")
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Stores `spec` under [`CONFIG_DIR`] unless it is there already; returns its digest.
fn store_spec(root: &Root, spec: &MachineConfigSpec) -> Result<String, JournalError> {
    let bytes = serde_json::to_vec(spec).map_err(|e| JournalError::Parse(e.to_string()))?;
    let digest = sha256_hex(&bytes);
    let path = config_path(&digest);
    // Content-addressed and written atomically: a file of this name has these bytes.
    if root.stat(&path)?.is_none() {
        root.write_atomic(&path, &bytes, 0o600, None)?;
    }
    Ok(digest)
}

/// Reads a stored config back (checking its bytes against its name).
fn read_spec(root: &Root, stored: &StoredConfig) -> Result<MachineConfigSpec, JournalError> {
    let Some(digest) = stored.config.as_deref() else {
        return Err(JournalError::Parse(format!(
            "config {:?} has neither a spec nor a reference to one",
            stored.name
        )));
    };
    let err = |what: String| JournalError::Config {
        name: stored.name.clone(),
        digest: digest.to_string(),
        what,
    };
    if !is_digest(digest) {
        return Err(err("is not a sha256 digest".into()));
    }
    let bytes = root
        .read(&config_path(digest))?
        .ok_or_else(|| err("is missing".into()))?;
    if sha256_hex(&bytes) != digest {
        return Err(err("is damaged (its sha256 does not match its name)".into()));
    }
    serde_json::from_slice(&bytes).map_err(|e| err(format!("cannot be parsed: {e}")))
}

fn into_named(
    root: &Root,
    stored: Option<StoredConfig>,
) -> Result<Option<NamedConfig>, JournalError> {
    let Some(mut stored) = stored else {
        return Ok(None);
    };
    let spec = match stored.spec.take() {
        Some(spec) => spec,
        None => read_spec(root, &stored)?,
    };
    Ok(Some(NamedConfig {
        name: stored.name,
        spec,
    }))
}

impl Journal {
    /// Reads the journal, or a fresh one when there is none. A version 1 journal is read as it
    /// is (and written as the current version by the next [`Journal::save`]).
    pub fn load(root: &Root) -> Result<Journal, JournalError> {
        Self::consistent(root, Self::load_once)
    }

    /// Runs a read of the journal and the specs it refers to again when a spec it named was
    /// missing because another process saved a newer journal in between (and removed the spec
    /// the older one named); a spec missing under an unchanged journal is an error.
    fn consistent<T>(
        root: &Root,
        read: impl Fn(&Root) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        let mut tries = 0;
        loop {
            let before = root.read(JOURNAL_PATH)?;
            match read(root) {
                Err(JournalError::Config { .. }) if tries < 3 => {
                    if root.read(JOURNAL_PATH)? == before {
                        // Not a concurrent save: report the missing spec.
                        return read(root);
                    }
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    fn load_once(root: &Root) -> Result<Journal, JournalError> {
        let Some(bytes) = root.read(JOURNAL_PATH)? else {
            return Ok(Journal::default());
        };
        let disk: DiskIn =
            serde_json::from_slice(&bytes).map_err(|e| JournalError::Parse(e.to_string()))?;
        drop(bytes);
        let mut j = disk.journal;
        if j.version > JOURNAL_VERSION {
            return Err(JournalError::Version(j.version));
        }
        j.version = JOURNAL_VERSION;
        let same = matches!((&disk.current, &disk.desired),
            (Some(StoredConfig { config: Some(a), .. }), Some(StoredConfig { config: Some(b), .. })) if a == b);
        j.current = into_named(root, disk.current)?;
        j.desired = match disk.desired {
            // Both refer to one spec: read it once.
            Some(d) if same => j.current.as_ref().map(|c| NamedConfig {
                name: d.name,
                spec: c.spec.clone(),
            }),
            d => into_named(root, d)?,
        };
        Ok(j)
    }

    /// Reads only the current config (for the drift monitor's expectations): `None` when the
    /// host has none yet.
    pub fn load_current(root: &Root) -> Result<Option<NamedConfig>, JournalError> {
        Self::consistent(root, Self::load_current_once)
    }

    fn load_current_once(root: &Root) -> Result<Option<NamedConfig>, JournalError> {
        let Some(bytes) = root.read(JOURNAL_PATH)? else {
            return Ok(None);
        };
        let disk: CurrentOnly =
            serde_json::from_slice(&bytes).map_err(|e| JournalError::Parse(e.to_string()))?;
        if disk.version > JOURNAL_VERSION {
            return Err(JournalError::Version(disk.version));
        }
        into_named(root, disk.current)
    }

    /// Records a drift line for `path` (replacing the one it had) with no other change:
    /// rewrites the small journal document without reading the configs (a version 1 journal is
    /// loaded and saved in full, which makes it version 2).
    pub fn record_drift(root: &Root, path: &str, what: &str) -> Result<(), JournalError> {
        let parse = |e: serde_json::Error| JournalError::Parse(e.to_string());
        let doc: Option<serde_json::Value> = match root.read(JOURNAL_PATH)? {
            Some(bytes) => Some(serde_json::from_slice(&bytes).map_err(parse)?),
            None => None,
        };
        let version = doc
            .as_ref()
            .and_then(|d| d.get("version"))
            .and_then(|v| v.as_u64());
        let prefix = format!("{path}: ");
        let line = format!("{path}: {what}");
        match (doc, version) {
            (Some(mut doc), Some(v)) if v == u64::from(JOURNAL_VERSION) => {
                let obj = doc
                    .as_object_mut()
                    .ok_or_else(|| JournalError::Parse("not a JSON object".into()))?;
                let drift = obj
                    .entry("drift")
                    .or_insert_with(|| serde_json::Value::Array(Vec::new()));
                let list = drift
                    .as_array_mut()
                    .ok_or_else(|| JournalError::Parse("drift is not a list".into()))?;
                list.retain(|d| !d.as_str().is_some_and(|d| d.starts_with(&prefix)));
                list.push(line.into());
                let bytes = serde_json::to_vec_pretty(&doc).map_err(parse)?;
                root.write_atomic(JOURNAL_PATH, &bytes, 0o600, None)?;
            }
            _ => {
                let mut j = Journal::load(root)?;
                j.drift.retain(|d| !d.starts_with(&prefix));
                j.drift.push(line);
                j.save(root)?;
            }
        }
        Ok(())
    }

    /// Writes the journal atomically (temp file, fsync, rename, fsync directory), after storing
    /// the specs it refers to; then removes the stored specs it no longer refers to.
    pub fn save(&self, root: &Root) -> Result<(), JournalError> {
        let current = match &self.current {
            Some(c) => Some((c.name.clone(), store_spec(root, &c.spec)?)),
            None => None,
        };
        let desired = match (&self.desired, &current) {
            (Some(d), Some((_, digest)))
                if self.current.as_ref().is_some_and(|c| c.spec == d.spec) =>
            {
                Some((d.name.clone(), digest.clone()))
            }
            (Some(d), _) => Some((d.name.clone(), store_spec(root, &d.spec)?)),
            (None, _) => None,
        };
        let keep: Vec<String> = current
            .iter()
            .chain(desired.iter())
            .map(|(_, digest)| format!("{digest}.json"))
            .collect();
        let stored = |c: Option<(String, String)>| {
            c.map(|(name, digest)| StoredConfig {
                name,
                config: Some(digest),
                spec: None,
            })
        };
        let out = DiskOut {
            // `version` is this agent's: `load` and `default` set it.
            journal: self,
            current: stored(current),
            desired: stored(desired),
        };
        let bytes =
            serde_json::to_vec_pretty(&out).map_err(|e| JournalError::Parse(e.to_string()))?;
        root.write_atomic(JOURNAL_PATH, &bytes, 0o600, None)?;
        // Only now: the journal on disk no longer refers to them.
        for name in root.list_dir(CONFIG_DIR)? {
            let stale_tmp = name.starts_with(".hearth-tmp-");
            let stale_spec =
                name.strip_suffix(".json").is_some_and(is_digest) && !keep.contains(&name);
            if stale_tmp || stale_spec {
                root.remove(&format!("{CONFIG_DIR}/{name}"))?;
            }
        }
        Ok(())
    }

    /// Applies `event` through the state machine, recording the reason and the time.
    pub fn transition(
        &mut self,
        event: Event,
        reason: Option<String>,
    ) -> Result<State, JournalError> {
        let next = transition(self.state, event)?;
        let changed = next != self.state || reason != self.reason;
        self.state = next;
        self.reason = reason;
        if changed {
            self.last_transition = now_rfc3339();
            self.history.push(HistoryEntry {
                time: self.last_transition.clone(),
                state: next,
                reason: self.reason.clone(),
                desired: self.desired.as_ref().map(|d| d.name.clone()),
            });
            if self.history.len() > HISTORY_LEN {
                let extra = self.history.len() - HISTORY_LEN;
                self.history.drain(..extra);
            }
        }
        Ok(next)
    }
}

/// The current time as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    hearth_config::time::rfc3339(hearth_config::time::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_transitions() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let mut j = Journal::load(&root).unwrap();
        assert_eq!(j.state, State::Done);
        j.transition(Event::Start, None).unwrap();
        j.transition(
            Event::Failed,
            Some("step 3 (write file /etc/x): disk full".into()),
        )
        .unwrap();
        j.save(&root).unwrap();
        let back = Journal::load(&root).unwrap();
        assert_eq!(back, j);
        assert_eq!(back.state, State::Degraded);
        assert_eq!(back.history.len(), 2);
        assert!(j.transition(Event::Applied, None).is_err());
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        root.write_atomic(JOURNAL_PATH, b"{not json", 0o600, None)
            .unwrap();
        let e = Journal::load(&root).unwrap_err();
        assert!(e.to_string().contains("move it away"), "{e}");
    }

    fn spec(karg: &str) -> MachineConfigSpec {
        MachineConfigSpec {
            kernel_arguments: vec![karg.into()],
            ..Default::default()
        }
    }

    fn named(name: &str, karg: &str) -> NamedConfig {
        NamedConfig {
            name: name.into(),
            spec: spec(karg),
        }
    }

    fn stored_specs(root: &Root) -> Vec<String> {
        root.list_dir(CONFIG_DIR).unwrap()
    }

    #[test]
    fn configs_are_stored_once_and_collected_when_no_longer_referred_to() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let mut j = Journal {
            current: Some(named("rendered-a", "a=1")),
            desired: Some(named("rendered-b", "b=1")),
            ..Default::default()
        };
        j.save(&root).unwrap();
        assert_eq!(stored_specs(&root).len(), 2);
        // The journal file refers to the specs; it does not hold them.
        let text = String::from_utf8(root.read(JOURNAL_PATH).unwrap().unwrap()).unwrap();
        assert!(!text.contains("a=1") && !text.contains("b=1"), "{text}");
        assert_eq!(Journal::load(&root).unwrap(), j);
        assert_eq!(
            Journal::load_current(&root).unwrap(),
            Some(named("rendered-a", "a=1"))
        );

        // Applied: both refer to one spec, stored once; the other is removed.
        j.current = j.desired.clone();
        j.save(&root).unwrap();
        let left = stored_specs(&root);
        assert_eq!(left.len(), 1, "{left:?}");
        let bytes = root
            .read(&format!("{CONFIG_DIR}/{}", left[0]))
            .unwrap()
            .unwrap();
        assert_eq!(format!("{}.json", sha256_hex(&bytes)), left[0]);
        assert_eq!(Journal::load(&root).unwrap(), j);

        // No configs: nothing stored.
        j.current = None;
        j.desired = None;
        j.save(&root).unwrap();
        assert!(stored_specs(&root).is_empty());
    }

    #[test]
    fn version_1_journals_are_read_and_written_as_version_2() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        // As an agent of journal version 1 wrote it: the specs inline.
        let v1 = serde_json::json!({
            "version": 1,
            "state": "Degraded",
            "reason": "step 3 (write file /etc/x): disk full",
            "lastTransition": "2026-01-01T00:00:00Z",
            "current": {"name": "rendered-a", "spec": spec("a=1")},
            "desired": {"name": "rendered-b", "spec": spec("b=1")},
            "drift": ["/etc/y: deleted"],
            "history": [],
        });
        root.write_atomic(JOURNAL_PATH, v1.to_string().as_bytes(), 0o600, None)
            .unwrap();
        let j = Journal::load(&root).unwrap();
        assert_eq!(j.version, JOURNAL_VERSION);
        assert_eq!(j.state, State::Degraded);
        assert_eq!(j.current, Some(named("rendered-a", "a=1")));
        assert_eq!(j.desired, Some(named("rendered-b", "b=1")));
        assert_eq!(j.drift, vec!["/etc/y: deleted".to_string()]);
        assert_eq!(
            Journal::load_current(&root).unwrap(),
            Some(named("rendered-a", "a=1"))
        );

        // A drift report on a version 1 journal migrates it.
        Journal::record_drift(&root, "/etc/z", "mode changed").unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&root.read(JOURNAL_PATH).unwrap().unwrap()).unwrap();
        assert_eq!(doc["version"], JOURNAL_VERSION);
        assert!(doc["current"].get("spec").is_none(), "{doc}");
        assert_eq!(stored_specs(&root).len(), 2);
        let back = Journal::load(&root).unwrap();
        assert_eq!(back.current, j.current);
        assert_eq!(back.desired, j.desired);
        assert_eq!(
            back.drift,
            vec![
                "/etc/y: deleted".to_string(),
                "/etc/z: mode changed".to_string()
            ]
        );
        // Version 2: a drift report rewrites only the journal document.
        Journal::record_drift(&root, "/etc/y", "content changed").unwrap();
        let back = Journal::load(&root).unwrap();
        assert_eq!(
            back.drift,
            vec![
                "/etc/z: mode changed".to_string(),
                "/etc/y: content changed".to_string()
            ]
        );
        assert_eq!(back.current, j.current);
    }

    #[test]
    fn a_missing_or_damaged_config_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let j = Journal {
            current: Some(named("rendered-a", "a=1")),
            ..Default::default()
        };
        j.save(&root).unwrap();
        let name = stored_specs(&root).remove(0);
        let path = format!("{CONFIG_DIR}/{name}");
        root.write_atomic(&path, b"{}", 0o600, None).unwrap();
        let e = Journal::load(&root).unwrap_err().to_string();
        assert!(e.contains("rendered-a") && e.contains("damaged"), "{e}");
        root.remove(&path).unwrap();
        let e = Journal::load(&root).unwrap_err().to_string();
        assert!(
            e.contains("missing") && e.contains("move the journal away"),
            "{e}"
        );
    }
}
