//! The binary keeps its state files private (0600/0700) under any umask.

use super::*;

// ---------------------------------------------------------------------------------------------
// 7. Every file the server creates is private, whatever the umask.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_keeps_its_state_private_under_umask_022() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let mut child = std::process::Command::new("sh")
        .args(["-c", "umask 022; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_hearth-server"))
        .arg("--state-dir")
        .arg(&state)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--san",
            "localhost",
            "--san",
            "127.0.0.1",
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Kill(child);
    let first = lines.next().unwrap().unwrap();
    std::thread::spawn(move || for _ in lines {});
    let port: u16 = first
        .split_whitespace()
        .nth(3)
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let api = Api {
        base: format!("https://127.0.0.1:{port}"),
        client: client(&std::fs::read(state.join("pki/ca.crt")).unwrap()),
        token: std::fs::read_to_string(state.join("admin.token"))
            .unwrap()
            .trim()
            .to_string(),
    };
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
    drop(child);

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
