//! What systemd-nspawn leaves outside a host's directory (its image lock, its propagation
//! directory), and hosts left behind by test processes that died without cleaning up.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use tracing::{debug, warn};

use super::options::HOST_DIR_PREFIX;
use crate::cgroup::HostCgroup;
use crate::mounts;
use crate::util;

/// A systemd-nspawn that was SIGKILLed leaves its image lock file,
/// `/run/systemd/nspawn/locks/inode-<st_dev>:<st_ino>` of the root directory: remove it.
/// Call while the root is still mounted (its device number is the overlay's).
pub(super) fn remove_nspawn_lock(root: &Path) {
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
pub(super) fn remove_propagate_dir(name: &str) {
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
