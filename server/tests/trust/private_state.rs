//! The binary keeps its state files private (0600/0700) under any umask.

use super::*;

// ---------------------------------------------------------------------------------------------
// 7. Every file the server creates is private, whatever the umask.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_keeps_its_state_private_under_umask_022() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    // The built server's own command line, started by a shell that sets the umask first.
    let server = common::binary::command(&state);
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "umask 022; exec \"$0\" \"$@\""])
        .arg(server.get_program())
        .args(server.get_args());
    for (k, v) in server.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let server = common::binary::spawn(cmd);
    let api = common::binary::api_for(&state, server.port);
    // Files written later too: a commit, a rotated token (and a token file for a new pool).
    assert_eq!(
        api.apply_text("a.yaml", &worker_mc("10-a", "one"))
            .await
            .status,
        StatusCode::OK
    );
    let r = api
        .post("/api/v1/pools/worker/bootstrap-token", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    drop(server);

    let mut seen = Vec::new();
    let mut stack = vec![state.clone()];
    while let Some(dir) = stack.pop() {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                let mode = m.permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{} is {mode:o}", p.display());
                seen.push(
                    p.strip_prefix(&state)
                        .unwrap()
                        .to_string_lossy()
                        .to_string(),
                );
            }
        }
    }
    seen.sort();
    for f in [
        "hearth.redb",
        "admin.token",
        "metrics.token",
        "tokens/worker.token",
        "pki/ca.key",
    ] {
        assert!(seen.iter().any(|s| s == f), "{f} not among {seen:?}");
    }
}
