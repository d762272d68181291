//! Free space and inodes before staging: what a pull will write (the commit's `ostree.sizes`),
//! what a deployment needs on the sysroot (`/etc` copy, directories) and on `/boot` (kernel and
//! initramfs), read by walking the commit's dirtree objects ([`CommitTree`]).

use std::collections::HashMap;
use std::path::Path;

use ::ostree as lo;
use lo::glib;
use tracing::debug;

use crate::session::{none, Session};
use hearth_hostops::os::paths::{display, inside};
use hearth_hostops::os::ImageRef;
use hearth_hostops::os::OsConfig;
use hearth_hostops::os::SpaceCheck;
use hearth_hostops::os::{human_bytes, OsError};

/// Bytes a directory costs on disk (one block).
const DIR_BYTES: u64 = 4096;

/// `statvfs`: (bytes available to unprivileged users, inodes available, inodes total).
pub(crate) fn free_space(path: &Path) -> Result<(u64, u64, u64), OsError> {
    let st = nix::sys::statvfs::statvfs(path).map_err(|e| OsError::io(path, e))?;
    Ok((
        st.blocks_available() as u64 * st.fragment_size() as u64,
        st.files_available() as u64,
        st.files() as u64,
    ))
}

impl Session {
    /// Checks the sysroot's free space for the objects a pull of `csum` will write (from the
    /// commit's `ostree.sizes` metadata).
    pub(crate) fn pull_space(
        &self,
        config: &OsConfig,
        csum: &str,
        target: &ImageRef,
    ) -> Result<SpaceCheck, OsError> {
        let repo_path = inside(&self.root, "/ostree/repo");
        let (available, _, _) = free_space(&repo_path)?;
        let reserve = self.repo.min_free_space_bytes().unwrap_or(0) + config.min_free_bytes.sysroot;
        let (commit, _) = self
            .repo
            .load_commit(csum)
            .map_err(|e| OsError::ostree(format!("loading commit {csum}"), e))?;
        let sizes = lo::commit_get_object_sizes(&commit).unwrap_or_default();
        let (needed, detail) = if sizes.is_empty() {
            (
                reserve,
                format!(
                    "size of the pull unknown: commit {csum} has no ostree.sizes metadata; {} reserve",
                    human_bytes(reserve)
                ),
            )
        } else {
            let mut missing = 0u64;
            let mut objects = 0u64;
            for e in &sizes {
                let has = self
                    .repo
                    .has_object(e.objtype(), &e.checksum(), none())
                    .unwrap_or(false);
                if !has {
                    missing += e.unpacked();
                    objects += 1;
                }
            }
            (
                missing + reserve,
                format!(
                    "{} in {objects} objects to pull, {} reserve (libostree's min-free-space \
                     and minFreeBytes.sysroot)",
                    human_bytes(missing),
                    human_bytes(reserve)
                ),
            )
        };
        let check = SpaceCheck {
            what: "/sysroot".into(),
            path: display(&repo_path),
            needed,
            available,
            detail,
        };
        space_ok(&check, &target.to_string())?;
        Ok(check)
    }

    /// Checks the space a deployment of `csum` needs: its `/etc` copy and directories on the
    /// sysroot, and its kernel and initramfs on `/boot` unless a deployment has them already.
    pub(crate) fn deploy_space(
        &self,
        config: &OsConfig,
        csum: &str,
        target: &str,
    ) -> Result<Vec<SpaceCheck>, OsError> {
        let tree = CommitTree::new(&self.repo);
        let root = tree.root_of(csum)?;
        let dirs = tree.count_dirs(&root)?;
        let (etc_files, etc_bytes) = match tree.find(&root, &["usr", "etc"])? {
            Some(etc) => tree.sum_files(&etc)?,
            None => (0, 0),
        };
        let sysroot_path = inside(&self.root, "/ostree/repo");
        let (available, inodes_free, inodes_total) = free_space(&sysroot_path)?;
        let deploy_bytes = etc_bytes + dirs * DIR_BYTES;
        let reserve = config.min_free_bytes.sysroot;
        let sysroot = SpaceCheck {
            what: "/sysroot".into(),
            path: display(&sysroot_path),
            needed: deploy_bytes + reserve,
            available,
            detail: format!(
                "the new deployment's copy of /etc ({etc_files} files, {}) and its {dirs} \
                 directories ({}); {} reserve",
                human_bytes(etc_bytes),
                human_bytes(dirs * DIR_BYTES),
                human_bytes(reserve)
            ),
        };
        space_ok(&sysroot, target)?;
        let inodes_needed = dirs + etc_files;
        if inodes_total > 0 && inodes_free < inodes_needed {
            return Err(OsError::InsufficientInodes {
                what: "/sysroot".into(),
                path: display(&sysroot_path),
                target: target.into(),
                needed: inodes_needed,
                available: inodes_free,
            });
        }

        let kernel = tree.kernel(&root)?;
        let boot_path = inside(&self.root, "/boot");
        let (boot_available, _, _) = free_space(&boot_path)?;
        let have_it = match &kernel {
            None => true,
            Some(k) => {
                let mut found = false;
                for d in self.sysroot.deployments() {
                    let r = tree.root_of(&d.csum())?;
                    if tree.kernel(&r)?.map(|o| o.same_files(k)).unwrap_or(false) {
                        found = true;
                        break;
                    }
                }
                found
            }
        };
        let boot_bytes = if have_it {
            0
        } else {
            kernel.as_ref().map(|k| k.bytes).unwrap_or(0)
        };
        let boot_reserve = config.min_free_bytes.boot;
        let boot = SpaceCheck {
            what: "/boot".into(),
            path: display(&boot_path),
            needed: boot_bytes + boot_reserve,
            available: boot_available,
            detail: match (&kernel, have_it) {
                (Some(k), false) => format!(
                    "kernel {} and its initramfs ({}) to copy to /boot; {} reserve",
                    k.version,
                    human_bytes(k.bytes),
                    human_bytes(boot_reserve)
                ),
                (Some(k), true) => format!(
                    "kernel {} is in /boot already; {} reserve",
                    k.version,
                    human_bytes(boot_reserve)
                ),
                (None, _) => format!(
                    "no kernel found in usr/lib/modules of {target}; {} reserve",
                    human_bytes(boot_reserve)
                ),
            },
        };
        space_ok(&boot, target)?;
        Ok(vec![sysroot, boot])
    }
}

/// Fails with [`OsError::InsufficientSpace`] when the check does not pass.
pub(crate) fn space_ok(check: &SpaceCheck, target: &str) -> Result<(), OsError> {
    debug!(what = %check.what, needed = check.needed, available = check.available, detail = %check.detail, "space check");
    if check.needed > check.available {
        return Err(OsError::InsufficientSpace {
            what: check.what.clone(),
            path: check.path.clone(),
            target: target.to_string(),
            needed: check.needed,
            available: check.available,
            detail: check.detail.clone(),
        });
    }
    Ok(())
}

/// A kernel in a commit: `usr/lib/modules/<version>/{vmlinuz,initramfs.img}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kernel {
    version: String,
    /// Content checksums of vmlinuz and initramfs.img (if any).
    files: Vec<String>,
    bytes: u64,
}

impl Kernel {
    fn same_files(&self, other: &Kernel) -> bool {
        self.files == other.files
    }
}

/// Walks commits through their dirtree objects (no checkout, no gio).
struct CommitTree<'a> {
    repo: &'a lo::Repo,
    dir_counts: std::cell::RefCell<HashMap<String, u64>>,
}

/// A directory of a commit: its dirtree checksum.
type TreeCsum = String;

impl<'a> CommitTree<'a> {
    fn new(repo: &'a lo::Repo) -> Self {
        CommitTree {
            repo,
            dir_counts: Default::default(),
        }
    }

    fn err(&self, what: String) -> impl Fn(glib::Error) -> OsError {
        move |e| OsError::ostree(what.clone(), e)
    }

    fn root_of(&self, commit: &str) -> Result<TreeCsum, OsError> {
        let (v, _) = self
            .repo
            .load_commit(commit)
            .map_err(self.err(format!("loading commit {commit}")))?;
        Ok(lo::checksum_from_bytes_v(&v.child_value(6)).to_string())
    }

    /// (files as (name, checksum), dirs as (name, dirtree checksum)).
    #[allow(clippy::type_complexity)]
    fn list(&self, tree: &str) -> Result<(Vec<(String, String)>, Vec<(String, String)>), OsError> {
        let v = self
            .repo
            .load_variant(lo::ObjectType::DirTree, tree)
            .map_err(self.err(format!("loading dirtree {tree}")))?;
        let files_v = v.child_value(0);
        let dirs_v = v.child_value(1);
        let mut files = Vec::with_capacity(files_v.n_children());
        for i in 0..files_v.n_children() {
            let e = files_v.child_value(i);
            let name = e.child_value(0).str().unwrap_or_default().to_string();
            files.push((
                name,
                lo::checksum_from_bytes_v(&e.child_value(1)).to_string(),
            ));
        }
        let mut dirs = Vec::with_capacity(dirs_v.n_children());
        for i in 0..dirs_v.n_children() {
            let e = dirs_v.child_value(i);
            let name = e.child_value(0).str().unwrap_or_default().to_string();
            dirs.push((
                name,
                lo::checksum_from_bytes_v(&e.child_value(1)).to_string(),
            ));
        }
        Ok((files, dirs))
    }

    /// Directories in the tree, itself included.
    fn count_dirs(&self, tree: &str) -> Result<u64, OsError> {
        if let Some(n) = self.dir_counts.borrow().get(tree) {
            return Ok(*n);
        }
        let (_, dirs) = self.list(tree)?;
        let mut n = 1;
        for (_, sub) in &dirs {
            n += self.count_dirs(sub)?;
        }
        self.dir_counts.borrow_mut().insert(tree.to_string(), n);
        Ok(n)
    }

    fn find(&self, tree: &str, path: &[&str]) -> Result<Option<TreeCsum>, OsError> {
        let mut cur = tree.to_string();
        for part in path {
            let (_, dirs) = self.list(&cur)?;
            match dirs.into_iter().find(|(n, _)| n == part) {
                Some((_, sub)) => cur = sub,
                None => return Ok(None),
            }
        }
        Ok(Some(cur))
    }

    fn size(&self, file: &str) -> u64 {
        self.repo
            .query_object_storage_size(lo::ObjectType::File, file, none())
            .unwrap_or(0)
    }

    /// (files, bytes rounded up to 4 KiB blocks) below a tree.
    fn sum_files(&self, tree: &str) -> Result<(u64, u64), OsError> {
        let (files, dirs) = self.list(tree)?;
        let mut count = files.len() as u64;
        let mut bytes: u64 = files
            .iter()
            .map(|(_, c)| self.size(c).div_ceil(4096) * 4096)
            .sum();
        for (_, sub) in &dirs {
            let (c, b) = self.sum_files(sub)?;
            count += c;
            bytes += b;
        }
        Ok((count, bytes))
    }

    /// The kernel libostree would deploy: the first `usr/lib/modules/<version>` with a
    /// `vmlinuz`.
    fn kernel(&self, tree: &str) -> Result<Option<Kernel>, OsError> {
        let Some(modules) = self.find(tree, &["usr", "lib", "modules"])? else {
            return Ok(None);
        };
        let (_, versions) = self.list(&modules)?;
        for (version, dir) in versions {
            let (files, _) = self.list(&dir)?;
            let pick = |name: &str| {
                files
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, c)| c.clone())
            };
            if let Some(vmlinuz) = pick("vmlinuz") {
                let mut found = vec![vmlinuz];
                found.extend(pick("initramfs.img"));
                let bytes = found.iter().map(|c| self.size(c)).sum();
                return Ok(Some(Kernel {
                    version,
                    files: found,
                    bytes,
                }));
            }
        }
        Ok(None)
    }
}
