//! The built `hearth-server` binary as a process of the test (`restart.rs`, `etcd_server.rs`):
//! started with its port read from its first line, killed when dropped, and an admin client
//! for it from its state directory.

use super::{client, Api};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `hearth-server`, killed when dropped.
pub struct Server {
    /// The process.
    pub child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The built binary's command line with state directory `state`, on 127.0.0.1:0, logging
/// warnings.
pub fn command(state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth-server"));
    cmd.arg("--state-dir")
        .arg(state)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--san",
            "localhost",
            "--san",
            "127.0.0.1",
        ])
        .env("RUST_LOG", "warn");
    cmd
}

/// Starts `cmd` (a `hearth-server` listening on 127.0.0.1:0) and reads the port from its first
/// line of output; its stdout is drained from then on so that it never blocks on a full pipe.
/// Its stderr (the log) is the test's unless `cmd` sends it elsewhere.
pub fn spawn(mut cmd: Command) -> Server {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("hearth-server starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").expect("readable");
    // "hearth-server: listening on 127.0.0.1:PORT (URL)"
    let addr = first
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    std::thread::spawn(move || for _ in lines {});
    Server { child, port }
}

/// The admin's client of the server with state directory `state` on `port`.
pub fn api_for(state: &Path, port: u16) -> Api {
    Api {
        base: format!("https://127.0.0.1:{port}"),
        client: client(&std::fs::read(state.join("pki/ca.crt")).unwrap()),
        token: std::fs::read_to_string(state.join("admin.token"))
            .unwrap()
            .trim()
            .to_string(),
    }
}
