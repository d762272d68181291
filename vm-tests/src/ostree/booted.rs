//! [`OstreeHost`]: an ostree deployment booted in systemd-nspawn with the binds that make it
//! look booted (`/sysroot`, `/boot`, the stateroot's `/var`, `/usr` read-only); on a reboot the
//! harness plays boot loader and boots the deployment of the default entry.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tracing::info;

use super::entries::BootEntry;
use super::images::{Images, IMAGES_REPO_INSIDE};
use super::sysroot::{SysrootOptions, TestSysroot};
use crate::exec::ExecOutput;
use crate::host::{BootInfo, HostOptions, SystemdHost};

/// How to boot an [`OstreeHost`].
#[derive(Debug, Clone, Default)]
pub struct OstreeHostOptions {
    /// The sysroot.
    pub sysroot: SysrootOptions,
    /// The container (its `extra_nspawn_args` come after the harness's ostree binds; `rootfs`
    /// is ignored).
    pub host: HostOptions,
}

/// An ostree deployment booted in systemd-nspawn (see the module documentation). Dropping it
/// stops the container, then removes the sysroot.
#[derive(Debug)]
pub struct OstreeHost {
    // Field order is drop order: the container stops before its sysroot goes.
    host: SystemdHost,
    sysroot: TestSysroot,
    booted: BootEntry,
    extra_args: Vec<String>,
}

impl OstreeHost {
    /// A sysroot with `v1` deployed ([`DEFAULT_KARGS`](super::DEFAULT_KARGS)), booted.
    pub fn boot() -> Result<OstreeHost> {
        Self::boot_with(OstreeHostOptions::default())
    }

    /// A sysroot made with `opts.sysroot`, its default deployment booted.
    pub fn boot_with(opts: OstreeHostOptions) -> Result<OstreeHost> {
        let sysroot = TestSysroot::create(&opts.sysroot)?;
        Self::boot_sysroot(sysroot, opts.host)
    }

    /// Boots the default deployment of an existing sysroot.
    pub fn boot_sysroot(sysroot: TestSysroot, host_opts: HostOptions) -> Result<OstreeHost> {
        let entry = sysroot.default_entry()?;
        let extra_args = host_opts.extra_nspawn_args.clone();
        let mut opts = host_opts;
        opts.rootfs = None;
        opts.extra_nspawn_args = nspawn_args(&sysroot, &entry, &extra_args);
        let host = SystemdHost::boot_direct(opts, entry.deployment.clone())?;
        info!(host = %host.name(), deployment = %entry.deployment.display(), "ostree host booted");
        Ok(OstreeHost {
            host,
            sysroot,
            booted: entry,
            extra_args,
        })
    }

    /// The container.
    pub fn host(&self) -> &SystemdHost {
        &self.host
    }

    /// The sysroot.
    pub fn sysroot(&self) -> &TestSysroot {
        &self.sysroot
    }

    /// The images.
    pub fn images(&self) -> &Images {
        self.sysroot.images()
    }

    /// The boot entry of the current boot.
    pub fn booted_entry(&self) -> &BootEntry {
        &self.booted
    }

    /// The `options` of the current boot's entry.
    pub fn boot_options(&self) -> &str {
        &self.booted.options
    }

    /// The kernel arguments of the current boot (its entry's `options` without `ostree=`).
    pub fn kernel_args(&self) -> Vec<String> {
        self.booted.kernel_args()
    }

    /// The booted deployment directory (the container's disk; `/run`, `/var`, `/sysroot` are
    /// mounts only the container sees).
    pub fn deployment_root(&self) -> &Path {
        &self.booted.deployment
    }

    /// The container's root as it sees it, `/proc/<leader>/root`: what hearth's OS backend
    /// needs as the root from outside (it looks for `/run/ostree-booted` and `/sysroot`).
    pub fn live_root(&self) -> PathBuf {
        self.host.live_path("/")
    }

    /// A path inside the running container, through [`OstreeHost::live_root`].
    pub fn live_path(&self, inside: impl AsRef<Path>) -> PathBuf {
        self.host.live_path(inside)
    }

    /// The container's system bus address.
    pub fn bus_address(&self) -> String {
        self.host.bus_address()
    }

    /// Boots so far (1 after the first boot).
    pub fn boot_count(&self) -> u32 {
        self.host.boot_count()
    }

    /// Runs a command inside (see [`SystemdHost::exec`]).
    pub fn exec<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<ExecOutput> {
        self.host.exec(argv)
    }

    /// Runs a command inside; its standard output, or an error unless it exits with 0.
    pub fn exec_ok<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<String> {
        self.host.exec_ok(argv)
    }

    /// Waits for a reboot the container asked for, then boots the deployment of the default
    /// boot entry (read after the container exited: a staged deployment is finalized at
    /// shutdown).
    pub fn wait_for_reboot(&mut self, timeout: Duration) -> Result<BootInfo> {
        let mut chosen = None;
        let sysroot = &self.sysroot;
        let extra = &self.extra_args;
        let machine_id = self.host.machine_id().to_string();
        let info = self.host.wait_for_reboot_then(timeout, |host| {
            let entry = sysroot.default_entry()?;
            let mid = entry.deployment.join("etc/machine-id");
            if fs::read_to_string(&mid)
                .map(|m| m.trim().is_empty())
                .unwrap_or(true)
            {
                fs::write(&mid, format!("{machine_id}\n"))?;
            }
            info!(
                entry = %entry.path.display(),
                deployment = %entry.deployment.display(),
                options = %entry.options,
                "boot loader: booting the default entry"
            );
            host.set_boot_root(
                entry.deployment.clone(),
                nspawn_args(sysroot, &entry, extra),
            );
            chosen = Some(entry);
            Ok(())
        })?;
        if let Some(entry) = chosen {
            self.booted = entry;
        }
        Ok(info)
    }

    /// `systemctl reboot` inside, then [`OstreeHost::wait_for_reboot`].
    pub fn reboot(&mut self, timeout: Duration) -> Result<BootInfo> {
        let out = self.host.exec(&["systemctl", "reboot"])?;
        if !out.success() {
            bail!("systemctl reboot in {}: {out}", self.host.name());
        }
        self.wait_for_reboot(timeout)
    }

    /// Makes the current test binary available inside the container and returns its path
    /// there (`/var/lib/hearth-test-bin/<name>`): hard linked (or copied) into the stateroot's
    /// `/var`. It runs against the container's own libraries (Debian 12, as here).
    pub fn test_binary_inside(&self) -> Result<String> {
        let exe = std::env::current_exe().context("finding the test binary")?;
        let name = exe
            .file_name()
            .and_then(OsStr::to_str)
            .ok_or_else(|| anyhow!("odd test binary path {}", exe.display()))?
            .to_string();
        let dir = self.sysroot.stateroot_var().join("lib/hearth-test-bin");
        fs::create_dir_all(&dir)?;
        let dest = dir.join(&name);
        if !dest.exists() && fs::hard_link(&exe, &dest).is_err() {
            fs::copy(&exe, &dest)
                .with_context(|| format!("copying {} to {}", exe.display(), dest.display()))?;
        }
        Ok(format!("/var/lib/hearth-test-bin/{name}"))
    }

    /// Runs the current test binary inside the container:
    /// `env K=V... <binary> --exact <test> --nocapture --test-threads=1` (see
    /// [`OstreeHost::test_binary_inside`]). Tests use this to run hearth code on the booted
    /// system itself (libostree's native mode).
    pub fn run_test_inside(&self, test: &str, env: &[(&str, &str)]) -> Result<ExecOutput> {
        let binary = self.test_binary_inside()?;
        let mut argv: Vec<String> = vec!["env".into()];
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        argv.push(binary);
        argv.extend(
            ["--exact", test, "--nocapture", "--test-threads=1"]
                .iter()
                .map(|s| s.to_string()),
        );
        self.host.exec_timeout(&argv, Duration::from_secs(300))
    }

    /// Stops the container and removes the sysroot; reports cleanup errors.
    pub fn shutdown(self) -> Result<()> {
        let OstreeHost { host, sysroot, .. } = self;
        let a = host.shutdown();
        let b = sysroot.remove();
        a.and(b)
    }
}

/// The binds that make a deployment directory boot like an ostree system.
fn nspawn_args(sysroot: &TestSysroot, entry: &BootEntry, extra: &[String]) -> Vec<String> {
    let mut args = vec![
        format!("--bind={}:/sysroot", sysroot.path().display()),
        format!("--bind={}:/boot", sysroot.boot().display()),
        format!("--bind={}:/var", sysroot.stateroot_var().display()),
        // /usr read-only, as ostree-prepare-root mounts it: its files are hard links into the
        // repository (and into the image cache).
        format!("--bind-ro={}/usr:/usr", entry.deployment.display()),
        format!(
            "--bind-ro={}:{IMAGES_REPO_INSIDE}",
            sysroot.images().repo.display()
        ),
    ];
    args.extend(extra.iter().cloned());
    args
}
