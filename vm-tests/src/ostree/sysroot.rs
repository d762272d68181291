//! [`TestSysroot`]: a libostree sysroot in a directory of its own (`/boot` on a tmpfs), made
//! from the cached images with the first deployment; removing it (deployments are immutable),
//! and sysroots left behind by dead test processes.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use nix::mount::{mount, MsFlags};
use tracing::{debug, info, warn};

use super::entries::BootEntry;
use super::images::{cached_images, refs, Images};
use crate::host::TMPDIR_ENV;
use crate::mounts;
use crate::util;

/// The stateroot of test sysroots.
pub const OSNAME: &str = "debian";

/// The kernel arguments of a first deployment, as an installer would set them. `quiet` stands
/// for an argument hearth did not add (and must never remove).
pub const DEFAULT_KARGS: [&str; 4] = ["root=LABEL=hearth-root", "rw", "console=ttyS0", "quiet"];

const SYSROOT_DIR_PREFIX: &str = "hearth-sysroot-";

/// How to make a [`TestSysroot`].
#[derive(Debug, Clone)]
pub struct SysrootOptions {
    /// Refs imported into the sysroot's repository (from the cached bare repository).
    pub refs: Vec<String>,
    /// The ref deployed first.
    pub deploy: String,
    /// Its kernel arguments (passed with `--karg-append`, so order and duplicates are kept).
    pub kargs: Vec<String>,
    /// Size of the `/boot` tmpfs (bytes).
    pub boot_size: u64,
    /// Put the whole sysroot on a tmpfs of this size (bytes), to test what happens when it
    /// fills up. The image commits are then copied into it, not hard-linked (a few seconds).
    pub sysroot_size: Option<u64>,
    /// With `sysroot_size`: the tmpfs's number of inodes (`nr_inodes`), to test inode checks.
    pub sysroot_inodes: Option<u64>,
}

/// The repository reserve of a test sysroot on this machine's disk
/// (`core.min-free-space-size`; see [`TestSysroot::create`]).
pub const TEST_MIN_FREE_SPACE: &str = "256MB";

impl Default for SysrootOptions {
    fn default() -> Self {
        SysrootOptions {
            refs: vec![refs::V1.to_string()],
            deploy: refs::V1.to_string(),
            kargs: DEFAULT_KARGS.iter().map(|s| s.to_string()).collect(),
            boot_size: 64 << 20,
            sysroot_size: None,
            sysroot_inodes: None,
        }
    }
}

/// A libostree sysroot in a directory of its own (see the module documentation). Dropping it
/// unmounts its `/boot`, clears the immutable flag of its deployments and removes it.
#[derive(Debug)]
pub struct TestSysroot {
    dir: PathBuf,
    path: PathBuf,
    images: Images,
    cleaned: bool,
}

impl TestSysroot {
    /// Makes a sysroot and deploys the first ref.
    pub fn create(opts: &SysrootOptions) -> Result<TestSysroot> {
        let images = cached_images()?;
        let base = base_dir();
        // Containers of dead test processes first: they may still run on their sysroots.
        crate::host::reap_stale_hosts_once(&base);
        reap_stale_sysroots_once(&base);
        fs::create_dir_all(&base)?;
        let base = fs::canonicalize(&base)?;
        let dir = loop {
            let dir = base.join(format!(
                "{SYSROOT_DIR_PREFIX}{}",
                &util::random_hex32()?[..8]
            ));
            match fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
            }
        };
        let me = std::process::id() as i32;
        fs::write(
            dir.join("owner"),
            format!(
                "{me} {}\n",
                util::process_start_time(me).unwrap_or_default()
            ),
        )?;
        let mut sysroot = TestSysroot {
            path: dir.join("sysroot"),
            dir,
            images,
            cleaned: false,
        };
        sysroot.init(opts)?;
        Ok(sysroot)
    }

    fn init(&mut self, opts: &SysrootOptions) -> Result<()> {
        let started = Instant::now();
        fs::create_dir_all(&self.path)?;
        if let Some(size) = opts.sysroot_size {
            let mut data = format!("size={size},mode=0755");
            if let Some(inodes) = opts.sysroot_inodes {
                data.push_str(&format!(",nr_inodes={inodes}"));
            }
            mount(
                Some("tmpfs"),
                &self.path,
                Some("tmpfs"),
                MsFlags::empty(),
                Some(data.as_str()),
            )
            .with_context(|| format!("mounting a tmpfs ({data}) at {}", self.path.display()))?;
        }
        let boot = self.path.join("boot");
        fs::create_dir_all(&boot)?;
        let size = format!("size={},mode=0755", opts.boot_size);
        mount(
            Some("tmpfs"),
            &boot,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(size.as_str()),
        )
        .with_context(|| format!("mounting a tmpfs ({size}) at {}", boot.display()))?;
        let sysroot_arg = format!("--sysroot={}", self.path.display());
        self.run(&["admin", "init-fs", &self.path.display().to_string()])?;
        self.run(&["admin", "os-init", OSNAME, &sysroot_arg])?;
        if opts.sysroot_size.is_none() {
            // The sysroot shares this machine's disk, whose fill level is not what a test is
            // about: libostree's default reserve (3% of the file system: 7.5 GB of a 252 GB
            // disk) refused pulls whenever a build elsewhere had filled the disk. A fixed
            // reserve, as a node's admin may set, keeps the check in force and the test about
            // its own sysroot; the space tests use a sized tmpfs and the default percentage.
            let repo = format!("--repo={}", self.repo().display());
            self.run(&[
                "config",
                repo.as_str(),
                "set",
                "core.min-free-space-size",
                TEST_MIN_FREE_SPACE,
            ])?;
        }
        let mut pull = vec![
            "pull-local".to_string(),
            format!("--repo={}", self.repo().display()),
            self.images.bare_repo.display().to_string(),
        ];
        pull.extend(opts.refs.iter().cloned());
        if !opts.refs.contains(&opts.deploy) {
            pull.push(opts.deploy.clone());
        }
        self.run(&pull)?;
        let mut deploy = vec![
            "admin".to_string(),
            "deploy".to_string(),
            sysroot_arg.clone(),
            format!("--os={OSNAME}"),
        ];
        deploy.extend(opts.kargs.iter().map(|k| format!("--karg-append={k}")));
        deploy.push(opts.deploy.clone());
        self.run(&deploy)?;

        // The first deployment: its /var content becomes the stateroot's (newer libostree does
        // this itself), and it gets a machine-id (images have none; later deployments inherit
        // it through the /etc merge).
        let entry = self.default_entry()?;
        let status = Command::new("cp")
            .arg("-a")
            .arg("-n")
            .arg(format!("{}/var/.", entry.deployment.display()))
            .arg(self.stateroot_var())
            .status()
            .context("running cp")?;
        if !status.success() {
            bail!("copying the deployment's /var into the stateroot failed: {status}");
        }
        fs::write(
            entry.deployment.join("etc/machine-id"),
            format!("{}\n", util::random_hex32()?),
        )?;
        debug!(
            sysroot = %self.path.display(),
            ms = started.elapsed().as_millis() as u64,
            "sysroot ready"
        );
        Ok(())
    }

    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String> {
        let out = Command::new("ostree")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running ostree")?;
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        if !out.status.success() {
            bail!(
                "`ostree {}` failed ({}): {}",
                shown.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `ostree admin ARGS --sysroot=<path>` on this machine; its standard output.
    pub fn admin(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["admin".to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        all.push(format!("--sysroot={}", self.path.display()));
        self.run(&all)
    }

    /// `ostree ARGS --repo=<the sysroot's repository>`; its standard output.
    pub fn repo_cmd(&self, args: &[&str]) -> Result<String> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.push(format!("--repo={}", self.repo().display()));
        self.run(&all)
    }

    /// The sysroot directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its repository.
    pub fn repo(&self) -> PathBuf {
        self.path.join("ostree/repo")
    }

    /// Its `/boot` (a tmpfs).
    pub fn boot(&self) -> PathBuf {
        self.path.join("boot")
    }

    /// The stateroot's `/var`.
    pub fn stateroot_var(&self) -> PathBuf {
        self.path.join("ostree/deploy").join(OSNAME).join("var")
    }

    /// The images it was made from.
    pub fn images(&self) -> &Images {
        &self.images
    }

    /// All boot entries, highest version (the default) first.
    pub fn entries(&self) -> Result<Vec<BootEntry>> {
        let dir = self.path.join("boot/loader/entries");
        let mut out = Vec::new();
        for e in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let p = e?.path();
            if p.extension() == Some(OsStr::new("conf")) {
                out.push(BootEntry::parse(&self.path, &p)?);
            }
        }
        out.sort_by_key(|e| std::cmp::Reverse(e.version));
        Ok(out)
    }

    /// The entry a boot loader boots: the highest `version`.
    pub fn default_entry(&self) -> Result<BootEntry> {
        self.entries()?.into_iter().next().ok_or_else(|| {
            anyhow!(
                "no boot entries in {}/boot/loader/entries",
                self.path.display()
            )
        })
    }

    /// Bytes used below the sysroot directory (`du -sx --bytes`, hard links counted once):
    /// for measurements.
    pub fn disk_usage(&self) -> Result<u64> {
        let out = Command::new("du")
            .args(["-s", "-x", "--block-size=1"])
            .arg(&self.path)
            .output()
            .context("running du")?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                anyhow!(
                    "du {}: {}",
                    self.path.display(),
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }

    /// Removes the sysroot now; reports what could not be removed.
    pub fn remove(mut self) -> Result<()> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<()> {
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        if std::env::var(crate::host::KEEP_ENV).is_ok_and(|v| v == "1") {
            for m in mounts::mounts_under(&self.dir)? {
                mounts::unmount(&m)?;
            }
            let _ = fs::remove_file(self.dir.join("owner"));
            info!(dir = %self.dir.display(), "keeping the sysroot (without its /boot tmpfs)");
            return Ok(());
        }
        remove_sysroot_dir(&self.dir)
    }
}

impl Drop for TestSysroot {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            warn!("{e:#}");
        }
    }
}

/// Unmounts what is mounted below `dir`, clears the immutable flag of deployment directories
/// (libostree sets it) and removes `dir`.
fn remove_sysroot_dir(dir: &Path) -> Result<()> {
    for m in mounts::mounts_under(dir)? {
        mounts::unmount(&m)?;
    }
    let deploy = dir.join("sysroot/ostree/deploy");
    if let Ok(stateroots) = fs::read_dir(&deploy) {
        for stateroot in stateroots.flatten() {
            let Ok(deployments) = fs::read_dir(stateroot.path().join("deploy")) else {
                continue;
            };
            for d in deployments.flatten() {
                if d.path().is_dir() {
                    let status = Command::new("chattr")
                        .arg("-i")
                        .arg(d.path())
                        .stderr(Stdio::null())
                        .status()
                        .context("running chattr (Debian package e2fsprogs)")?;
                    if !status.success() {
                        warn!(dir = %d.path().display(), "chattr -i failed");
                    }
                }
            }
        }
    }
    mounts::remove_tree(dir)
}

fn base_dir() -> PathBuf {
    match std::env::var_os(TMPDIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::temp_dir(),
    }
}

fn reap_stale_sysroots_once(base: &Path) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            if !entry
                .file_name()
                .to_string_lossy()
                .starts_with(SYSROOT_DIR_PREFIX)
            {
                continue;
            }
            let dir = entry.path();
            let Ok(owner) = fs::read_to_string(dir.join("owner")) else {
                continue; // kept on purpose, or not ours
            };
            let mut f = owner.split_whitespace();
            let pid: i32 = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let start: u64 = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            if pid > 0 && util::process_start_time(pid) == Some(start) {
                continue;
            }
            warn!(dir = %dir.display(), "removing a sysroot left behind by a dead test process");
            if let Err(e) = remove_sysroot_dir(&dir) {
                warn!("{e:#}");
            }
        }
    });
}
