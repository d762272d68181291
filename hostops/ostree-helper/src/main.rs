//! `hearth-ostree-helper`: hearth's libostree backend as a process of its own. The agent
//! (hearth-hostops' `OstreeBackend`, a client) starts it for one OS operation, writes one JSON
//! request on its standard input and reads one JSON response from its standard output
//! (protocol: `hearth_hostops::os::ostree::protocol`); log lines go to standard error, which
//! the client forwards to its own log. This is the only crate of hearth that links libostree
//! and GLib, so a crash in them (a GLib assertion and a SIGSEGV were seen once) ends this
//! process, not the agent, and the agent runs on hosts without libostree.
//!
//! ## Native and external
//!
//! The sysroot is opened **at the root** (`/` in production), exactly as `ostree admin` does
//! on a booted system: `<root>/ostree` is the deployment's link to `sysroot/ostree`,
//! `<root>/boot` is `/boot`. Two cases:
//!
//! - **native**: the root is this process's `/` (hearth runs on the booted host). libostree
//!   itself finds the booted deployment (`/run/ostree-booted` and the device and inode of `/`),
//!   and staging *stages* the new deployment (`stage_tree`): it is written to the sysroot now
//!   and finalized at shutdown by `ostree-finalize-staged.service` (bootloader entries, and the
//!   `/etc` merge as `/etc` is then). This is the production path.
//! - **external**: the root is another host's root seen from outside (in tests the live root of
//!   a container, `/proc/<pid>/root`). libostree does not consider such a sysroot booted and
//!   cannot stage for it, so hearth finds the booted deployment itself, with libostree's own
//!   rule (the deployment directory with the root's device and inode), and *writes* the new
//!   deployment as the default right away (`deploy_tree` + `write_deployments`, keeping the
//!   booted deployment, pinned ones and other stateroots, as `simple_write_deployment` does).
//!
//! ## One operation per process
//!
//! The operation runs on the main thread and the process exits: libostree's types are not
//! `Send` and need no thread juggling here, the mount namespace that libostree unshares to
//! remount a read-only `/sysroot` writable (Fedora CoreOS) dies with the process, and two
//! operations never share GLib state (the tests once hit a GLib assertion followed by a crash
//! while libostree operations on different sysroots ran in one process). Mutating operations
//! take libostree's sysroot lock (the one `ostree admin` takes).
//!
//! ## Files
//!
//! `serve.rs` (request in, response out), `session.rs` (the opened sysroot, status,
//! verification, the origin keys), `fetch.rs` (resolve or pull), `container.rs` (container images: resolve,
//! copy under the signature policy, import; with `skopeo.rs` and `oci_layout.rs`), `prune.rs`
//! (images no deployment uses),
//! `space.rs` (free space and inodes),
//! `stage.rs`, `rollback.rs`, `adopt.rs`, `glib_log.rs` (GLib's printed notes to the log).

mod adopt;
mod container;
mod fetch;
mod glib_log;
#[cfg(test)]
mod kargs_roundtrip;
mod oci_layout;
mod prune;
mod rollback;
mod serve;
mod session;
mod skopeo;
mod space;
mod stage;

use std::io::{Read, Write};
use std::process::ExitCode;

use hearth_hostops::os::ostree::protocol::{MAX_REQUEST_BYTES, PROTOCOL_VERSION};

fn main() -> ExitCode {
    // Not for humans, but say what it is rather than wait on a terminal.
    if let Some(arg) = std::env::args().nth(1) {
        let about = format!(
            "hearth-ostree-helper {} (protocol version {PROTOCOL_VERSION})",
            env!("CARGO_PKG_VERSION")
        );
        if arg == "--version" {
            println!("{about}");
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "{about}: hearth-agent's libostree helper; it takes no arguments and reads one JSON \
             request on standard input (see docs/os-layer.md)"
        );
        return ExitCode::from(2);
    }
    // Log lines on standard error as `LEVEL target: message` (the client parses the level).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(false)
        .without_time()
        .with_writer(std::io::stderr)
        .init();
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_REQUEST_BYTES as u64 + 1)
        .read_to_end(&mut input)
    {
        tracing::error!("reading the request from standard input: {e}");
        return ExitCode::from(2);
    }
    glib_log::route_glib_output();
    let response = serve::serve(&input);
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &response)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("writing the response to standard output: {e}");
            ExitCode::from(2)
        }
    }
}
