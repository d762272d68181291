//! Run-once actions (`spec.actions`), with the real `hearth-agent` binary on an offline image
//! root (`apply --once-from FILE --root DIR`): each runs once per rendered config, before or after
//! the files as declared, also across a forced re-apply and a crash in the middle of its run;
//! its timeout kills its process group; `Degrade` rolls the apply back and names the action,
//! `Ignore` records the failure and goes on; status reports how each ended.

use crate::common;

use common::mc;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
}

fn apply(root: &Path, config: &Path, extra: &[&str]) -> Output {
    agent()
        .args(["apply", "--once-from"])
        .arg(config)
        .arg("--root")
        .arg(root)
        .args(extra)
        .output()
        .unwrap()
}

/// Applies `config`, which must fail and leave the node Degraded; the status.
fn apply_degraded(root: &Path, config: &Path) -> Value {
    let out = apply(root, config, &[]);
    assert!(!out.status.success(), "{out:?}");
    let s = status(root);
    assert_eq!(s["state"], "Degraded", "{s}");
    s
}

fn status(root: &Path) -> Value {
    let out = agent()
        .args(["status", "-o", "json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A config named `name` writing /etc/app.conf, with `actions` (YAML, indented as under `spec`).
fn config(dir: &Path, name: &str, actions: &str) -> PathBuf {
    config_with(dir, name, "x", actions)
}

/// [`config`] with /etc/app.conf holding `content`.
fn config_with(dir: &Path, name: &str, content: &str, actions: &str) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        mc(
            name,
            &format!(
                "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/app.conf\n        contents:\n          source: data:,{content}%0A\n  actions:\n{actions}"
            ),
        ),
    )
    .unwrap();
    path
}

fn runs(root: &Path, action: &str) -> usize {
    std::fs::read_to_string(root.join(format!("runs-{action}")))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn action_status<'a>(s: &'a Value, config: &str, name: &str) -> &'a Value {
    s["actions"]
        .as_array()
        .unwrap_or_else(|| panic!("no actions in {s}"))
        .iter()
        .find(|a| a["config"] == config && a["name"] == name)
        .unwrap_or_else(|| panic!("no record of {name} for {config} in {s}"))
}

const COUNTING: &str = "  - name: before
    when: BeforeFiles
    script: |
      echo run >> \"$HEARTH_ROOT/runs-$HEARTH_ACTION\"
      test ! -e \"$HEARTH_ROOT/etc/app.conf\"
  - name: after
    script: |
      echo run >> \"$HEARTH_ROOT/runs-$HEARTH_ACTION\"
      test -e \"$HEARTH_ROOT/etc/app.conf\"
      echo \"hello from $HEARTH_CONFIG\"
";

#[test]
fn an_action_runs_once_per_rendered_config_before_or_after_the_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let first = config(dir.path(), "rendered-worker-1", COUNTING);
    let out = apply(root.path(), &first, &[]);
    assert!(out.status.success(), "{out:?}");
    // `before` found no file yet (else `test ! -e` failed it), `after` found it.
    assert_eq!(
        (runs(root.path(), "before"), runs(root.path(), "after")),
        (1, 1)
    );
    let s = status(root.path());
    assert_eq!(s["state"], "Done", "{s}");
    let after = action_status(&s, "rendered-worker-1", "after");
    assert_eq!(after["outcome"], "Succeeded");
    assert_eq!(after["exitStatus"], 0);
    assert_eq!(after["when"], "AfterFiles");
    assert!(after["durationMs"].is_u64(), "{after}");
    assert!(after["startedAt"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert_eq!(after["outputTail"], "hello from rendered-worker-1\n");
    assert_eq!(
        action_status(&s, "rendered-worker-1", "before")["when"],
        "BeforeFiles"
    );
    // And for people: `hearth-agent status`.
    let text = agent()
        .args(["status", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Actions:\n  - before (BeforeFiles, rendered-worker-1): Succeeded, exit status 0, started "),
        "{text}"
    );

    // The same config again, and again forced (a full re-apply): not run again.
    assert!(apply(root.path(), &first, &[]).status.success());
    let out = apply(root.path(), &first, &["--force"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        (runs(root.path(), "before"), runs(root.path(), "after")),
        (1, 1)
    );

    // The same content under another name (a node moved to a pool that renders the same
    // config) is the same config: not run again.
    let renamed = config(dir.path(), "rendered-other-1", COUNTING);
    let out = apply(root.path(), &renamed, &["--force"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        (runs(root.path(), "before"), runs(root.path(), "after")),
        (1, 1)
    );

    // A new rendered config (another file content) with the same actions: they run again, once.
    let second = config_with(dir.path(), "rendered-worker-2", "y", COUNTING);
    std::fs::remove_file(root.path().join("etc/app.conf")).unwrap();
    for _ in 0..2 {
        let out = apply(root.path(), &second, &["--force"]);
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(
        (runs(root.path(), "before"), runs(root.path(), "after")),
        (2, 2)
    );
    let s = status(root.path());
    assert_eq!(
        action_status(&s, "rendered-worker-2", "after")["outcome"],
        "Succeeded"
    );
    // The earlier config's records are still reported (under its latest name).
    assert_eq!(
        action_status(&s, "rendered-other-1", "after")["outcome"],
        "Succeeded"
    );
    // The script file is gone once it ran.
    let left = std::fs::read_dir(root.path().join("var/lib/hearth/actions"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0);
}

#[test]
fn a_failed_action_under_ignore_is_recorded_and_the_apply_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "rendered-worker-1",
        "  - name: check\n    failure: Ignore\n    script: |\n      echo 'disk not found' >&2\n      exit 3\n",
    );
    let out = apply(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(root.path().join("etc/app.conf").exists());
    let s = status(root.path());
    assert_eq!(s["state"], "Done", "{s}");
    let check = action_status(&s, "rendered-worker-1", "check");
    assert_eq!(check["outcome"], "Failed");
    assert_eq!(check["exitStatus"], 3);
    assert_eq!(check["failure"], "Ignore");
    assert_eq!(check["outputTail"], "disk not found\n");
}

#[test]
fn a_failed_action_under_degrade_rolls_the_apply_back_and_names_the_action() {
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "rendered-worker-1",
        "  - name: check\n    script: |\n      echo run >> \"$HEARTH_ROOT/runs-check\"\n      echo 'disk not found' >&2\n      exit 3\n",
    );
    let out = apply(root.path(), &cfg, &[]);
    assert!(!out.status.success(), "{out:?}");
    // The files of the failed apply were rolled back.
    assert!(!root.path().join("etc/app.conf").exists());
    let s = status(root.path());
    assert_eq!(s["state"], "Degraded", "{s}");
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "action check (AfterFiles) of rendered-worker-1 failed with exit status 3; output (end): disk not found"
        ),
        "{reason}"
    );
    // Applying the same config again does not run it again, nor apply and undo its files
    // again (no restart loop): the recorded failure stands until a new config or a force.
    let workings = |s: &Value| {
        s["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["state"] == "Working")
            .count()
    };
    let before = workings(&s);
    let out = apply(root.path(), &cfg, &[]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(runs(root.path(), "check"), 1);
    let s = status(root.path());
    assert_eq!(s["state"], "Degraded");
    assert_eq!(workings(&s), before, "applied again: {s}");
}

#[test]
fn a_failed_before_files_action_under_degrade_stops_the_apply_before_any_file() {
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "rendered-worker-1",
        "  - name: prep\n    when: BeforeFiles\n    script: 'false'\n  - name: after\n    script: |\n      echo run >> \"$HEARTH_ROOT/runs-after\"\n",
    );
    let s = apply_degraded(root.path(), &cfg);
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.contains("action prep (BeforeFiles) of rendered-worker-1 failed with exit status 1"),
        "{reason}"
    );
    assert!(!root.path().join("etc/app.conf").exists());
    assert_eq!(runs(root.path(), "after"), 0);
    assert_eq!(
        action_status(&s, "rendered-worker-1", "prep")["outcome"],
        "Failed"
    );
}

/// Whether process `pid` is gone (or a zombie nobody reaped: it runs nothing).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn an_action_past_its_timeout_is_killed_with_its_process_group() {
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "rendered-worker-1",
        "  - name: slow\n    timeoutSeconds: 1\n    script: |\n      sleep 300 &\n      echo $! > \"$HEARTH_ROOT/child.pid\"\n      echo waiting\n      sleep 300\n",
    );
    let s = apply_degraded(root.path(), &cfg);
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.contains("action slow (AfterFiles) of rendered-worker-1 timed out")
            && reason.contains("waiting"),
        "{reason}"
    );
    let slow = action_status(&s, "rendered-worker-1", "slow");
    assert_eq!(slow["outcome"], "TimedOut");
    assert_eq!(slow["signal"], 9);
    // Its background child was in its process group: killed too.
    let child: i32 = std::fs::read_to_string(root.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone(child), "the action's child {child} still runs");
    assert!(!root.path().join("etc/app.conf").exists());
}

/// A process that leaves the action's process group (a daemon it starts) and keeps its output
/// open does not hold the apply: the output so far is kept, and the apply goes on.
#[test]
fn a_process_left_behind_outside_the_group_does_not_hold_the_apply() {
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "rendered-worker-1",
        "  - name: daemonize\n    script: |\n      echo started\n      setsid sh -c 'echo $$ > \"$HEARTH_ROOT/daemon.pid\"; exec sleep 300' &\n      while [ ! -s \"$HEARTH_ROOT/daemon.pid\" ]; do sleep 0.1; done\n",
    );
    let out = apply(root.path(), &cfg, &[]);
    let pid: i32 = std::fs::read_to_string(root.path().join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
    assert!(out.status.success(), "{out:?}");
    let s = status(root.path());
    let run = action_status(&s, "rendered-worker-1", "daemonize");
    assert_eq!(run["outcome"], "Succeeded");
    let tail = run["outputTail"].as_str().unwrap();
    assert!(
        tail.starts_with("started\n") && tail.contains("stopped reading"),
        "{tail}"
    );
}

/// The agent is killed (`kill -9`) while an action runs: the journal says it started, so the
/// next apply never runs it again; it reports it interrupted and follows its policy.
#[test]
fn an_action_interrupted_by_a_crash_is_never_run_again() {
    for (policy, state) in [("Degrade", "Degraded"), ("Ignore", "Done")] {
        let root = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(
            dir.path(),
            "rendered-worker-1",
            &format!(
                "  - name: long\n    failure: {policy}\n    script: |\n      echo run >> \"$HEARTH_ROOT/runs-long\"\n      echo $$ > \"$HEARTH_ROOT/long.pid\"\n      exec sleep 300\n"
            ),
        );
        let mut child = agent()
            .args(["apply", "--once-from"])
            .arg(&cfg)
            .arg("--root")
            .arg(root.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid_file = root.path().join("long.pid");
        let mut waited = 0;
        let pgid = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                break pid;
            }
            assert!(waited < 600, "the action did not start");
            waited += 1;
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        // What a restart of the service does with the agent's cgroup.
        killpg(Pid::from_raw(pgid), Signal::SIGKILL).unwrap();
        let running = status(root.path());
        assert_eq!(
            action_status(&running, "rendered-worker-1", "long")["outcome"],
            "Running",
            "{running}"
        );

        let out = apply(root.path(), &cfg, &[]);
        assert_eq!(out.status.success(), policy == "Ignore", "{out:?}");
        assert_eq!(runs(root.path(), "long"), 1, "{policy}: run again");
        let s = status(root.path());
        assert_eq!(s["state"], state, "{s}");
        assert_eq!(
            action_status(&s, "rendered-worker-1", "long")["outcome"],
            "Interrupted"
        );
        if policy == "Degrade" {
            let reason = s["reason"].as_str().unwrap();
            assert!(
                reason.contains("action long (AfterFiles) of rendered-worker-1 was interrupted"),
                "{reason}"
            );
            assert!(!root.path().join("etc/app.conf").exists());
        } else {
            assert!(root.path().join("etc/app.conf").exists());
        }
        // And never on a later apply either.
        let _ = apply(root.path(), &cfg, &["--force"]);
        assert_eq!(runs(root.path(), "long"), 1, "{policy}: run again");
    }
}
