//! The helper process contains what goes wrong in it: a helper killed by SIGSEGV (as a GLib
//! crash once did), one that answers garbage, one of another protocol version, each becomes an
//! `OsError::Helper` of the calling operation that names the helper and what happened, and the
//! calling process lives on. The real client (`OstreeBackend`) starts the real helper binary
//! or, for the misbehaving helpers, shell scripts (the crashing one kills itself with
//! `kill -SEGV $$`; the production helper has no crash switch).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hearth_hostops::os::ostree::protocol::PROTOCOL_VERSION;
use hearth_hostops::os::{OsBackend, OsConfig, OsError, OstreeBackend};

const HELPER: &str = env!("CARGO_BIN_EXE_hearth-ostree-helper");

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An executable shell script, written by a child process rather than by this one: a file this
/// process held open for writing could be inherited by a child that another test forks at that
/// moment (until it execs), and the kernel refuses to run a file that some process has open for
/// writing ("Text file busy"; seen once in CI).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    let mut sh = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(&p)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    sh.stdin
        .take()
        .unwrap()
        .write_all(format!("#!/bin/sh\n{body}\n").as_bytes())
        .unwrap();
    assert!(sh.wait().unwrap().success(), "writing {}", p.display());
    p
}

fn backend(root: &Path, helper: &Path) -> OsBackend {
    OsBackend::Ostree(OstreeBackend::new(root, OsConfig::default()).with_helper(helper))
}

#[test]
fn a_helper_killed_by_sigsegv_fails_the_operation_not_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let crashing = script(
        dir.path(),
        "crashing-helper",
        // Reads the request, says a last word, and dies by SIGSEGV as the GLib crash once did.
        "cat >/dev/null\necho 'GLib: assertion failed; raising SIGSEGV' >&2\nkill -SEGV $$",
    );
    let rt = rt();
    let e = rt
        .block_on(backend(dir.path(), &crashing).status())
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, OsError::Helper { .. }), "{e:?}");
    for want in [
        crashing.to_str().unwrap(),
        "status",
        "killed by signal SIGSEGV (11)",
        "without a response",
        // The tail of its standard error: its last words.
        "raising SIGSEGV",
    ] {
        assert!(msg.contains(want), "{want:?} missing in: {msg}");
    }
    // This process lives on, and the next operation runs a fresh helper: the real one answers
    // (here: there is no sysroot at this root, and it says where it looked).
    let e = rt
        .block_on(backend(dir.path(), Path::new(HELPER)).rollback())
        .unwrap_err();
    assert!(!matches!(e, OsError::Helper { .. }), "{e:?}");
    assert!(e.to_string().contains(dir.path().to_str().unwrap()), "{e}");
}

#[test]
fn a_helper_that_answers_garbage_or_exits_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let rt = rt();
    let garbage = script(dir.path(), "garbage", "cat >/dev/null; echo 'not json'");
    let msg = rt
        .block_on(backend(dir.path(), &garbage).rollback())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("rollback: its response is not JSON"), "{msg}");
    let failing = script(dir.path(), "failing", "echo 'ERROR no luck' >&2; exit 4");
    let msg = rt
        .block_on(backend(dir.path(), &failing).verify_booted(&Default::default()))
        .unwrap_err()
        .to_string();
    for want in ["verify-booted", "exited with status 4", "ERROR no luck"] {
        assert!(msg.contains(want), "{want:?} missing in: {msg}");
    }
    let newer = script(
        dir.path(),
        "newer",
        "cat >/dev/null; echo '{\"version\":99,\"ok\":{\"differences\":[]}}'",
    );
    let msg = rt
        .block_on(backend(dir.path(), &newer).status())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("protocol version 99") && msg.contains("same hearth release"),
        "{msg}"
    );
}

#[test]
fn the_helper_refuses_a_request_of_another_version() {
    let mut child = Command::new(HELPER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let other = PROTOCOL_VERSION + 1;
    write!(
        child.stdin.take().unwrap(),
        r#"{{"version":{other},"root":"/","config":{{}},"op":{{"status":{{}}}}}}"#
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], PROTOCOL_VERSION);
    let msg = v["error"]["Helper"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("the agent speaks protocol version {other}")),
        "{msg}"
    );
}

#[test]
fn the_helper_says_its_version_and_refuses_arguments() {
    let out = Command::new(HELPER).arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "hearth-ostree-helper {} (protocol version {PROTOCOL_VERSION})",
            env!("CARGO_PKG_VERSION")
        )
    );
    let out = Command::new(HELPER).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("takes no arguments"));
}
