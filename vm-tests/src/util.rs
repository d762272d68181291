//! Small helpers shared by the modules: host checks, log tails, random names.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};

/// Fails unless the process runs as root: mounting overlays and running systemd-nspawn need it.
pub(crate) fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "hearth-vm-tests needs root: it mounts overlays, creates cgroups and runs \
             systemd-nspawn (effective uid is {}). Run the tests as root.",
            nix::unistd::geteuid()
        );
    }
    Ok(())
}

/// Finds `program` in `PATH` (plus the sbin directories, which a non-login root shell may
/// lack), or fails naming the Debian package that provides it.
pub(crate) fn require_program(program: &str, package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = OsStr::new("/usr/local/sbin:/usr/sbin:/sbin");
    for dir in std::env::split_paths(&path).chain(std::env::split_paths(extra)) {
        let candidate = dir.join(program);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    bail!(
        "`{program}` was not found in PATH: install the Debian package `{package}` \
         (vm-tests/scripts/install-deps.sh installs everything the harness needs)"
    )
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The programs the harness runs, checked once per process.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) nspawn: PathBuf,
    pub(crate) nsenter: PathBuf,
}

/// Checks root and the programs needed to boot hosts; the result is computed once.
pub(crate) fn host_tools() -> Result<Tools> {
    static TOOLS: OnceLock<std::result::Result<Tools, String>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            (|| -> Result<Tools> {
                require_root()?;
                Ok(Tools {
                    nspawn: require_program("systemd-nspawn", "systemd-container")?,
                    nsenter: require_program("nsenter", "util-linux")?,
                })
            })()
            .map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// The last `lines` lines of a text file (lossy UTF-8), or a note saying why there are none.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            all[start..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// 32 random lowercase hex digits from the kernel (a machine-id has this form).
pub(crate) fn random_hex32() -> Result<String> {
    let uuid = fs::read_to_string("/proc/sys/kernel/random/uuid")
        .context("reading /proc/sys/kernel/random/uuid")?;
    Ok(uuid.trim().replace('-', ""))
}

/// Start time (in clock ticks since boot) of a live process, from `/proc/PID/stat`; `None`
/// when the process does not exist or is a zombie (a killed test process whose parent has not
/// reaped it yet). Together with the pid it identifies a process across pid reuse.
pub(crate) fn process_start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain anything: skip past it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state); starttime is field 22.
    if matches!(fields.next(), Some("Z" | "X" | "x")) {
        return None;
    }
    fields.nth(22 - 4)?.parse().ok()
}

/// What cargo puts in a test's environment for its own builds, which the build scripts' tools
/// read as theirs: Kubernetes' Makefile writes its tools to `$OUT_DIR` (cargo's, inside
/// `target/`, so `make` failed when a test built kube-apiserver itself rather than
/// `test-all.sh` beforehand), and `make` joins a jobserver named in `MAKEFLAGS`.
const CARGO_BUILD_ENV: &[&str] = &["OUT_DIR", "MAKEFLAGS", "MFLAGS", "CARGO_MAKEFLAGS"];

/// Runs an embedded build script (`bash -c SCRIPT NAME ARG`) with no input and both output
/// streams appended to `log`, without cargo's build variables ([`CARGO_BUILD_ENV`]) and with
/// `env` added; returns its exit status.
pub(crate) fn run_build_script(
    script: &str,
    name: &str,
    arg: &Path,
    env: &[(&str, PathBuf)],
    log: fs::File,
) -> Result<std::process::ExitStatus> {
    let mut cmd = std::process::Command::new("bash");
    for var in CARGO_BUILD_ENV {
        cmd.env_remove(var);
    }
    for (var, value) in env {
        cmd.env(var, value);
    }
    cmd.arg("-c")
        .arg(script)
        .arg(name)
        .arg(arg)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .with_context(|| format!("running bash ({name})"))
}

/// A directory that a build script makes once and the cache keeps under the script's hash
/// (`<cache>/<prefix>-<key>`): the root filesystem, the OS images, the VM image.
pub(crate) struct CachedBuild<'a> {
    /// The name in the cache (`rootfs`, `images`, `vm-image`).
    pub prefix: &'a str,
    /// What it is, for logs and errors (`the test root filesystem`).
    pub what: &'a str,
    /// How long a build takes, for the log (`about a minute`).
    pub takes: &'a str,
    /// The script's text and its file name.
    pub script: &'a str,
    /// The script's file name (for its logs).
    pub script_name: &'a str,
    /// The cache key (the hex sha256 of the script).
    pub key: String,
    /// Programs a build needs, with their Debian packages (checked only when building).
    pub needs: &'a [(&'a str, &'a str)],
    /// Environment variables the script reads (inputs built elsewhere).
    pub env: Vec<(&'a str, PathBuf)>,
    /// Whether a directory is a finished build (it appears only by rename after one).
    pub complete: fn(&Path) -> bool,
    /// Removes a build directory (partial or stale).
    pub remove: fn(&Path) -> Result<()>,
}

impl CachedBuild<'_> {
    /// The finished directory, building it first when the cache does not have it. Safe to
    /// call from many threads and processes at once: an exclusive `flock` on
    /// `<prefix>-<key>.lock` lets one build while the others wait; leftovers of an interrupted
    /// build are removed; the build runs in `<prefix>-<key>.tmp-<pid>` with its log in
    /// `<prefix>-<key>.log` and is renamed into place only when complete.
    pub fn get(&self, cache: &Path) -> Result<PathBuf> {
        use nix::fcntl::{Flock, FlockArg};
        let name = format!("{}-{}", self.prefix, self.key);
        let dest = cache.join(&name);
        if (self.complete)(&dest) {
            return Ok(dest);
        }
        fs::create_dir_all(cache)
            .with_context(|| format!("creating the cache directory {}", cache.display()))?;
        let lock_path = cache.join(format!("{name}.lock"));
        let lock_file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        tracing::debug!(lock = %lock_path.display(), "waiting for the build lock");
        let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| errno)
            .with_context(|| format!("flock {}", lock_path.display()))?;
        if (self.complete)(&dest) {
            // Another thread or process built it while we waited.
            return Ok(dest);
        }
        for (program, package) in self.needs {
            require_program(program, package)?;
        }
        // Leftovers of an interrupted build (the lock says nobody is building now).
        let tmp_prefix = format!("{name}.tmp");
        for entry in fs::read_dir(cache)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(&tmp_prefix) {
                tracing::warn!(dir = %entry.path().display(), "removing an interrupted build of {}", self.what);
                (self.remove)(&entry.path())?;
            }
        }
        if dest.exists() {
            // Incomplete: cannot come from a rename, but be safe.
            (self.remove)(&dest)?;
        }
        let tmp = cache.join(format!("{tmp_prefix}-{}", std::process::id()));
        fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let log_path = cache.join(format!("{name}.log"));
        let log = fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        tracing::info!(dest = %dest.display(), log = %log_path.display(), "building {} ({})", self.what, self.takes);
        let started = std::time::Instant::now();
        let status = run_build_script(self.script, self.script_name, &tmp, &self.env, log)?;
        if !status.success() || !(self.complete)(&tmp) {
            if let Err(e) = (self.remove)(&tmp) {
                tracing::warn!("cleaning up the failed build of {}: {e:#}", self.what);
            }
            let why = if status.success() {
                format!(
                    "{} succeeded but left an incomplete result",
                    self.script_name
                )
            } else {
                status.to_string()
            };
            bail!(
                "building {} failed ({why}); full log in {}:\n{}",
                self.what,
                log_path.display(),
                tail(&log_path, 30)
            );
        }
        fs::rename(&tmp, &dest)
            .with_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
        tracing::info!(
            dest = %dest.display(),
            seconds = started.elapsed().as_secs_f64(),
            "built {}",
            self.what
        );
        Ok(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_names_the_package_and_the_script() {
        let err = require_program("hearth-no-such-program", "some-package").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("some-package"), "{msg}");
        assert!(msg.contains("install-deps.sh"), "{msg}");
    }

    #[test]
    fn own_start_time_is_readable() {
        assert!(process_start_time(std::process::id() as i32).is_some());
        assert!(process_start_time(i32::MAX).is_none());
    }

    #[test]
    fn random_ids_look_like_machine_ids() {
        let id = random_hex32().unwrap();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn tail_returns_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        fs::write(&p, "a\nb\nc\nd\n").unwrap();
        assert_eq!(tail(&p, 2), "c\nd");
        assert_eq!(tail(&p, 10), "a\nb\nc\nd");
        assert!(tail(&dir.path().join("missing"), 2).contains("cannot read"));
    }
}
