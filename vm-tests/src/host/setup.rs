//! A host's directory (`<base>/hearth-host-<8 hex>`), its writable root (an overlay, a copy, or
//! the tree itself for `crate::ostree`), its machine-id and its cgroups.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tracing::{debug, warn};

use super::options::{env_flag, COPY_ROOT_ENV, HOST_DIR_PREFIX};
use super::{RootKind, SystemdHost};
use crate::cgroup::HostCgroup;
use crate::mounts;
use crate::util;

impl SystemdHost {
    /// Owner file, writable root, machine-id, bus directory and cgroups.
    pub(super) fn prepare(&mut self) -> Result<()> {
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
        let content = if self.opts.first_boot {
            // systemd's first-boot marker; the id comes in as the container's UUID.
            "uninitialized\n".to_string()
        } else {
            format!("{}\n", self.machine_id)
        };
        fs::write(&machine_id_path, content)
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
}

/// Creates `<base>/hearth-host-<8 hex>`; returns the machine name `hearth-<8 hex>` and the
/// directory.
pub(super) fn create_host_dir(base: &Path) -> Result<(String, PathBuf)> {
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
