//! What the agent writes into a pipe or a log file is plain text: no ANSI colour codes, which
//! would show up as `^[[32m` garbage in `journalctl`, CI logs and `2>log` redirections.

use std::process::Command;

#[test]
fn logs_into_a_pipe_carry_no_ansi_escape_codes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let mc = dir.path().join("mc.yaml");
    std::fs::write(
        &mc,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: plain\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/plain.conf\n        contents:\n          source: data:,hi\n",
    )
    .unwrap();
    // stderr is a pipe (Command::output), and the agent is not under systemd: fmt logging.
    let out = Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(&mc)
        .arg("--root")
        .arg(&root)
        .env("RUST_LOG", "debug")
        .env_remove("INVOCATION_ID")
        .env_remove("JOURNAL_STREAM")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The log lines are there (so the check below looks at real output) ...
    assert!(
        stderr.contains("INFO") && stderr.contains("applying"),
        "{stderr}"
    );
    // ... and carry no escape character at all, on stderr nor stdout.
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI codes in a pipe: {stderr:?}"
    );
    assert!(
        !out.stdout.contains(&0x1b),
        "ANSI codes in a pipe: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `hearth-agent status -o json | head -1` closes the pipe early: the agent ends quietly with
/// the status of a program killed by SIGPIPE (141), not with a panic ("failed printing to
/// stdout").
#[test]
fn a_closed_pipe_ends_status_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // A pipe whose reading end is closed before the agent writes: its first write fails.
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["status", "-o", "json", "--root"])
        .arg(dir.path())
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}
