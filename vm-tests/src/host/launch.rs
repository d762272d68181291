//! Booting a host: [`SystemdHost::boot`], systemd-nspawn started inside the host's cgroups with
//! its output appended to the log, a thread waiting for its exit, the container's PID 1 found,
//! then the Manager's `SystemState` polled over the container's bus until `running`.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use nix::unistd::Pid;
use tracing::{debug, info, warn};

use super::options::{base_dir, HostNetwork, HostOptions};
use super::procs::{find_leader, Nspawn};
use super::reap::reap_stale_hosts_once;
use super::setup::create_host_dir;
use super::{BootInfo, RootKind, SystemdHost};
use crate::exit_slot::ExitSlot;
use crate::mounts;
use crate::rootfs;
use crate::util::{self, Tools};

/// The wrapper that joins the host's cgroups before becoming systemd-nspawn:
/// `sh -c WRAPPER sh PROCS_FILE... -- systemd-nspawn ARGS...`.
const CGROUP_WRAPPER: &str =
    r#"while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@""#;

impl SystemdHost {
    /// Boots a fresh host from the cached root filesystem (built on first use) with the
    /// default [`HostOptions`], and waits until systemd reports `running` (or `degraded`).
    ///
    /// Fails with a clear message when the machine lacks root, systemd-nspawn or nsenter.
    pub fn boot() -> Result<Self> {
        Self::boot_with(HostOptions::default())
    }

    /// Boots a fresh host with the given options; see [`SystemdHost::boot`].
    pub fn boot_with(opts: HostOptions) -> Result<Self> {
        let tools = util::host_tools()?;
        let base = base_dir();
        reap_stale_hosts_once(&base);
        let lower = match &opts.rootfs {
            Some(path) => path.clone(),
            None => rootfs::cached_rootfs()?,
        };
        let (name, dir) = create_host_dir(&base)?;
        let root = dir.join("root");
        Self::start(opts, tools, lower, name, dir, root, RootKind::None)
    }

    /// Boots `root` itself (no overlay, no copy): the machine-id is the one in the tree. Used
    /// by `crate::ostree` to boot ostree deployments.
    pub(crate) fn boot_direct(opts: HostOptions, root: PathBuf) -> Result<Self> {
        let tools = util::host_tools()?;
        let base = base_dir();
        reap_stale_hosts_once(&base);
        let (name, dir) = create_host_dir(&base)?;
        Self::start(opts, tools, root.clone(), name, dir, root, RootKind::Direct)
    }

    fn start(
        opts: HostOptions,
        tools: Tools,
        lower: PathBuf,
        name: String,
        dir: PathBuf,
        root: PathBuf,
        root_kind: RootKind,
    ) -> Result<Self> {
        let mut host = SystemdHost {
            root,
            bus_dir: dir.join("bus"),
            log_path: dir.join("nspawn.log"),
            name,
            dir,
            lower,
            root_kind,
            machine_id: String::new(),
            cgroup: None,
            tools,
            opts,
            nspawn: None,
            leader: None,
            last_exit: None,
            boot: None,
            boots: 0,
            cleaned: false,
        };
        // From here on, dropping `host` (on error too) cleans up what was made.
        host.prepare()?;
        let deadline = Instant::now() + host.opts.boot_timeout;
        host.launch(deadline)?;
        Ok(host)
    }

    fn nspawn_args(&self) -> Vec<String> {
        let mut args = vec![
            "--boot".to_string(),
            format!("--directory={}", self.root.display()),
            format!("--machine={}", self.name),
            // No machined on these machines: do not register, stay in our (own) cgroup.
            "--register=no".into(),
            "--keep-unit".into(),
            match &self.opts.network {
                HostNetwork::Private => "--private-network".into(),
                HostNetwork::Shared(path) => {
                    format!("--network-namespace-path={}", path.display())
                }
            },
            format!("--bind={}:/run/dbus", self.bus_dir.display()),
            // A pty for the container's console, copied to our log (boot messages).
            "--console=read-only".into(),
            "--link-journal=no".into(),
            "--setenv=SYSTEMD_COLORS=0".into(),
        ];
        // On every boot: harmless once systemd committed the id to /etc/machine-id, and the
        // same id if it had not yet.
        if self.opts.first_boot {
            args.push(format!("--uuid={}", self.machine_id));
        }
        args.extend(self.opts.extra_nspawn_args.iter().cloned());
        args
    }

    /// Starts systemd-nspawn on the prepared root and waits until the system is up.
    pub(super) fn launch(&mut self, deadline: Instant) -> Result<BootInfo> {
        let started = Instant::now();
        self.boots += 1;
        // A fresh bus directory: a stale socket of the previous boot must not be polled.
        for entry in fs::read_dir(&self.bus_dir)? {
            let path = entry?.path();
            if path.is_dir() {
                mounts::remove_tree(&path)?;
            } else {
                fs::remove_file(&path)?;
            }
        }
        let cgroup = self.cgroup.clone().context("host has no cgroup")?;
        cgroup.clear_children()?;

        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("opening {}", self.log_path.display()))?;
        writeln!(
            log,
            "==== hearth-vm-tests: boot {} of {} ====",
            self.boots, self.name
        )?;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(CGROUP_WRAPPER).arg("hearth-nspawn");
        cmd.args(cgroup.procs_files());
        cmd.arg("--")
            .arg(&self.tools.nspawn)
            .args(self.nspawn_args());
        cmd.env("SYSTEMD_COLORS", "0")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        debug!(host = %self.name, ?cmd, "starting systemd-nspawn");
        let mut child = cmd.spawn().context("starting systemd-nspawn")?;
        let pid = Pid::from_raw(child.id() as i32);
        let exit = Arc::new(ExitSlot::default());
        let slot = exit.clone();
        let waiter = thread::Builder::new()
            .name(format!("nspawn-{}", self.name))
            .spawn(move || match child.wait() {
                Ok(status) => slot.set(status),
                Err(e) => {
                    warn!("waiting for systemd-nspawn: {e}");
                    slot.set(ExitStatus::default());
                }
            })
            .context("spawning the nspawn waiter thread")?;
        self.nspawn = Some(Nspawn {
            pid,
            exit: exit.clone(),
            waiter: Some(waiter),
        });

        let leader = find_leader(pid, &exit, deadline).map_err(|e| self.with_log(e))?;
        self.leader = Some(leader);
        debug!(host = %self.name, nspawn = pid.as_raw(), leader = leader.as_raw(), "container started");

        let address = self.bus_address();
        let socket = self.bus_socket();
        let (system_state, failed_units) = thread::scope(|s| {
            s.spawn(|| -> Result<(String, Vec<String>)> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("building a tokio runtime")?;
                rt.block_on(crate::bus::wait_running(&address, &socket, &exit, deadline))
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the bus polling thread panicked")))
        })
        .map_err(|e| self.with_log(e))?;

        let boot_id_path = format!("/proc/{leader}/root/proc/sys/kernel/random/boot_id");
        let boot_id = fs::read_to_string(&boot_id_path)
            .with_context(|| format!("reading {boot_id_path}"))?
            .trim()
            .to_string();
        let info = BootInfo {
            boot_count: self.boots,
            boot_id,
            system_state,
            failed_units,
            boot_time: started.elapsed(),
        };
        if info.failed_units.is_empty() && info.system_state == "running" {
            info!(
                host = %self.name,
                boot = info.boot_count,
                ms = info.boot_time.as_millis() as u64,
                "host is running"
            );
        } else {
            warn!(
                host = %self.name,
                boot = info.boot_count,
                ms = info.boot_time.as_millis() as u64,
                state = %info.system_state,
                failed = ?info.failed_units,
                "host booted degraded"
            );
        }
        self.boot = Some(info.clone());
        Ok(info)
    }
}
