//! [`SystemdHost`]: a booted systemd container with its own writable root and system bus.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tracing::{debug, info, warn};

use crate::cgroup::HostCgroup;
use crate::exec::{self, ExecOutput};
use crate::mounts;
use crate::rootfs;
use crate::util::{self, Tools};

/// Exit code of systemd-nspawn when the container asked for a reboot.
pub const NSPAWN_REBOOT_EXIT_CODE: i32 = 133;

/// Environment variable: the directory in which host directories are created
/// (default: the system temporary directory).
pub const TMPDIR_ENV: &str = "HEARTH_TEST_TMPDIR";

/// Environment variable: when set to `1`, a host's directory (log, writable layer) is kept
/// after the host stops, for debugging. Mounts and processes are cleaned up all the same.
pub const KEEP_ENV: &str = "HEARTH_TEST_KEEP";

/// Environment variable: when set to `1`, hosts get a full copy of the root filesystem
/// (`cp -a --reflink=auto`) instead of an overlay.
pub const COPY_ROOT_ENV: &str = "HEARTH_TEST_COPY_ROOT";

const HOST_DIR_PREFIX: &str = "hearth-host-";

/// The wrapper that joins the host's cgroups before becoming systemd-nspawn:
/// `sh -c WRAPPER sh PROCS_FILE... -- systemd-nspawn ARGS...`.
const CGROUP_WRAPPER: &str =
    r#"while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@""#;

/// How to boot a [`SystemdHost`].
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Longest wait from starting systemd-nspawn to `SystemState` `running`/`degraded`.
    pub boot_timeout: Duration,
    /// How long a stopping host gets to shut down cleanly before everything is SIGKILLed.
    pub stop_timeout: Duration,
    /// The read-only root tree to boot; `None` means the cached Debian tree
    /// ([`cached_rootfs`](crate::cached_rootfs)).
    pub rootfs: Option<PathBuf>,
    /// More arguments for systemd-nspawn (e.g. `--bind=...`), added after the harness's own.
    pub extra_nspawn_args: Vec<String>,
    /// Keep the host's directory after it stops (default: `HEARTH_TEST_KEEP=1`).
    pub keep_dir: bool,
    /// Its network: its own namespace with loopback only (the default), or one shared with
    /// other hosts and processes ([`SharedNetwork`]).
    pub network: HostNetwork,
}

/// Which network namespace a host gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HostNetwork {
    /// A namespace of its own with loopback only (`--private-network`).
    #[default]
    Private,
    /// The network namespace bound at this path (`--network-namespace-path=`), shared with
    /// whatever else joins it: see [`SharedNetwork`].
    Shared(PathBuf),
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            boot_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(10),
            rootfs: None,
            extra_nspawn_args: Vec::new(),
            keep_dir: env_flag(KEEP_ENV),
            network: HostNetwork::Private,
        }
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// What one boot of a host reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootInfo {
    /// 1 for the first boot, incremented by every reboot.
    pub boot_count: u32,
    /// The container's boot id (`/proc/sys/kernel/random/boot_id` inside; new on every boot).
    pub boot_id: String,
    /// The systemd Manager's `SystemState` when the boot was judged complete: `running`, or
    /// `degraded` with the failed units in `failed_units`.
    pub system_state: String,
    /// Units in the `failed` state when the boot completed (empty when `running`).
    pub failed_units: Vec<String>,
    /// From starting systemd-nspawn to the state above.
    pub boot_time: Duration,
}

/// The exit status of a systemd-nspawn process, filled in by the thread that waits for it.
#[derive(Debug, Default)]
pub(crate) struct ExitSlot {
    status: Mutex<Option<ExitStatus>>,
    cond: Condvar,
}

impl ExitSlot {
    fn set(&self, status: ExitStatus) {
        let mut guard = self.status.lock().unwrap_or_else(|e| e.into_inner());
        *guard = Some(status);
        self.cond.notify_all();
    }

    /// The exit status, if the process has exited.
    pub(crate) fn get(&self) -> Option<ExitStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `timeout` for the process to exit.
    fn wait(&self, timeout: Duration) -> Option<ExitStatus> {
        let guard = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, timeout, |s| s.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

/// A running systemd-nspawn process.
#[derive(Debug)]
struct Nspawn {
    pid: Pid,
    exit: Arc<ExitSlot>,
    waiter: Option<JoinHandle<()>>,
}

impl Nspawn {
    fn join_waiter(&mut self) {
        if let Some(waiter) = self.waiter.take() {
            let _ = waiter.join();
        }
    }
}

/// How the host's writable root was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootKind {
    /// Nothing mounted or copied yet.
    None,
    /// An overlay mounted at `root` (lower: the rootfs, upper/work in the host directory).
    Overlay,
    /// A full copy of the rootfs at `root`.
    Copy,
    /// `root` is booted as it is (an ostree deployment directory, see `crate::ostree`):
    /// nothing is mounted or copied, and nothing below it is removed.
    Direct,
}

/// A real systemd host: a Debian 12 tree booted with `systemd-nspawn -b`, with its own
/// writable root, system bus, cgroups and network namespace (loopback only).
///
/// Dropping it stops the container and removes everything it made (processes, mounts,
/// cgroups, directories), also while a test panics.
#[derive(Debug)]
pub struct SystemdHost {
    name: String,
    dir: PathBuf,
    root: PathBuf,
    bus_dir: PathBuf,
    log_path: PathBuf,
    lower: PathBuf,
    root_kind: RootKind,
    machine_id: String,
    cgroup: Option<HostCgroup>,
    tools: Tools,
    opts: HostOptions,
    nspawn: Option<Nspawn>,
    leader: Option<Pid>,
    last_exit: Option<ExitStatus>,
    boot: Option<BootInfo>,
    boots: u32,
    cleaned: bool,
}

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

    /// Owner file, writable root, machine-id, bus directory and cgroups.
    fn prepare(&mut self) -> Result<()> {
        let me = std::process::id() as i32;
        let start = util::process_start_time(me).unwrap_or_default();
        fs::write(self.dir.join("owner"), format!("{me} {start}\n"))?;
        fs::create_dir(&self.bus_dir)?;
        if self.root_kind == RootKind::Direct {
            let machine_id_path = self.root.join("etc/machine-id");
            self.machine_id = fs::read_to_string(&machine_id_path)
                .with_context(|| format!("reading {}", machine_id_path.display()))?
                .trim()
                .to_string();
            return self.create_cgroup();
        }
        fs::create_dir(&self.root)?;

        let started = Instant::now();
        if env_flag(COPY_ROOT_ENV) {
            self.copy_root()?;
        } else {
            let upper = self.dir.join("overlay/upper");
            let work = self.dir.join("overlay/work");
            fs::create_dir_all(&upper)?;
            fs::create_dir_all(&work)?;
            match mounts::mount_overlay(&self.lower, &upper, &work, &self.root) {
                Ok(()) => self.root_kind = RootKind::Overlay,
                Err(e) => {
                    warn!("overlay mount failed, copying the root filesystem instead: {e:#}");
                    self.copy_root()?;
                }
            }
        }
        debug!(
            host = %self.name,
            kind = ?self.root_kind,
            ms = started.elapsed().as_millis() as u64,
            "writable root ready"
        );

        // Every host is a distinct machine: its own machine-id, kept across its reboots.
        self.machine_id = util::random_hex32()?;
        let machine_id_path = self.root.join("etc/machine-id");
        let _ = fs::remove_file(&machine_id_path);
        fs::write(&machine_id_path, format!("{}\n", self.machine_id))
            .with_context(|| format!("writing {}", machine_id_path.display()))?;
        self.create_cgroup()
    }

    fn create_cgroup(&mut self) -> Result<()> {
        let cgroup = HostCgroup::create(&self.name)?;
        let list: Vec<String> = cgroup
            .dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        fs::write(self.dir.join("cgroups"), list.join("\n") + "\n")?;
        self.cgroup = Some(cgroup);
        Ok(())
    }

    fn copy_root(&mut self) -> Result<()> {
        let status = Command::new("cp")
            .arg("-a")
            .arg("--reflink=auto")
            .arg(format!("{}/.", self.lower.display()))
            .arg(&self.root)
            .status()
            .context("running cp")?;
        if !status.success() {
            bail!(
                "cp -a {} {} failed: {status}",
                self.lower.display(),
                self.root.display()
            );
        }
        self.root_kind = RootKind::Copy;
        Ok(())
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
        args.extend(self.opts.extra_nspawn_args.iter().cloned());
        args
    }

    /// Starts systemd-nspawn on the prepared root and waits until the system is up.
    fn launch(&mut self, deadline: Instant) -> Result<BootInfo> {
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

    /// Adds the tail of the nspawn log to an error.
    fn with_log(&self, e: anyhow::Error) -> anyhow::Error {
        anyhow!(
            "host {}: {e:#}\n--- last lines of {} ---\n{}",
            self.name,
            self.log_path.display(),
            util::tail(&self.log_path, 40)
        )
    }

    /// The host's name: its machine name and hostname (`hearth-<8 hex digits>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host-side path of the container's root directory. Files written below it are seen
    /// inside (and the other way round).
    ///
    /// This is the container's disk: what the container mounts itself (`/run`, `/tmp`,
    /// `/proc`, ...) is not here; see [`SystemdHost::live_path`]. Beware of absolute symlinks
    /// inside the tree: on the host side they point into the host's own filesystem.
    /// [`SystemdHost::path`] does not resolve them either.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host-side path of the absolute path `inside` of the container:
    /// `host.path("/etc/hostname")` is `<root>/etc/hostname`.
    pub fn path(&self, inside: impl AsRef<Path>) -> PathBuf {
        join_inside(&self.root, inside.as_ref())
    }

    /// The host-side path of the absolute path `inside`, as the running container sees it
    /// (`/proc/<leader>/root/...`): unlike [`SystemdHost::path`] this reaches the container's
    /// own mounts too (`/run`, `/tmp`, `/dev`, `/proc`). Valid while the host runs; after a
    /// reboot it points into the new boot.
    pub fn live_path(&self, inside: impl AsRef<Path>) -> PathBuf {
        join_inside(
            &PathBuf::from(format!("/proc/{}/root", self.leader_pid())),
            inside.as_ref(),
        )
    }

    /// The host-side path of the container's system bus socket.
    pub fn bus_socket(&self) -> PathBuf {
        self.bus_dir.join("system_bus_socket")
    }

    /// The container's system bus as a D-Bus address, `unix:path=/.../system_bus_socket`;
    /// usable with zbus as root (EXTERNAL authentication).
    pub fn bus_address(&self) -> String {
        format!("unix:path={}", self.bus_socket().display())
    }

    /// A new zbus connection to the container's system bus (needs a tokio runtime).
    pub async fn bus(&self) -> Result<zbus::Connection> {
        crate::bus::connect(&self.bus_address())
            .await
            .with_context(|| format!("connecting to {}", self.bus_address()))
    }

    /// The pid (in the machine's pid namespace) of the container's PID 1, systemd, in the
    /// current boot. After the container exited (e.g. for a reboot not yet waited for with
    /// [`SystemdHost::wait_for_reboot`]) it is the pid of the last boot.
    pub fn leader_pid(&self) -> u32 {
        self.leader.map(|p| p.as_raw() as u32).unwrap_or(0)
    }

    /// The pid of the running systemd-nspawn process, if any.
    pub fn nspawn_pid(&self) -> Option<u32> {
        self.nspawn.as_ref().map(|n| n.pid.as_raw() as u32)
    }

    /// How many times the host booted: 1 after [`SystemdHost::boot`], +1 per reboot.
    pub fn boot_count(&self) -> u32 {
        self.boot.as_ref().map(|b| b.boot_count).unwrap_or(0)
    }

    /// The boot id of the current boot (changes on every reboot).
    pub fn boot_id(&self) -> &str {
        self.boot.as_ref().map(|b| b.boot_id.as_str()).unwrap_or("")
    }

    /// What the current boot reached (state, failed units, boot time).
    pub fn boot_info(&self) -> Option<&BootInfo> {
        self.boot.as_ref()
    }

    /// The host's machine-id (`/etc/machine-id`), unique per host, kept across reboots.
    pub fn machine_id(&self) -> &str {
        &self.machine_id
    }

    /// The host's directory (root, overlay layers, bus directory, nspawn log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host's cgroup directories (one per cgroup hierarchy).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.cgroup
            .as_ref()
            .map(|c| c.dirs().to_vec())
            .unwrap_or_default()
    }

    /// The file that collects systemd-nspawn's output and the container's console.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of the nspawn log.
    pub fn log_tail(&self, lines: usize) -> String {
        util::tail(&self.log_path, lines)
    }

    /// Whether systemd-nspawn is still running (false after a reboot or power-off inside
    /// until [`SystemdHost::wait_for_reboot`]).
    pub fn is_running(&self) -> bool {
        self.nspawn.as_ref().is_some_and(|n| n.exit.get().is_none())
    }

    /// Runs a command inside the host (`nsenter -t <leader> -a`: all its namespaces, as
    /// root, with a clean environment), with a timeout of 2 minutes. A non-zero exit is
    /// not an error: look at [`ExecOutput::status`].
    pub fn exec<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<ExecOutput> {
        self.exec_timeout(argv, Duration::from_secs(120))
    }

    /// Like [`SystemdHost::exec`], but fails unless the command exits with 0; returns its
    /// standard output.
    pub fn exec_ok<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<String> {
        let out = self.exec(argv)?;
        if !out.success() {
            bail!("{} in {}: {out}", describe(argv), self.name);
        }
        Ok(out.stdout)
    }

    /// Like [`SystemdHost::exec`] with an explicit timeout.
    pub fn exec_timeout<S: AsRef<OsStr>>(
        &self,
        argv: &[S],
        timeout: Duration,
    ) -> Result<ExecOutput> {
        if argv.is_empty() {
            bail!("exec needs a command");
        }
        let leader = match (self.leader, self.is_running()) {
            (Some(leader), true) => leader,
            _ => bail!(
                "host {} is not running (systemd-nspawn exited: {:?}); after a reboot, call \
                 wait_for_reboot first",
                self.name,
                self.nspawn
                    .as_ref()
                    .and_then(|n| n.exit.get())
                    .or(self.last_exit)
            ),
        };
        let mut cmd = Command::new(&self.tools.nsenter);
        cmd.arg("--target")
            .arg(leader.as_raw().to_string())
            .arg("--all")
            .arg("--")
            .args(argv)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("SYSTEMD_COLORS", "0")
            .env("SYSTEMD_PAGER", "");
        let what = format!("{} in {}", describe(argv), self.name);
        debug!(host = %self.name, "exec {}", describe(argv));
        exec::run(cmd, timeout, &what)
    }

    /// Waits until the container exits because something inside asked for a reboot
    /// (systemd-nspawn exits with 133), boots it again on the same root and waits until it
    /// runs. `timeout` covers both. Fails if the container exits otherwise (e.g. power-off)
    /// or does not go down in time; the error includes the tail of the nspawn log.
    pub fn wait_for_reboot(&mut self, timeout: Duration) -> Result<BootInfo> {
        self.wait_for_reboot_then(timeout, |_| Ok(()))
    }

    /// Like [`SystemdHost::wait_for_reboot`], calling `before_boot` between the exit and the
    /// next boot (where `crate::ostree` plays bootloader: it picks the deployment to boot and
    /// calls [`SystemdHost::set_boot_root`]).
    pub(crate) fn wait_for_reboot_then(
        &mut self,
        timeout: Duration,
        before_boot: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<BootInfo> {
        let deadline = Instant::now() + timeout;
        let nspawn = self
            .nspawn
            .as_mut()
            .context("the host has no running systemd-nspawn")?;
        let Some(status) = nspawn.exit.wait(timeout) else {
            let e = anyhow!("no reboot within {timeout:?}: systemd-nspawn is still running");
            return Err(self.with_log(e));
        };
        nspawn.join_waiter();
        self.nspawn = None;
        self.last_exit = Some(status);
        if status.code() != Some(NSPAWN_REBOOT_EXIT_CODE) {
            let e = anyhow!(
                "the host went down without a reboot: systemd-nspawn exited with {status} \
                 (a reboot exits with {NSPAWN_REBOOT_EXIT_CODE})"
            );
            return Err(self.with_log(e));
        }
        info!(host = %self.name, boot = self.boots, "host rebooting");
        before_boot(self).map_err(|e| self.with_log(e))?;
        self.launch(deadline)
    }

    /// For a host booted with `boot_direct`: the tree and the extra nspawn arguments of the
    /// next boot.
    pub(crate) fn set_boot_root(&mut self, root: PathBuf, extra_nspawn_args: Vec<String>) {
        debug_assert_eq!(self.root_kind, RootKind::Direct);
        self.root = root.clone();
        self.lower = root;
        self.opts.extra_nspawn_args = extra_nspawn_args;
    }

    /// Stops the host and removes everything it made; reports what could not be cleaned up
    /// (dropping the host does the same and logs such errors).
    pub fn shutdown(mut self) -> Result<()> {
        self.cleanup()
    }

    /// Stops nspawn (SIGTERM: a clean shutdown inside; SIGKILL to the whole cgroup after
    /// `stop_timeout`), then removes the cgroups, the overlay and the host directory.
    fn cleanup(&mut self) -> Result<()> {
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        let started = Instant::now();
        let mut errors: Vec<String> = Vec::new();

        if let Some(mut nspawn) = self.nspawn.take() {
            if nspawn.exit.get().is_none() {
                debug!(host = %self.name, "stopping: SIGTERM to systemd-nspawn");
                let _ = kill(nspawn.pid, Signal::SIGTERM);
                if nspawn.exit.wait(self.opts.stop_timeout).is_none() {
                    warn!(host = %self.name, "no clean shutdown in {:?}: SIGKILL", self.opts.stop_timeout);
                    self.kill_everything(nspawn.pid);
                    if nspawn.exit.wait(Duration::from_secs(10)).is_none() {
                        errors.push(format!(
                            "systemd-nspawn (pid {}) survived SIGKILL",
                            nspawn.pid
                        ));
                    }
                }
            }
            self.last_exit = nspawn.exit.get();
            nspawn.join_waiter();
        }

        if let Some(cgroup) = self.cgroup.take() {
            if !cgroup.pids().is_empty() {
                cgroup.kill_all();
            }
            if !cgroup.wait_empty(Duration::from_secs(10)) {
                errors.push(format!(
                    "processes left in the host's cgroups: {:?}",
                    cgroup.pids()
                ));
            } else if let Err(e) = cgroup.remove() {
                errors.push(format!("{e:#}"));
            }
        }

        remove_nspawn_lock(&self.root);
        if self.root_kind == RootKind::Overlay || mounts::is_mount_point(&self.root) {
            if let Err(e) = mounts::unmount(&self.root) {
                errors.push(format!("{e:#}"));
            }
        }
        remove_propagate_dir(&self.name);

        if self.opts.keep_dir {
            let _ = fs::remove_file(self.dir.join("owner"));
            info!(host = %self.name, dir = %self.dir.display(), "keeping the host directory");
        } else if let Err(e) = mounts::remove_tree(&self.dir) {
            errors.push(format!("{e:#}"));
        }
        debug!(host = %self.name, ms = started.elapsed().as_millis() as u64, "host cleaned up");
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(
                "cleaning up host {}: {}",
                self.name,
                errors.join("; ")
            ))
        }
    }

    /// SIGKILL to all of the host's processes: the cgroup, and nspawn and the leader in case
    /// they are somewhere else.
    fn kill_everything(&self, nspawn: Pid) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_all();
        }
        // Killing the container's PID 1 kills its whole pid namespace.
        if let Some(leader) = self.leader {
            let _ = kill(leader, Signal::SIGKILL);
        }
        let _ = kill(nspawn, Signal::SIGKILL);
    }
}

impl Drop for SystemdHost {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            warn!("{e:#}");
        }
    }
}

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

    /// The [`HostOptions::network`] that puts a host in this namespace.
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

/// `root` joined with `inside` taken as an absolute path in the container: `..` never climbs
/// above `root`.
fn join_inside(root: &Path, inside: &Path) -> PathBuf {
    let mut parts: Vec<&OsStr> = Vec::new();
    for c in inside.components() {
        match c {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let mut out = root.to_path_buf();
    out.extend(parts);
    out
}

/// `argv` as a shell-like string for messages.
fn describe<S: AsRef<OsStr>>(argv: &[S]) -> String {
    let parts: Vec<String> = argv
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    format!("`{}`", parts.join(" "))
}

/// Where host directories go: `$HEARTH_TEST_TMPDIR`, or the system temporary directory.
fn base_dir() -> PathBuf {
    match std::env::var_os(TMPDIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::temp_dir(),
    }
}

/// Creates `<base>/hearth-host-<8 hex>`; returns the machine name `hearth-<8 hex>` and the
/// directory.
fn create_host_dir(base: &Path) -> Result<(String, PathBuf)> {
    fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
    let base = fs::canonicalize(base)?;
    for _ in 0..10 {
        let suffix = &util::random_hex32()?[..8];
        let dir = base.join(format!("{HOST_DIR_PREFIX}{suffix}"));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok((format!("hearth-{suffix}"), dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!(
        "could not create a unique host directory in {}",
        base.display()
    )
}

/// Finds the container's PID 1: the child of nspawn that is pid 1 in its own pid namespace.
fn find_leader(nspawn: Pid, exit: &ExitSlot, deadline: Instant) -> Result<Pid> {
    loop {
        if let Some(status) = exit.get() {
            bail!("systemd-nspawn exited ({status}) before the container started");
        }
        if let Some(pid) = children_of(nspawn)
            .into_iter()
            .find(|&p| is_namespace_init(p))
        {
            return Ok(Pid::from_raw(pid));
        }
        if Instant::now() >= deadline {
            bail!("timed out waiting for the container's PID 1 to appear");
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// The children of a process: from `/proc/PID/task/PID/children` where the kernel has it
/// (`CONFIG_PROC_CHILDREN`), else by scanning `/proc/*/stat` for the parent pid.
fn children_of(parent: Pid) -> Vec<i32> {
    if let Ok(children) = fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")) {
        return children
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect();
    }
    children_by_scan(parent)
}

/// The children of a process, by scanning `/proc/*/stat` for the parent pid.
fn children_by_scan(parent: Pid) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // Field 4 (ppid) follows the parenthesised command name and the state.
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent.as_raw())
        })
        .collect()
}

/// Whether `pid` is PID 1 of a nested pid namespace (`NSpid:\t<pid>\t1`).
fn is_namespace_init(pid: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            ids.len() >= 2 && ids.last() == Some(&"1")
        })
        .unwrap_or(false)
}

/// A systemd-nspawn that was SIGKILLed leaves its image lock file,
/// `/run/systemd/nspawn/locks/inode-<st_dev>:<st_ino>` of the root directory: remove it.
/// Call while the root is still mounted (its device number is the overlay's).
fn remove_nspawn_lock(root: &Path) {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = fs::metadata(root) {
        let lock = format!(
            "/run/systemd/nspawn/locks/inode-{}:{}",
            meta.dev(),
            meta.ino()
        );
        if fs::remove_file(&lock).is_ok() {
            debug!(lock, "removed a stale nspawn lock file");
        }
    }
}

/// systemd-nspawn leaves `/run/systemd/nspawn/propagate/<machine>` behind when `/run` is not
/// a tmpfs ("Attempted to remove disk file system ... we can't allow that"): remove it if it
/// holds nothing but empty directories.
fn remove_propagate_dir(name: &str) {
    let dir = Path::new("/run/systemd/nspawn/propagate").join(name);
    if dir.exists() && !mounts::is_mount_point(&dir) {
        let _ = fs::remove_dir(dir.join("incoming"));
        let _ = fs::remove_dir(&dir);
    }
}

/// Removes hosts left behind by test processes that died without cleaning up (SIGKILL,
/// abort): runs once per process, before the first boot (and before `crate::ostree` reaps
/// stale sysroots, which such hosts may still run on).
pub(crate) fn reap_stale_hosts_once(base: &Path) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| reap_stale_hosts(base));
}

fn reap_stale_hosts(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let file_name = entry.file_name();
        let Some(suffix) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(HOST_DIR_PREFIX))
        else {
            continue;
        };
        let Ok(owner) = fs::read_to_string(dir.join("owner")) else {
            continue; // kept on purpose (HEARTH_TEST_KEEP) or not one of ours
        };
        let mut fields = owner.split_whitespace();
        let pid: i32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let start: u64 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        if pid > 0 && util::process_start_time(pid) == Some(start) {
            continue; // its owner is alive
        }
        warn!(dir = %dir.display(), "removing a host left behind by a dead test process");
        let cgroups: Vec<PathBuf> = fs::read_to_string(dir.join("cgroups"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect();
        let cgroup = HostCgroup::from_dirs(cgroups);
        cgroup.kill_all();
        if !cgroup.wait_empty(Duration::from_secs(10)) {
            warn!(dir = %dir.display(), "processes survive in {:?}", cgroup.dirs());
            continue;
        }
        let _ = cgroup.remove();
        let root = dir.join("root");
        remove_nspawn_lock(&root);
        if mounts::is_mount_point(&root) {
            if let Err(e) = mounts::unmount(&root) {
                warn!("{e:#}");
                continue;
            }
        }
        remove_propagate_dir(&format!("hearth-{suffix}"));
        if let Err(e) = mounts::remove_tree(&dir) {
            warn!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_maps_inside_paths_below_the_root() {
        let root = Path::new("/x/root");
        let join = |inside: &str| join_inside(root, Path::new(inside));
        assert_eq!(join("/etc/hostname"), PathBuf::from("/x/root/etc/hostname"));
        assert_eq!(
            join("etc/./hostname"),
            PathBuf::from("/x/root/etc/hostname")
        );
        assert_eq!(join("/etc/../passwd"), PathBuf::from("/x/root/passwd"));
        assert_eq!(join("/../../etc"), PathBuf::from("/x/root/etc"));
        assert_eq!(join("/"), PathBuf::from("/x/root"));
    }

    #[test]
    fn exit_slot_reports_the_status() {
        let slot = ExitSlot::default();
        assert_eq!(slot.get(), None);
        assert_eq!(slot.wait(Duration::from_millis(10)), None);
        slot.set(ExitStatus::default());
        assert!(slot.wait(Duration::from_secs(1)).is_some());
    }

    #[test]
    fn children_are_found_both_ways() {
        let mut child = Command::new("sleep").arg("10").spawn().unwrap();
        let me = Pid::from_raw(std::process::id() as i32);
        let pid = child.id() as i32;
        // The task's children file lists children of the main thread only; the test runs on
        // another thread, so only the scan is sure to see it.
        assert!(children_by_scan(me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_by_scan(me).contains(&pid));
    }

    #[test]
    fn own_process_is_not_a_namespace_init() {
        assert!(!is_namespace_init(std::process::id() as i32));
    }
}
