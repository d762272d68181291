//! [`relay_into`]: a port on a container's loopback that leads to a server on the test
//! machine's loopback (the Kubernetes API server, a container registry).

use std::net::{SocketAddr, TcpListener, TcpStream};

use anyhow::{anyhow, Context, Result};

use crate::host::SystemdHost;

/// Listens on the container's loopback at `port` (0: any free one; the socket is made in its
/// network namespace, which a reboot of the container replaces: listen again then, with the
/// same port) and relays every connection to `to` on the test machine's loopback, for as long
/// as the test process runs. Returns the port inside.
pub fn relay_into(host: &SystemdHost, to: SocketAddr, port: u16) -> Result<u16> {
    let netns = format!("/proc/{}/ns/net", host.leader_pid());
    let listener = std::thread::spawn(move || -> Result<TcpListener> {
        let ns = std::fs::File::open(&netns).with_context(|| format!("opening {netns}"))?;
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .context("joining the container's network namespace")?;
        TcpListener::bind(("127.0.0.1", port)).context("listening in the container")
    })
    .join()
    .map_err(|_| anyhow!("the relay's thread panicked"))??;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(inside) = conn else { return };
            let Ok(outside) = TcpStream::connect(to) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            if let (Ok(a), Ok(b)) = (inside.try_clone(), outside.try_clone()) {
                pipe(a, b);
                pipe(outside, inside);
            }
        }
    });
    Ok(port)
}
