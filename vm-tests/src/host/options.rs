//! How a host is booted: [`HostOptions`], [`HostNetwork`], the environment variables that set
//! the harness's defaults, and where host directories go.

use std::path::PathBuf;
use std::time::Duration;

/// Environment variable: the directory in which host directories are created
/// (default: the system temporary directory).
pub const TMPDIR_ENV: &str = "HEARTH_TEST_TMPDIR";

/// Environment variable: when set to `1`, a host's directory (log, writable layer) is kept
/// after the host stops, for debugging. Mounts and processes are cleaned up all the same.
pub const KEEP_ENV: &str = "HEARTH_TEST_KEEP";

/// Environment variable: when set to `1`, hosts get a full copy of the root filesystem
/// (`cp -a --reflink=auto`) instead of an overlay.
pub const COPY_ROOT_ENV: &str = "HEARTH_TEST_COPY_ROOT";

/// How to boot a [`SystemdHost`](super::SystemdHost).
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
    /// other hosts and processes ([`SharedNetwork`](crate::SharedNetwork)).
    pub network: HostNetwork,
    /// Boot it as a machine's first boot: `/etc/machine-id` says `uninitialized`, so systemd
    /// applies the unit presets (what Ignition's `20-ignition.preset` enables) and takes the
    /// machine-id the harness passes as the container's UUID (default: false, an ordinary
    /// boot of a machine with its own machine-id).
    pub first_boot: bool,
}

/// Which network namespace a host gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HostNetwork {
    /// A namespace of its own with loopback only (`--private-network`).
    #[default]
    Private,
    /// The network namespace bound at this path (`--network-namespace-path=`), shared with
    /// whatever else joins it: see [`SharedNetwork`](crate::SharedNetwork).
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
            first_boot: false,
        }
    }
}

pub(super) fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// The name of a host directory starts with this (then 8 hex digits).
pub(super) const HOST_DIR_PREFIX: &str = "hearth-host-";

/// Where host directories go: `$HEARTH_TEST_TMPDIR`, or the system temporary directory.
pub(super) fn base_dir() -> PathBuf {
    match std::env::var_os(TMPDIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::temp_dir(),
    }
}
