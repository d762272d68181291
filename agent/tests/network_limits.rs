//! `hearth-agent apply --once-from http://…` against a local server whose body never ends: the
//! real binary refuses at the size limit (64 MiB) with a clear message instead of growing until
//! it is killed.

use std::io::{Read, Write};
use std::net::TcpListener;

/// Serves one endless chunked body per connection; returns the URL.
fn endless_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                let mut chunk = b"10000\r\n".to_vec();
                chunk.extend(std::iter::repeat_n(b'#', 0x10000));
                chunk.extend_from_slice(b"\r\n");
                while s.write_all(&chunk).is_ok() {}
            });
        }
    });
    format!("http://{addr}/config.yaml")
}

#[test]
fn an_endless_body_is_refused_at_the_size_limit() {
    let url = endless_server();
    let root = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from", &url, "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&url) && stderr.contains("larger than 64 MiB"),
        "{stderr}"
    );
    // It held at most about the limit in memory (the largest child so far; a body that grows
    // without bound reached gigabytes).
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let peak_kib = usage.max_rss();
    assert!(peak_kib < 512 * 1024, "peak RSS {peak_kib} KiB");
    // Nothing was applied.
    assert!(!root.path().join("var/lib/hearth/journal.json").exists());
}
