//! Run-once actions (`spec.actions` of the rendered config): each runs at most once per rendered
//! config, before or after the files as it declares.
//!
//! ## Once, also across a crash
//! A run is identified by the rendered config's name, the action's name and the digest of its
//! interpreter and script. Before the process starts, the journal records the run as `Running`
//! (an atomic, fsynced write); when it ends, the journal records how. An apply that runs again
//! (a resume after a crash or a reboot, a forced re-apply of the same config) finds the record
//! and does not run the action again:
//! - a record still `Running` means the agent stopped while the action ran: it becomes
//!   `Interrupted` and its failure policy applies (it may have done part of its work, or all of
//!   it; hearth cannot tell, and running it again could do it twice);
//! - a finished record stands: a success goes on, a failure applies its policy again (a failed
//!   `Degrade` action keeps the config from being applied until a new rendered config).
//!
//! ## How it runs
//! The script is written (atomically, mode 0700) to [`SCRIPT_DIR`]`/<digest>` and run as
//! `interpreter... FILE` (`/bin/sh -eu FILE` by default) in a process group of its own, with
//! stdin closed, a fixed environment (`PATH`, `HEARTH_ROOT`, `HEARTH_CONFIG`, `HEARTH_ACTION`),
//! the root as working directory, and stdout and stderr captured together, keeping the last
//! [`MAX_OUTPUT_TAIL`] bytes. At its timeout its whole process group is killed (SIGKILL); when it
//! ends, whatever it left running in its process group is killed too.

use super::agent::Agent;
use super::error::AgentError;
use crate::journal::{now_rfc3339, Journal, NamedConfig};
use hearth_api::{ActionFailurePolicy, ActionOutcome, ActionRun};
use hearth_config::actions::{ActionFailure, ActionWhen, RunOnceAction};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Where the scripts are written before they run.
pub const SCRIPT_DIR: &str = "/var/lib/hearth/actions";
/// The bytes of output kept per run (the end of it).
pub const MAX_OUTPUT_TAIL: usize = 4 * 1024;
/// Run records the journal keeps: all of the desired config's, then the newest of earlier
/// configs up to this many in all.
pub const MAX_ACTION_RECORDS: usize = 64;
/// How long the output is still read after the action ended (a process that left its process
/// group may hold the pipe open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
/// `PATH` of an action.
const ACTION_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn api_when(w: ActionWhen) -> hearth_api::ActionWhen {
    match w {
        ActionWhen::BeforeFiles => hearth_api::ActionWhen::BeforeFiles,
        ActionWhen::AfterFiles => hearth_api::ActionWhen::AfterFiles,
    }
}

fn api_failure(f: ActionFailure) -> ActionFailurePolicy {
    match f {
        ActionFailure::Degrade => ActionFailurePolicy::Degrade,
        ActionFailure::Ignore => ActionFailurePolicy::Ignore,
    }
}

/// How one run ended, for the record.
struct Ended {
    outcome: ActionOutcome,
    exit_status: Option<i32>,
    signal: Option<i32>,
    duration: Duration,
    tail: String,
}

/// The node's reason for a failed run under `Degrade`: the action, its config, how it ended and
/// its output's tail.
pub fn failure_reason(r: &ActionRun) -> String {
    let how = match r.outcome {
        ActionOutcome::TimedOut => format!(
            "timed out after {} s and was killed",
            r.duration_ms.unwrap_or(0) / 1000
        ),
        ActionOutcome::Interrupted => {
            "was interrupted (the agent stopped while it ran); it is not run again for this config"
                .to_string()
        }
        _ => match (r.exit_status, r.signal) {
            (Some(code), _) => format!("failed with exit status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            (None, None) => "failed".to_string(),
        },
    };
    let mut reason = format!("action {} ({:?}) of {} {how}", r.name, r.when, r.config);
    let tail = r.output_tail.trim_end();
    if !tail.is_empty() {
        reason.push_str("; output (end): ");
        reason.push_str(tail);
    }
    reason
}

fn is_failure(o: ActionOutcome) -> bool {
    !matches!(o, ActionOutcome::Succeeded | ActionOutcome::Running)
}

impl Agent {
    /// Runs the actions of `desired` declared for `when`, in order, each at most once (see the
    /// module documentation). `Ok(Err(reason))`: one failed under `Degrade`; the apply must fail
    /// with that reason.
    pub(super) async fn run_actions(
        &self,
        j: &mut Journal,
        desired: &NamedConfig,
        when: ActionWhen,
    ) -> Result<Result<(), String>, AgentError> {
        for action in desired.spec.actions.iter().filter(|a| a.when == when) {
            let digest = action.script_digest();
            let found = j.actions.iter().position(|r| {
                r.config == desired.name && r.name == action.name && r.script_digest == digest
            });
            let index = match found {
                Some(i) => {
                    if j.actions[i].outcome == ActionOutcome::Running {
                        tracing::warn!(action = %action.name, config = %desired.name,
                            "the agent stopped while this action ran: not run again, recorded as interrupted");
                        j.actions[i].outcome = ActionOutcome::Interrupted;
                        j.save(&self.root)?;
                    } else {
                        tracing::info!(action = %action.name, config = %desired.name,
                            outcome = %j.actions[i].outcome, "already ran for this config: not run again");
                    }
                    i
                }
                None => {
                    self.record_start(j, desired, action, digest)?;
                    let ended = self.run_one(&desired.name, action).await;
                    let i = j.actions.len() - 1;
                    let r = &mut j.actions[i];
                    r.outcome = ended.outcome;
                    r.exit_status = ended.exit_status;
                    r.signal = ended.signal;
                    r.duration_ms = Some(ended.duration.as_millis().try_into().unwrap_or(u64::MAX));
                    r.output_tail = ended.tail;
                    j.save(&self.root)?;
                    tracing::info!(action = %action.name, config = %desired.name,
                        outcome = %ended.outcome, exit_status = ?ended.exit_status,
                        "run-once action ended");
                    i
                }
            };
            let r = &j.actions[index];
            if is_failure(r.outcome) {
                match action.failure {
                    ActionFailure::Degrade => return Ok(Err(failure_reason(r))),
                    ActionFailure::Ignore => {
                        tracing::warn!(reason = %failure_reason(r), "run-once action failed; ignored as its policy says");
                    }
                }
            }
        }
        Ok(Ok(()))
    }

    /// Records the run as `Running` in the journal (durably) before anything starts.
    fn record_start(
        &self,
        j: &mut Journal,
        desired: &NamedConfig,
        action: &RunOnceAction,
        digest: String,
    ) -> Result<(), AgentError> {
        j.actions.push(ActionRun {
            name: action.name.clone(),
            config: desired.name.clone(),
            script_digest: digest,
            when: api_when(action.when),
            failure: api_failure(action.failure),
            started_at: now_rfc3339(),
            outcome: ActionOutcome::Running,
            exit_status: None,
            signal: None,
            duration_ms: None,
            output_tail: String::new(),
        });
        prune(&mut j.actions, &desired.name);
        j.save(&self.root)?;
        Ok(())
    }

    /// Runs one action to its end (or its timeout). Never fails: a script that cannot be
    /// written or started is a failed run with the cause as its output.
    async fn run_one(&self, config: &str, action: &RunOnceAction) -> Ended {
        let started = Instant::now();
        let failed_to_start = |why: String| Ended {
            outcome: ActionOutcome::Failed,
            exit_status: None,
            signal: None,
            duration: started.elapsed(),
            tail: why,
        };
        let digest = action.script_digest();
        let script = format!("{SCRIPT_DIR}/{digest}");
        if let Err(e) = self
            .root
            .write_atomic(&script, action.script.as_bytes(), 0o700, None)
        {
            return failed_to_start(format!("hearth-agent could not write the script: {e}"));
        }
        let host_script = self.root.host_path(&script);
        let command = action.command();
        let timeout = Duration::from_secs(u64::from(action.timeout_seconds));
        let _busy = crate::watchdog::busy("a run-once action", timeout + DRAIN_AFTER_EXIT * 4);
        tracing::info!(action = %action.name, config, command = ?command, timeout_s = action.timeout_seconds, "running a run-once action");
        let mut cmd = tokio::process::Command::new(&command[0]);
        cmd.args(&command[1..])
            .arg(&host_script)
            .current_dir(&self.root_path)
            .env_clear()
            .env("PATH", ACTION_PATH)
            .env("HEARTH_ROOT", &self.root_path)
            .env("HEARTH_CONFIG", config)
            .env("HEARTH_ACTION", &action.name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = self.root.remove(&script);
                return failed_to_start(format!(
                    "hearth-agent could not start {}: {e}",
                    command[0]
                ));
            }
        };
        let pgid = child.id().map(|id| Pid::from_raw(id as i32));
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let tail = Arc::new(Mutex::new(Tail::default()));
        let mut reader = tokio::spawn(read_tail(stdout, stderr, Arc::clone(&tail)));
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status.ok(), false),
            Err(_) => {
                tracing::warn!(action = %action.name, "run-once action timed out: killing its process group");
                if let Some(p) = pgid {
                    let _ = killpg(p, Signal::SIGKILL);
                }
                (child.wait().await.ok(), true)
            }
        };
        let duration = started.elapsed();
        // What it left behind in its process group goes with it.
        if let Some(p) = pgid {
            let _ = killpg(p, Signal::SIGKILL);
        }
        let drained = tokio::time::timeout(DRAIN_AFTER_EXIT, &mut reader)
            .await
            .is_ok();
        if !drained {
            // A process that left the action's process group holds the output open: keep
            // what came so far.
            reader.abort();
        }
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner()).text();
        if !drained {
            tail.push_str("\n[hearth-agent: stopped reading: a process that left the action's process group holds its output open]");
        }
        let _ = self.root.remove(&script);
        let (exit_status, signal) = match status {
            Some(s) => (s.code(), s.signal()),
            None => (None, None),
        };
        let outcome = if timed_out {
            ActionOutcome::TimedOut
        } else if exit_status == Some(0) {
            ActionOutcome::Succeeded
        } else {
            ActionOutcome::Failed
        };
        Ended {
            outcome,
            exit_status,
            signal,
            duration,
            tail,
        }
    }
}

/// Keeps every record of `config` and the newest others, [`MAX_ACTION_RECORDS`] in all (a
/// config has at most [`hearth_config::actions::MAX_ACTIONS`] actions, fewer than that).
fn prune(records: &mut Vec<ActionRun>, config: &str) {
    let mut others = records.iter().filter(|r| r.config != config).count();
    let mut excess = records.len().saturating_sub(MAX_ACTION_RECORDS);
    records.retain(|r| {
        if excess > 0 && others > 0 && r.config != config {
            excess -= 1;
            others -= 1;
            false
        } else {
            true
        }
    });
}

/// The end of an action's output: at most [`MAX_OUTPUT_TAIL`] bytes, and how many came before.
#[derive(Debug, Default)]
struct Tail {
    bytes: VecDeque<u8>,
    dropped: u64,
}

impl Tail {
    fn keep(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let excess = self.bytes.len().saturating_sub(MAX_OUTPUT_TAIL);
        self.bytes.drain(..excess);
        self.dropped += excess as u64;
    }

    fn text(&self) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        if self.dropped > 0 {
            format!("[... {} bytes before] {text}", self.dropped)
        } else {
            text.into_owned()
        }
    }
}

/// Reads both pipes to their end into `tail`, in the order the output came.
async fn read_tail(
    mut stdout: Option<tokio::process::ChildStdout>,
    mut stderr: Option<tokio::process::ChildStderr>,
    tail: Arc<Mutex<Tail>>,
) {
    let keep = |bytes: &[u8]| tail.lock().unwrap_or_else(|e| e.into_inner()).keep(bytes);
    let (mut a, mut b) = ([0u8; 4096], [0u8; 4096]);
    while stdout.is_some() || stderr.is_some() {
        tokio::select! {
            n = async { stdout.as_mut().expect("guarded").read(&mut a).await }, if stdout.is_some() => match n {
                Ok(n) if n > 0 => keep(&a[..n]),
                _ => stdout = None,
            },
            n = async { stderr.as_mut().expect("guarded").read(&mut b).await }, if stderr.is_some() => match n {
                Ok(n) if n > 0 => keep(&b[..n]),
                _ => stderr = None,
            },
        }
    }
}

/// Renames the records of `from` to `to` (the same rendered content under a new name: the
/// actions ran for it already).
pub(super) fn rename_records(records: &mut [ActionRun], from: &str, to: &str) {
    for r in records.iter_mut().filter(|r| r.config == from) {
        r.config = to.to_string();
    }
}

/// Whether a run-once action of `config` with the `Degrade` policy failed (or was interrupted
/// or timed out): the apply of that config was undone because of it, and applying it again
/// would only rewrite and roll back the same files (the action is never run twice).
pub(super) fn failed_degrading(j: &Journal, config: &str) -> bool {
    j.actions.iter().any(|r| {
        r.config == config
            && r.failure == ActionFailurePolicy::Degrade
            && !matches!(r.outcome, ActionOutcome::Succeeded | ActionOutcome::Running)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: &str, name: &str) -> ActionRun {
        ActionRun {
            name: name.into(),
            config: config.into(),
            script_digest: String::new(),
            when: hearth_api::ActionWhen::AfterFiles,
            failure: ActionFailurePolicy::Degrade,
            started_at: String::new(),
            outcome: ActionOutcome::Succeeded,
            exit_status: Some(0),
            signal: None,
            duration_ms: Some(1),
            output_tail: String::new(),
        }
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_and_counts_the_rest() {
        let mut t = Tail::default();
        t.keep(b"abc");
        assert_eq!(t.text(), "abc");
        t.keep(&vec![b'x'; MAX_OUTPUT_TAIL]);
        t.keep(b"end");
        let text = t.text();
        assert!(text.starts_with("[... 6 bytes before] xxx"), "{text}");
        assert!(text.ends_with("xend"), "{text}");
    }

    #[test]
    fn pruning_keeps_the_desired_configs_records() {
        let mut records: Vec<ActionRun> = (0..MAX_ACTION_RECORDS)
            .map(|i| run(&format!("old-{i}"), "a"))
            .collect();
        records.extend((0..10).map(|i| run("new", &format!("n{i}"))));
        prune(&mut records, "new");
        assert_eq!(records.len(), MAX_ACTION_RECORDS);
        assert_eq!(records.iter().filter(|r| r.config == "new").count(), 10);
        // The oldest others went first.
        assert_eq!(records[0].config, "old-10");
    }

    #[test]
    fn the_reason_names_the_action_its_status_and_output() {
        let mut r = run("rendered-worker-1", "enroll");
        r.outcome = ActionOutcome::Failed;
        r.exit_status = Some(3);
        r.output_tail = "no network\n".into();
        assert_eq!(
            failure_reason(&r),
            "action enroll (AfterFiles) of rendered-worker-1 failed with exit status 3; output (end): no network"
        );
    }
}
