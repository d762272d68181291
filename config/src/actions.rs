//! Run-once actions: a hearth extension of the MachineConfig spec (`spec.actions`), scripts the
//! agent runs once per rendered config, before or after it writes the files. The MCO has no such
//! field; configs without it are MCO configs as they were (their hash does not change).
//!
//! This module holds the type, its limits and its validation; the agent runs them
//! (`hearth_agent::apply::action`), rendering concatenates them in config order
//! (`render::merge`).

use crate::finding::Finding;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;

/// Actions one MachineConfig, and one rendered config, may declare.
pub const MAX_ACTIONS: usize = 32;
/// The size of one action's script, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// The longest `timeoutSeconds`.
pub const MAX_TIMEOUT_SECONDS: u32 = 3600;
/// `timeoutSeconds` when it is not given.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 300;
/// The length of an action's name.
pub const MAX_NAME_LEN: usize = 63;
/// Entries of `interpreter` (the program and its arguments).
pub const MAX_INTERPRETER_ARGS: usize = 8;
/// The length of one `interpreter` entry.
pub const MAX_INTERPRETER_ARG_LEN: usize = 256;
/// The interpreter when none is given: the script runs as `/bin/sh -eu SCRIPT`.
pub const DEFAULT_INTERPRETER: [&str; 2] = ["/bin/sh", "-eu"];

/// When an action runs relative to the files and units of its config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActionWhen {
    /// Before any file or unit of the config is written.
    BeforeFiles,
    /// After the files and units are written, their services handled and the host verified
    /// (before a reboot the config needs).
    #[default]
    AfterFiles,
}

impl fmt::Display for ActionWhen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActionWhen::BeforeFiles => "BeforeFiles",
            ActionWhen::AfterFiles => "AfterFiles",
        })
    }
}

/// What a failed action (non-zero exit, killed, timed out, interrupted by a crash) does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActionFailure {
    /// The apply fails: its files are rolled back and the node is Degraded, naming the action.
    #[default]
    Degrade,
    /// The failure is recorded (status, `hearth describe node`) and the apply goes on.
    Ignore,
}

impl fmt::Display for ActionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActionFailure::Degrade => "Degrade",
            ActionFailure::Ignore => "Ignore",
        })
    }
}

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT_SECONDS
}

/// One run-once action (`spec.actions[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOnceAction {
    /// Its name: unique across the configs of a pool; lower-case letters, digits, `-`, `.`.
    pub name: String,
    /// When it runs (`AfterFiles` when not given).
    #[serde(default)]
    pub when: ActionWhen,
    /// The program and its arguments that run the script, which is passed as the last argument
    /// (a file). Empty: [`DEFAULT_INTERPRETER`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interpreter: Vec<String>,
    /// The script's text.
    pub script: String,
    /// How long it may run before its process group is killed ([`DEFAULT_TIMEOUT_SECONDS`]
    /// when not given).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u32,
    /// What its failure does (`Degrade` when not given).
    #[serde(default)]
    pub failure: ActionFailure,
}

impl RunOnceAction {
    /// The command line without the script file: `interpreter`, or [`DEFAULT_INTERPRETER`].
    pub fn command(&self) -> Vec<String> {
        if self.interpreter.is_empty() {
            DEFAULT_INTERPRETER.iter().map(|s| s.to_string()).collect()
        } else {
            self.interpreter.clone()
        }
    }

    /// The sha256 (hex) of its interpreter and script: with the rendered config's name and the
    /// action's name, the identity of one run.
    pub fn script_digest(&self) -> String {
        let mut h = Sha256::new();
        for arg in self.command() {
            h.update(arg.as_bytes());
            h.update([0]);
        }
        h.update([0]);
        h.update(self.script.as_bytes());
        hex::encode(h.finalize())
    }
}

/// At most 64 characters of `s`, for messages.
fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Whether `name` is an action name: 1 to [`MAX_NAME_LEN`] of `a-z 0-9 - .`, starting and ending
/// with a letter or digit.
pub fn is_action_name(name: &str) -> bool {
    let ok_end = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
        && ok_end(name.chars().next())
        && ok_end(name.chars().last())
}

/// Checks the actions of one MachineConfig (`spec.actions`): count, names (and their uniqueness
/// in the config), script size, interpreter and timeout. Findings are at `spec.actions[i].…`.
pub fn validate(actions: &[RunOnceAction], out: &mut Vec<Finding>) {
    if actions.len() > MAX_ACTIONS {
        out.push(Finding::error(
            "spec.actions".into(),
            format!(
                "{} actions; a MachineConfig may declare at most {MAX_ACTIONS}: merge scripts or split the config",
                actions.len()
            ),
        ));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, a) in actions.iter().enumerate() {
        let at = |field: &str| format!("spec.actions[{i}].{field}");
        if !is_action_name(&a.name) {
            out.push(Finding::error(
                at("name"),
                format!(
                    "{:?} is not an action name: 1 to {MAX_NAME_LEN} lower-case letters, digits, '-' or '.', starting and ending with a letter or digit",
                    short(&a.name)
                ),
            ));
        } else if let Some(first) = seen.insert(a.name.as_str(), i) {
            out.push(Finding::error(
                at("name"),
                format!(
                    "action {:?} is declared twice (also spec.actions[{first}]); action names must be unique: rename one",
                    a.name
                ),
            ));
        }
        if a.script.trim().is_empty() {
            out.push(Finding::error(
                at("script"),
                "the script is empty; write the commands to run",
            ));
        }
        if a.script.len() > MAX_SCRIPT_BYTES {
            out.push(Finding::error(
                at("script"),
                format!(
                    "the script is {} bytes; at most {MAX_SCRIPT_BYTES}: ship a larger program as a file under spec.config.storage.files and run it from the script",
                    a.script.len()
                ),
            ));
        }
        if a.script.contains('\0') {
            out.push(Finding::error(
                at("script"),
                "the script contains a NUL character",
            ));
        }
        if a.timeout_seconds == 0 || a.timeout_seconds > MAX_TIMEOUT_SECONDS {
            out.push(Finding::error(
                at("timeoutSeconds"),
                format!(
                    "{} is out of range; give 1 to {MAX_TIMEOUT_SECONDS} seconds",
                    a.timeout_seconds
                ),
            ));
        }
        if a.interpreter.len() > MAX_INTERPRETER_ARGS {
            out.push(Finding::error(
                at("interpreter"),
                format!(
                    "{} entries; at most {MAX_INTERPRETER_ARGS} (the program and its arguments)",
                    a.interpreter.len()
                ),
            ));
        }
        for (k, arg) in a.interpreter.iter().enumerate() {
            let bad = if arg.len() > MAX_INTERPRETER_ARG_LEN {
                Some(format!(
                    "{} bytes long; at most {MAX_INTERPRETER_ARG_LEN}",
                    arg.len()
                ))
            } else if arg.contains('\0') {
                Some("contains a NUL character".to_string())
            } else if k == 0 && !arg.starts_with('/') {
                Some(format!(
                    "{:?} is not an absolute path; name the program by its full path, e.g. /bin/bash",
                    short(arg)
                ))
            } else {
                None
            };
            if let Some(why) = bad {
                out.push(Finding::error(
                    format!("spec.actions[{i}].interpreter[{k}]"),
                    why,
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(name: &str) -> RunOnceAction {
        RunOnceAction {
            name: name.into(),
            when: ActionWhen::AfterFiles,
            interpreter: Vec::new(),
            script: "echo hi\n".into(),
            timeout_seconds: 10,
            failure: ActionFailure::Degrade,
        }
    }

    fn paths(actions: &[RunOnceAction]) -> Vec<String> {
        let mut out = Vec::new();
        validate(actions, &mut out);
        out.into_iter().map(|f| f.path).collect()
    }

    #[test]
    fn names_are_checked_and_unique() {
        assert!(paths(&[action("restart-nic"), action("a.b-1")]).is_empty());
        assert_eq!(paths(&[action("Bad Name")]), ["spec.actions[0].name"]);
        assert_eq!(paths(&[action("-x")]), ["spec.actions[0].name"]);
        assert_eq!(paths(&[action(&"a".repeat(64))]), ["spec.actions[0].name"]);
        assert_eq!(
            paths(&[action("a"), action("b"), action("a")]),
            ["spec.actions[2].name"]
        );
    }

    #[test]
    fn script_timeout_interpreter_and_count_are_bounded() {
        let mut big = action("big");
        big.script = "#".repeat(MAX_SCRIPT_BYTES + 1);
        let mut fits = action("fits");
        fits.script = "#".repeat(MAX_SCRIPT_BYTES);
        assert_eq!(paths(&[big, fits]), ["spec.actions[0].script"]);
        let mut empty = action("empty");
        empty.script = " \n".into();
        assert_eq!(paths(&[empty]), ["spec.actions[0].script"]);
        for (t, ok) in [(0, false), (1, true), (3600, true), (3601, false)] {
            let mut a = action("t");
            a.timeout_seconds = t;
            assert_eq!(paths(&[a]).is_empty(), ok, "timeout {t}");
        }
        let mut rel = action("rel");
        rel.interpreter = vec!["bash".into(), "-e".into()];
        assert_eq!(paths(&[rel]), ["spec.actions[0].interpreter[0]"]);
        let many: Vec<RunOnceAction> = (0..=MAX_ACTIONS)
            .map(|i| action(&format!("a{i}")))
            .collect();
        assert_eq!(paths(&many), ["spec.actions"]);
    }

    #[test]
    fn the_digest_covers_interpreter_and_script() {
        let a = action("a");
        let mut b = a.clone();
        b.script.push(' ');
        let mut c = a.clone();
        c.interpreter = vec!["/bin/bash".into()];
        let mut d = a.clone();
        d.interpreter = DEFAULT_INTERPRETER.iter().map(|s| s.to_string()).collect();
        assert_ne!(a.script_digest(), b.script_digest());
        assert_ne!(a.script_digest(), c.script_digest());
        assert_eq!(a.script_digest(), d.script_digest());
        assert_eq!(a.command(), ["/bin/sh", "-eu"]);
    }
}
