//! One cgroup per host.
//!
//! With `--keep-unit` and no systemd on the machine, systemd-nspawn puts the container into
//! `<its own cgroup>/payload` and itself into `<its own cgroup>/supervisor`. Two containers
//! started from the same process would then share one cgroup tree, and their systemds would
//! manage each other's `system.slice`. So each host's nspawn is started inside its own
//! cgroup, `<our cgroup>/hearth-vm-tests/<name>`, in the `name=systemd` (v1) and unified (v2)
//! hierarchies, whichever the machine has. The cgroup also gives a reliable kill switch
//! (`cgroup.kill`) for everything of the host, nspawn included.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tracing::{debug, warn};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup directories of one host, one per hierarchy.
#[derive(Debug, Clone)]
pub(crate) struct HostCgroup {
    dirs: Vec<PathBuf>,
}

impl HostCgroup {
    /// Creates `<our cgroup>/hearth-vm-tests/<name>` in every hierarchy systemd uses here.
    pub(crate) fn create(name: &str) -> Result<Self> {
        let own = fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        let mut dirs = Vec::new();
        for (mount, path) in hierarchies(&own) {
            let dir = mount
                .join(path.trim_start_matches('/'))
                .join("hearth-vm-tests")
                .join(name);
            create_cgroup(&dir)?;
            dirs.push(dir);
        }
        if dirs.is_empty() {
            bail!(
                "no cgroup hierarchy for systemd found under {CGROUP_ROOT} \
                 (need cgroup2, or name=systemd with the unified hierarchy): \
                 systemd-nspawn cannot boot a container here"
            );
        }
        debug!(?dirs, "created the host's cgroups");
        Ok(Self { dirs })
    }

    /// The cgroups of a host recorded earlier (see [`HostCgroup::dirs`]).
    pub(crate) fn from_dirs(dirs: Vec<PathBuf>) -> Self {
        Self { dirs }
    }

    /// The cgroup directories, one per hierarchy.
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The `cgroup.procs` files that a process writes its pid into to join the host's cgroup.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Pids of all processes in the host's cgroups (all hierarchies, all sub-cgroups).
    pub(crate) fn pids(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        for dir in &self.dirs {
            for cg in subtree(dir) {
                if let Ok(procs) = fs::read_to_string(cg.join("cgroup.procs")) {
                    pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
                }
            }
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// SIGKILLs every process of the host: `cgroup.kill` where the kernel has it, else each
    /// pid listed in the cgroups.
    pub(crate) fn kill_all(&self) {
        for dir in &self.dirs {
            let kill_file = dir.join("cgroup.kill");
            if kill_file.exists() {
                match fs::write(&kill_file, "1") {
                    Ok(()) => return,
                    Err(e) => warn!(file = %kill_file.display(), "cgroup.kill failed: {e}"),
                }
            }
        }
        for pid in self.pids() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    /// Waits until no process is left in the host's cgroups.
    pub(crate) fn wait_empty(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.pids().is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Removes the sub-cgroups left by a previous boot, keeping the host's own cgroups.
    pub(crate) fn clear_children(&self) -> Result<()> {
        for dir in &self.dirs {
            for cg in subtree(dir).into_iter().filter(|cg| cg != dir) {
                fs::remove_dir(&cg).with_context(|| format!("rmdir {}", cg.display()))?;
            }
        }
        Ok(())
    }

    /// Removes the host's cgroups (which must be empty of processes), and the shared
    /// `hearth-vm-tests` parent when it is empty.
    pub(crate) fn remove(&self) -> Result<()> {
        for dir in &self.dirs {
            for cg in subtree(dir) {
                fs::remove_dir(&cg).with_context(|| format!("rmdir {}", cg.display()))?;
            }
            if let Some(parent) = dir.parent() {
                // Fails while another host (of any process) still uses it: fine.
                let _ = fs::remove_dir(parent);
            }
        }
        Ok(())
    }
}

/// Creates a cgroup and its parents. Another host's cleanup may remove the shared
/// `hearth-vm-tests` parent between the two `mkdir`s: then try again.
fn create_cgroup(dir: &Path) -> Result<()> {
    let mut attempt = 0;
    loop {
        match fs::create_dir_all(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 10 => attempt += 1,
            Err(e) => return Err(e).with_context(|| format!("creating cgroup {}", dir.display())),
        }
    }
}

/// The hierarchies to place a host in: (mount point, our path in it), from the content of
/// `/proc/self/cgroup`.
fn hierarchies(own_cgroups: &str) -> Vec<(PathBuf, String)> {
    let root = Path::new(CGROUP_ROOT);
    let path_of = |pred: &dyn Fn(&str, &str) -> bool| {
        own_cgroups.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            pred(id, controllers).then(|| path.to_string())
        })
    };
    let unified = path_of(&|id, c| id == "0" && c.is_empty());
    if root.join("cgroup.controllers").exists() {
        // cgroup2 only.
        return unified
            .map(|p| (root.to_path_buf(), p))
            .into_iter()
            .collect();
    }
    let mut out = Vec::new();
    if let Some(p) = path_of(&|_, c| c == "name=systemd") {
        if root.join("systemd/cgroup.procs").exists() {
            out.push((root.join("systemd"), p));
        }
    }
    if let Some(p) = unified {
        if root.join("unified/cgroup.procs").exists() {
            out.push((root.join("unified"), p));
        }
    }
    out
}

/// `dir` and all cgroups below it, deepest first (the order `rmdir` needs).
fn subtree(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(entries) = fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    walk(&entry.path(), out);
                }
            }
        }
        out.push(dir.to_path_buf());
    }
    let mut out = Vec::new();
    if dir.is_dir() {
        walk(dir, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hierarchies_follow_the_machine() {
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let found = hierarchies(&own);
        assert!(!found.is_empty(), "no hierarchy in {own}");
        for (mount, _) in found {
            assert!(mount.join("cgroup.procs").exists());
        }
    }
}
