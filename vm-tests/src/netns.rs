//! [`SharedNetwork`]: a network namespace that several hosts and processes of the test machine
//! share (`ip netns`), so that they reach each other over its loopback.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use tracing::{info, warn};

use crate::host::HostNetwork;
use crate::util;

const NETNS_PREFIX: &str = "hearth-net-";

/// A network namespace that several hosts and host processes share: created with
/// `ip netns add hearth-net-<pid>-<hex>` (bound at `/run/netns/<name>`), loopback up, deleted
/// on drop. Hosts join it with [`HostNetwork::Shared`]; a process on the test machine runs in it
/// with [`SharedNetwork::command`] (`nsenter --net=<path>`). Everything in it talks over its
/// loopback (`127.0.0.1`), so a server listening there is reached by every host and by the test.
///
/// Hosts in one namespace share its ports: two of them cannot listen on the same one.
#[derive(Debug)]
pub struct SharedNetwork {
    name: String,
    path: PathBuf,
    ip: PathBuf,
    nsenter: PathBuf,
}

impl SharedNetwork {
    /// Creates the namespace (root and iproute2 needed); removes namespaces left behind by
    /// test processes that died first.
    pub fn create() -> Result<Self> {
        util::require_root()?;
        let ip = util::require_program("ip", "iproute2")?;
        let nsenter = util::require_program("nsenter", "util-linux")?;
        reap_stale_netns(&ip);
        let name = format!(
            "{NETNS_PREFIX}{}-{}",
            std::process::id(),
            &util::random_hex32()?[..8]
        );
        run_ip(&ip, &["netns", "add", &name])?;
        let net = SharedNetwork {
            path: Path::new("/run/netns").join(&name),
            name,
            ip,
            nsenter,
        };
        // From here on, dropping `net` deletes the namespace.
        run_ip(&net.ip, &["-n", &net.name, "link", "set", "lo", "up"])?;
        info!(netns = %net.name, "shared network namespace created");
        Ok(net)
    }

    /// The namespace's name (`ip netns` lists it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the namespace is bound.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The [`HostOptions::network`](crate::HostOptions::network) that puts a host in this
    /// namespace.
    pub fn host_network(&self) -> HostNetwork {
        HostNetwork::Shared(self.path.clone())
    }

    /// A command that runs `program` on the test machine (its files, its processes) but in
    /// this network namespace: `nsenter --net=<path> -- program`. nsenter execs the program, so
    /// the child's pid is the program's (a SIGKILL reaches it).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(&self.nsenter);
        cmd.arg(format!("--net={}", self.path.display()))
            .arg("--")
            .arg(program);
        cmd
    }
}

impl Drop for SharedNetwork {
    fn drop(&mut self) {
        if let Err(e) = run_ip(&self.ip, &["netns", "delete", &self.name]) {
            warn!("{e:#}");
        }
    }
}

fn run_ip(ip: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new(ip)
        .args(args)
        .output()
        .with_context(|| format!("running {}", ip.display()))?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Deletes `hearth-net-<pid>-*` namespaces whose process is gone.
fn reap_stale_netns(ip: &Path) {
    let Ok(entries) = fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(NETNS_PREFIX))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let name = file_name.to_string_lossy();
        warn!(netns = %name, "deleting a network namespace left behind by a dead test process");
        if let Err(e) = run_ip(ip, &["netns", "delete", &name]) {
            warn!("{e:#}");
        }
    }
}
