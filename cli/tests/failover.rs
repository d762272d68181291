//! `hearth` given several servers (`--server A,B`, `HEARTH_SERVER=A,B`, `hearth login --server A
//! --server B`): reads and changes move past a server that cannot be reached; a change whose
//! answer the network lost after it was sent is not sent again elsewhere and says it may or may
//! not have been applied. Against a real hearth-server (real TLS); the network's failures are
//! a closed port and a real TCP relay that drops the answer.

use crate::common;

use common::{examples, setup};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A loopback port nothing listens on (bound, then closed again).
fn closed_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("https://127.0.0.1:{port}")
}

/// Bytes a client sends before its request's body is well under way: more than a TLS
/// handshake (a ClientHello with a post-quantum key share is about 1.5 KiB), much less than the
/// padded manifest below.
const HANDSHAKE_AND_SOME: usize = 16 * 1024;

/// How long the client has been sending nothing (its request is all sent, and passed on) when
/// the relay closes its connection.
const CLIENT_DONE: Duration = Duration::from_secs(2);

/// A relay to `to` (the real server) that passes the TLS handshake both ways and the whole
/// request on to the server, but once the client has sent more than [`HANDSHAKE_AND_SOME`]
/// bytes, passes nothing back (the server's answer is lost), and closes the client's connection
/// once the client has been quiet for [`CLIENT_DONE`]. The change reaches the server and its
/// answer is lost, as when a network fails mid-request. Returns its URL.
fn relay_losing_answers(to: &str) -> String {
    let target = to.trim_start_matches("https://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let server = TcpStream::connect(&target).unwrap();
            // Bytes from the client so far, and when the last came.
            let sent = Arc::new(Mutex::new((0usize, Instant::now())));
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let up = sent.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = c_in.read(&mut buf) {
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    let mut g = up.lock().unwrap();
                    *g = (g.0 + n, Instant::now());
                }
                // The server's side stays open: the request it read is not cancelled.
            });
            let closer = (client.try_clone().unwrap(), sent.clone());
            std::thread::spawn(move || loop {
                std::thread::sleep(Duration::from_millis(50));
                let (count, last) = *closer.1.lock().unwrap();
                if count > HANDSHAKE_AND_SOME && last.elapsed() >= CLIENT_DONE {
                    let _ = closer.0.shutdown(Shutdown::Both);
                    return;
                }
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = s_in.read(&mut buf) {
                    let passed = sent.lock().unwrap().0 <= HANDSHAKE_AND_SOME;
                    if passed && c_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("https://{addr}")
}

/// A MachineConfig padded with a comment to 64 KiB, so that its request is well past the
/// relay's threshold.
fn padded_mc(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let mut text = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n"
    );
    let line = format!("# {}\n", "x".repeat(78));
    while text.len() < 64 * 1024 {
        text.push_str(&line);
    }
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn reads_and_changes_move_past_a_server_that_cannot_be_reached() {
    let env = setup();
    let ca = env.state("pki/ca.crt");
    let (ca, token) = (ca.to_str().unwrap(), env.token());
    let closed = closed_url();
    let both = format!("{closed},{}", env.url);
    let conn = ["--server", &both, "--ca", ca, "--token", &token];

    // A change: the closed port took nothing, so it goes to the next server.
    let examples = examples();
    let mut args = vec!["apply", "-f", examples.to_str().unwrap()];
    args.extend(conn);
    let out = env.ok(&args);
    assert!(out.contains("machineconfigpool/infra created"), "{out}");
    // A read.
    let mut args = vec!["get", "nodes", "-o", "name"];
    args.extend(conn);
    let out = env.ok(&args);
    assert!(out.contains("node/worker-0"), "{out}");

    // The login file keeps the list (and `server`, its first entry, for an older CLI); every
    // command then uses it. The server that does not answer is named at login.
    let o = env.hearth(&[
        "login", "--server", &closed, "--server", &env.url, "--ca", ca, "--token", &token,
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("warning: {closed} did not answer")),
        "{stderr}"
    );
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.config()).unwrap()).unwrap();
    assert_eq!(file["servers"], serde_json::json!([closed, env.url]));
    assert_eq!(file["server"], closed);
    let out = env.ok(&["get", "mcp", "-o", "name"]);
    assert!(out.contains("machineconfigpool/infra"), "{out}");

    // A server that accepts the connection and never answers (not even the TLS handshake):
    // a read moves on once the connect time limit (10 s) is over.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("https://{}", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || silent.accept().map(|(s, _)| s));
    let out = env.ok(&[
        "get",
        "mcp",
        "-o",
        "name",
        "--server",
        &format!("{silent_url},{}", env.url),
    ]);
    assert!(out.contains("machineconfigpool/infra"), "{out}");
    drop(held.join().unwrap());

    // Nothing answers: the error names every server tried.
    let other = closed_url();
    let o = env.hearth(&["get", "nodes", "--server", &format!("{closed},{other}")]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no hearth-server answered (2 tried)")
            && stderr.contains(&closed)
            && stderr.contains(&other),
        "{stderr}"
    );

    // A bad entry is refused, naming the flag and the entry.
    let o = env.hearth(&["get", "nodes", "--server", &format!("{closed},http://x:1")]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--server: \"http://x:1\" is not a server URL"),
        "{stderr}"
    );
}

#[test]
fn a_change_whose_answer_was_lost_is_not_sent_again_elsewhere() {
    let env = setup();
    env.login();
    let relay = relay_losing_answers(&env.url);
    let work = tempfile::tempdir().unwrap();
    let mc = padded_mc(work.path(), "99-lost-answer");
    let servers = format!("{relay},{}", env.url);

    let o = env.hearth(&["apply", "-f", mc.to_str().unwrap(), "--server", &servers]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{relay} did not answer after the change was sent"))
            && stderr.contains("may or may not have been applied")
            && stderr.contains("hearth get"),
        "{stderr}"
    );
    // It was (the server read it all, and carries the change through though the client is
    // gone), and `hearth get` says so once it has landed (a loaded machine may take a moment).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = env.ok(&["get", "mc", "-o", "name"]);
        if out.contains("machineconfig/99-lost-answer") {
            break;
        }
        assert!(Instant::now() < deadline, "the change never landed: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Sent again now, it is unchanged: it was applied once, not twice and not never.
    let out = env.ok(&["apply", "-f", mc.to_str().unwrap()]);
    assert!(
        out.contains("machineconfig/99-lost-answer unchanged"),
        "{out}"
    );
}
