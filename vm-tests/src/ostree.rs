//! The ostree fast tier: libostree sysroots in a directory, their deployments booted in
//! systemd-nspawn, with reboots into whatever the boot loader entries say.
//!
//! ```no_run
//! use std::time::Duration;
//! use hearth_vm_tests::ostree::{refs, OstreeHost, OstreeHostOptions};
//!
//! # fn main() -> anyhow::Result<()> {
//! let mut host = OstreeHost::boot()?;              // v1 deployed with DEFAULT_KARGS, booted
//! assert_eq!(host.booted_entry().checksum, host.images().commit(refs::V1)?);
//! host.exec_ok(&["ostree", "admin", "status"])?;    // libostree sees it booted
//! host.exec_ok(&["ostree", "admin", "deploy", "--stage", "--karg-append=hugepages=32", refs::V1])?;
//! host.reboot(Duration::from_secs(60))?;           // finalized at shutdown, booted again
//! assert!(host.kernel_args().contains(&"hugepages=32".to_string()));
//! # Ok(()) }
//! ```
//!
//! ## Pieces
//!
//! - [`cached_images`]: the OS images of `images/build-images.sh` (Debian 12 commits `v1`,
//!   `v1-rt`, `v2`, `v2-rt`, `v2-broken`), built once and cached in
//!   `$HEARTH_TEST_CACHE/images-<sha256 of the script>` like the rootfs.
//! - [`TestSysroot`]: `ostree admin init-fs` + `os-init` in a fresh directory
//!   (`$HEARTH_TEST_TMPDIR/hearth-sysroot-<8 hex>/sysroot`), the image commits imported with
//!   `ostree pull-local` from the cached bare repository (hard links: about a second), the first
//!   deployment made with `ostree admin deploy`. Its `/boot` is a tmpfs of its own (64 MiB by
//!   default; smaller ones test space checks): libostree freezes and thaws the filesystem of
//!   `/boot` after writing boot entries (`FIFREEZE`), which must not hit the machine's root
//!   filesystem; on a tmpfs it falls back to `syncfs`.
//! - [`OstreeHost`]: a [`SystemdHost`] booted *directly* on a deployment directory:
//!   `systemd-nspawn --directory=<deployment> --bind=<sysroot>:/sysroot
//!   --bind=<sysroot>/boot:/boot --bind=<stateroot>/var:/var --bind-ro=<deployment>/usr:/usr`.
//!   The image's tmpfiles line creates `/run/ostree-booted`, so libostree inside sees a booted
//!   system. On a reboot (nspawn exits with 133) the harness plays boot loader: it reads
//!   `boot/loader/entries/*.conf`, takes the entry with the highest `version` (libostree's
//!   default), resolves its `ostree=` argument to a deployment directory and boots that.
//!   Kernel arguments are checked in that entry's `options` ([`OstreeHost::booted_entry`]),
//!   not in `/proc/cmdline` (the container shares the machine's kernel).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::{self};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::mount::{mount, MsFlags};
use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};

use crate::exec::ExecOutput;
use crate::host::{BootInfo, HostOptions, SystemdHost, TMPDIR_ENV};
use crate::mounts;
use crate::rootfs::cache_dir;
use crate::util;

/// The content of `images/build-images.sh`, the script that builds the OS images.
pub const BUILD_IMAGES_SCRIPT: &str = include_str!("../../images/build-images.sh");

/// The refs of the image commits.
pub mod refs {
    /// Debian 12 with systemd, dbus, ostree, placeholder kernel `6.1.0-hearth`;
    /// `/usr/lib/hearth-image-version` = `v1`.
    pub const V1: &str = "hearth/debian/v1";
    /// `v1` with the realtime placeholder kernel `6.1.0-hearth-rt` (4 MiB).
    pub const V1_RT: &str = "hearth/debian/v1-rt";
    /// `v1` plus `/usr/lib/hearth-image-version` = `v2`.
    pub const V2: &str = "hearth/debian/v2";
    /// `v2` with the realtime kernel.
    pub const V2_RT: &str = "hearth/debian/v2-rt";
    /// `v2` with a unit that fails at every boot (the system ends `degraded`).
    pub const V2_BROKEN: &str = "hearth/debian/v2-broken";
    /// All of them.
    pub const ALL: [&str; 5] = [V1, V1_RT, V2, V2_RT, V2_BROKEN];
}

/// The stateroot of test sysroots.
pub const OSNAME: &str = "debian";

/// Where a booted [`OstreeHost`] sees the images' archive repository (read-only), for a
/// `file://` remote used from inside: `file:///run/hearth-images/repo`.
pub const IMAGES_REPO_INSIDE: &str = "/run/hearth-images/repo";

/// The kernel arguments of a first deployment, as an installer would set them. `quiet` stands
/// for an argument hearth did not add (and must never remove).
pub const DEFAULT_KARGS: [&str; 4] = ["root=LABEL=hearth-root", "rw", "console=ttyS0", "quiet"];

const SYSROOT_DIR_PREFIX: &str = "hearth-sysroot-";

// ---------------------------------------------------------------------------------------------
// Images.
// ---------------------------------------------------------------------------------------------

/// The built OS images.
#[derive(Debug, Clone)]
pub struct Images {
    /// The cache directory holding them.
    pub dir: PathBuf,
    /// The archive-mode repository (what a remote serves).
    pub repo: PathBuf,
    /// The bare repository test sysroots import from.
    pub bare_repo: PathBuf,
    /// Ref → commit checksum.
    pub commits: BTreeMap<String, String>,
}

impl Images {
    /// The commit checksum of an image ref.
    pub fn commit(&self, reference: &str) -> Result<&str> {
        self.commits
            .get(reference)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no image commit {reference} in {}", self.dir.display()))
    }

    /// `file://` URL of the archive repository, for an ostree remote used on this machine.
    pub fn remote_url(&self) -> String {
        format!("file://{}", self.repo.display())
    }

    /// `file://` URL of the archive repository as a booted [`OstreeHost`] sees it.
    pub fn remote_url_inside(&self) -> String {
        format!("file://{IMAGES_REPO_INSIDE}")
    }

    fn load(dir: &Path) -> Result<Images> {
        let env = fs::read_to_string(dir.join("commits.env"))
            .with_context(|| format!("reading {}/commits.env", dir.display()))?;
        let commits = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(r, c)| (r.trim().to_string(), c.trim().to_string()))
            .collect();
        Ok(Images {
            dir: dir.to_path_buf(),
            repo: dir.join("repo"),
            bare_repo: dir.join("repo-bare"),
            commits,
        })
    }
}

/// The cache key of the images: the hex sha256 of [`BUILD_IMAGES_SCRIPT`].
pub fn images_key() -> String {
    hex::encode(Sha256::digest(BUILD_IMAGES_SCRIPT.as_bytes()))
}

fn images_complete(dir: &Path) -> bool {
    dir.join("commits.env").exists() && dir.join("repo/config").exists()
}

/// Returns the cached images, building them first (about 3.5 minutes: debootstrap, five
/// commits, an archive repository; needs root, `debootstrap`, `ostree` and the Debian archive).
/// Safe to call from many threads and processes at once: one builds, the others wait.
pub fn cached_images() -> Result<Images> {
    util::require_root()?;
    util::require_program("ostree", "ostree")?;
    let dest = util::CachedBuild {
        prefix: "images",
        what: "the OS images",
        takes: "about 4 minutes",
        script: BUILD_IMAGES_SCRIPT,
        script_name: "build-images.sh",
        key: images_key(),
        needs: &[("debootstrap", "debootstrap")],
        complete: images_complete,
        remove: mounts::remove_tree,
    }
    .get(&cache_dir())?;
    Images::load(&dest)
}

// ---------------------------------------------------------------------------------------------
// Boot entries.
// ---------------------------------------------------------------------------------------------

/// One boot loader entry (`boot/loader/entries/*.conf`), resolved to its deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootEntry {
    /// The entry file.
    pub path: PathBuf,
    /// `title`.
    pub title: String,
    /// `version`: the highest is the default.
    pub version: u64,
    /// `options`: the kernel command line.
    pub options: String,
    /// `linux`.
    pub linux: String,
    /// `initrd`.
    pub initrd: String,
    /// The deployment directory (on this machine) that `ostree=` points to.
    pub deployment: PathBuf,
    /// Its commit checksum.
    pub checksum: String,
    /// Its deployment serial.
    pub serial: i32,
}

impl BootEntry {
    /// The kernel arguments of `options` without libostree's `ostree=`.
    pub fn kernel_args(&self) -> Vec<String> {
        self.options
            .split_whitespace()
            .filter(|a| !a.starts_with("ostree="))
            .map(str::to_string)
            .collect()
    }

    fn parse(sysroot: &Path, path: &Path) -> Result<BootEntry> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for line in text.lines() {
            if let Some((k, v)) = line.trim().split_once(char::is_whitespace) {
                fields.insert(k, v.trim());
            }
        }
        let get = |k: &str| fields.get(k).map(|v| v.to_string()).unwrap_or_default();
        let options = get("options");
        let ostree = options
            .split_whitespace()
            .find_map(|a| a.strip_prefix("ostree="))
            .ok_or_else(|| anyhow!("{}: no ostree= in options {options:?}", path.display()))?;
        let link = sysroot.join(ostree.trim_start_matches('/'));
        let deployment = fs::canonicalize(&link)
            .with_context(|| format!("{}: resolving ostree={ostree}", path.display()))?;
        let base = deployment
            .file_name()
            .and_then(OsStr::to_str)
            .unwrap_or_default()
            .to_string();
        let (checksum, serial) = base
            .rsplit_once('.')
            .and_then(|(c, s)| Some((c.to_string(), s.parse().ok()?)))
            .ok_or_else(|| anyhow!("{}: unexpected deployment directory {base}", path.display()))?;
        Ok(BootEntry {
            path: path.to_path_buf(),
            title: get("title"),
            version: get("version").parse().unwrap_or(0),
            options,
            linux: get("linux"),
            initrd: get("initrd"),
            deployment,
            checksum,
            serial,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Sysroots.
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Booted deployments.
// ---------------------------------------------------------------------------------------------

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
    /// A sysroot with `v1` deployed ([`DEFAULT_KARGS`]), booted.
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
