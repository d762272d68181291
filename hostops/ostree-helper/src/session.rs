//! One opened sysroot on the worker thread ([`Session`]): opening and locking it, finding the
//! booted deployment (native or external), and reading deployments into the status, checked
//! against what the next boot must show. Also the origin keys a deployment's image is recorded
//! under, which staging, pruning and the status share.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ::ostree as lo;
use hearth_config::model::KernelType;
use lo::gio;
use lo::glib;

use hearth_hostops::os::paths::{display, inside};
use hearth_hostops::os::OsConfig;
use hearth_hostops::os::OsError;
use hearth_hostops::os::{cmdline_differences, compare_booted};
use hearth_hostops::os::{ContainerImage, ImageRef};
use hearth_hostops::os::{DeploymentId, DeploymentInfo, OsExpectation, OsStatus};

/// The origin key in which ostree-ext and rpm-ostree record a deployment's container image.
pub(crate) const ORIGIN_CONTAINER: &str = ostree_ext::container::deploy::ORIGIN_CONTAINER;

/// The origin-file group in which hearth records a deployment's image and kernel type.
pub const ORIGIN_GROUP: &str = "hearth";

/// The key of that group holding the digest of a container image's manifest.
pub const ORIGIN_IMAGE_DIGEST: &str = "image-digest";

/// Where libostree records a failed finalization, below `/boot`.
const FINALIZE_FAILURE_STAMP: &str = "/boot/ostree/finalize-failure.stamp";

/// How long a mutating call waits for libostree's sysroot lock.
const LOCK_TIMEOUT: Duration = Duration::from_secs(300);

/// `(st_dev, st_ino)` of a path.
fn dev_ino(path: &Path) -> Result<(u64, u64), OsError> {
    let m = std::fs::metadata(path).map_err(|e| OsError::io(path, e))?;
    Ok((m.dev(), m.ino()))
}

pub(crate) fn is_native(root: &Path) -> Result<bool, OsError> {
    Ok(dev_ino(root)? == dev_ino(Path::new("/"))?)
}

fn is_read_only(path: &Path) -> bool {
    nix::sys::statvfs::statvfs(path)
        .map(|st| st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false)
}

/// `ostree_sysroot_initialize_with_mount_namespace` (libostree 2022.7): the `ostree` crate 0.19
/// has the wrapper, but behind a feature (`v2022_7`) its Cargo.toml does not define; this is that
/// generated wrapper's body. libostree remounts `/sysroot` and `/boot` writable in a mount
/// namespace of the calling thread.
#[allow(unsafe_code)]
fn initialize_with_mount_namespace(sysroot: &lo::Sysroot) -> Result<(), glib::Error> {
    use glib::translate::{from_glib_full, ToGlibPtr};
    let mut error: *mut glib::ffi::GError = std::ptr::null_mut();
    // SAFETY: `sysroot.to_glib_none().0` borrows a valid `OstreeSysroot*` that `sysroot` keeps
    // alive for the whole call; a null `GCancellable*` is allowed (the parameter is `(nullable)`
    // in libostree 2022.7, and the symbol is the one `ostree` 0.20 called with the same
    // arguments); `error` is a null-initialised `GError**`, as GLib's error convention requires.
    let ok = unsafe {
        ostree_sys::ostree_sysroot_initialize_with_mount_namespace(
            sysroot.to_glib_none().0,
            std::ptr::null_mut(),
            &mut error,
        )
    };
    // GLib's convention, checked as the generated wrappers check it: FALSE exactly when an error
    // was set.
    assert_eq!(ok == glib::ffi::GFALSE, !error.is_null());
    if error.is_null() {
        Ok(())
    } else {
        // SAFETY: libostree set `error` to a new, non-null `GError` that the caller owns
        // (transfer full); `from_glib_full` takes that ownership exactly once.
        Err(unsafe { from_glib_full(error) })
    }
}

/// No cancellable: hearth does not cancel libostree calls.
pub(crate) fn none() -> Option<&'static gio::Cancellable> {
    gio::Cancellable::NONE
}

/// How the helper writes deployments: without libostree's clean-up afterwards, which removes
/// the boot version before the one written (`/ostree/boot.N/…`): with boot counting, the
/// entries on the ESP name those links until hearth's next sync puts the new ones there
/// (docs/os-layer.md, "Boot counting"). The clean-up runs with the pruning after a staging,
/// which the agent precedes with a sync (in external mode the staging itself writes the new
/// boot version first).
pub(crate) fn keep_old_boot_version() -> ::ostree::SysrootWriteDeploymentsOpts {
    ::ostree::SysrootWriteDeploymentsOpts {
        do_postclean: false,
    }
}

/// One opened sysroot on the worker thread.
pub(crate) struct Session {
    pub(crate) root: PathBuf,
    pub(crate) native: bool,
    pub(crate) sysroot: lo::Sysroot,
    pub(crate) repo: lo::Repo,
    pub(crate) booted: lo::Deployment,
    locked: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.locked {
            self.sysroot.unlock();
        }
    }
}

impl Session {
    pub(crate) fn open(root: &Path, write: bool) -> Result<Session, OsError> {
        let native = is_native(root)?;
        let sysroot = lo::Sysroot::new(Some(&gio::File::for_path(root)));
        let where_ = display(root);
        if native
            && write
            && (is_read_only(Path::new("/sysroot")) || is_read_only(Path::new("/boot")))
        {
            // libostree remounts them writable in a mount namespace of this thread.
            initialize_with_mount_namespace(&sysroot)
                .map_err(|e| OsError::ostree(format!("preparing the sysroot at {where_}"), e))?;
        }
        let mut locked = false;
        if write {
            // libostree's sysroot lock (`ostree admin` and rpm-ostree take it too): wait for it,
            // but not forever.
            let deadline = Instant::now() + LOCK_TIMEOUT;
            loop {
                let got = sysroot
                    .try_lock()
                    .map_err(|e| OsError::ostree(format!("locking the sysroot at {where_}"), e))?;
                if got {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(OsError::ostree(
                        format!("locking the sysroot at {where_}"),
                        format!(
                            "another process (ostree admin, rpm-ostree) has held the sysroot \
                             lock for {} s",
                            LOCK_TIMEOUT.as_secs()
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            locked = true;
        }
        let loaded = (|| {
            sysroot
                .load(none())
                .map_err(|e| OsError::ostree(format!("loading the sysroot at {where_}"), e))?;
            let repo = sysroot.repo();
            let booted = find_booted(&sysroot, root, native)?;
            Ok((repo, booted))
        })();
        let (repo, booted) = match loaded {
            Ok(v) => v,
            Err(e) => {
                if locked {
                    sysroot.unlock();
                }
                return Err(e);
            }
        };
        Ok(Session {
            root: root.to_path_buf(),
            native,
            sysroot,
            repo,
            booted,
            locked,
        })
    }

    pub(crate) fn reload(&self) -> Result<(), OsError> {
        self.sysroot.load(none()).map_err(|e| {
            OsError::ostree(
                format!("reloading the sysroot at {}", display(&self.root)),
                e,
            )
        })
    }

    pub(crate) fn id(d: &lo::Deployment) -> DeploymentId {
        DeploymentId {
            osname: d.osname().to_string(),
            checksum: d.csum().to_string(),
            serial: d.deployserial(),
        }
    }

    /// A deployment as the status reports it.
    pub(crate) fn info(&self, d: &lo::Deployment, config: &OsConfig) -> DeploymentInfo {
        let origin = d.origin();
        let get = |group: &str, key: &str| -> Option<String> {
            origin
                .as_ref()
                .and_then(|o| o.string(group, key).ok())
                .map(|s| s.to_string())
        };
        let container = get("origin", ORIGIN_CONTAINER);
        let refspec = get("origin", "refspec").or_else(|| container.clone());
        let checksum = d.csum().to_string();
        // The digest hearth recorded; for a container deployment made by another tool
        // (rpm-ostree, bootc, ostree container), the one ostree-ext recorded in the repository.
        let image_digest = get(ORIGIN_GROUP, ORIGIN_IMAGE_DIGEST).or_else(|| {
            container.as_ref().and_then(|_| {
                ostree_ext::container::store::query_image_commit(&self.repo, &checksum)
                    .ok()
                    .map(|state| state.manifest_digest.to_string())
            })
        });
        let (image, kernel_type) = match get(ORIGIN_GROUP, "image") {
            Some(image) => (
                image,
                get(ORIGIN_GROUP, "kernel-type")
                    .and_then(|k| KernelType::parse(&k))
                    .unwrap_or_default(),
            ),
            None => match (&container, &refspec) {
                (Some(c), _) => (
                    ContainerImage::parse(c)
                        .and_then(Result::ok)
                        .map_or_else(|| c.clone(), |i| i.to_string()),
                    KernelType::Default,
                ),
                (None, Some(rs)) => {
                    let r = rs.split_once(':').map(|(_, r)| r).unwrap_or(rs);
                    match ImageRef::parse(r) {
                        Ok(ImageRef::Ref(r)) => config.split_ref(&r),
                        _ => (r.to_string(), KernelType::Default),
                    }
                }
                (None, None) => (checksum.clone(), KernelType::Default),
            },
        };
        let options = d
            .bootconfig()
            .and_then(|b| b.get("options"))
            .map(|o| o.to_string())
            .unwrap_or_default();
        let kernel_args = hearth_config::plan::split_kernel_arguments(&[options])
            .into_iter()
            .filter(|a| !a.starts_with("ostree="))
            .collect();
        DeploymentInfo {
            id: Self::id(d),
            index: d.index(),
            boot_checksum: d.bootcsum().to_string(),
            refspec,
            version: commit_version(&self.repo, &checksum),
            image,
            image_digest,
            kernel_type,
            kernel_args,
            booted: d.equal(&self.booted),
            staged: d.is_staged(),
            pinned: d.is_pinned(),
        }
    }

    pub(crate) fn status(&self, config: &OsConfig) -> Result<OsStatus, OsError> {
        let all = self.sysroot.deployments();
        let infos: Vec<DeploymentInfo> = all.iter().map(|d| self.info(d, config)).collect();
        let booted_pos = all.iter().position(|d| d.equal(&self.booted)).unwrap_or(0);
        let osname = self.booted.osname();
        let pending = all[..booted_pos]
            .iter()
            .position(|d| d.osname() == osname)
            .map(|i| infos[i].clone());
        let rollback = all
            .iter()
            .enumerate()
            .skip(booted_pos + 1)
            .find(|(_, d)| d.osname() == osname)
            .map(|(i, _)| infos[i].clone());
        Ok(OsStatus {
            backend: "ostree".into(),
            sysroot: display(&self.root),
            native: self.native,
            booted: infos[booted_pos].clone(),
            pending,
            rollback,
            deployments: infos,
        })
    }

    pub(crate) fn verify_booted(
        &self,
        config: &OsConfig,
        expected: &OsExpectation,
    ) -> Result<Vec<String>, OsError> {
        let booted = self.info(&self.booted, config);
        let mut out = compare_booted(&booted, expected);
        if let Some(want) = &expected.deployment {
            if *want != booted.id {
                if let Some(staged) = self.sysroot.staged_deployment() {
                    if Self::id(&staged) == *want {
                        out.push(format!(
                            "the deployment {want} is still staged: the host has not rebooted \
                             since it was staged (or ostree-finalize-staged.service did not run \
                             at shutdown)"
                        ));
                    }
                }
                let stamp = inside(&self.root, FINALIZE_FAILURE_STAMP);
                if let Ok(msg) = std::fs::read_to_string(&stamp) {
                    out.push(format!(
                        "ostree-finalize-staged.service failed at the last shutdown: {}",
                        msg.trim()
                    ));
                }
            }
        }
        out.extend(cmdline_differences(&self.root, expected));
        Ok(out)
    }
}

/// The booted deployment: libostree's in native mode; in external mode the deployment whose
/// directory has the root's device and inode (libostree's own rule, applied to the root).
fn find_booted(
    sysroot: &lo::Sysroot,
    root: &Path,
    native: bool,
) -> Result<lo::Deployment, OsError> {
    let sysroot_name = display(root);
    if native {
        return sysroot
            .booted_deployment()
            .ok_or_else(|| OsError::NotBooted {
                sysroot: sysroot_name,
                reason: "libostree found no deployment that is / (is /run/ostree-booted stale?)"
                    .into(),
            });
    }
    let want = dev_ino(root)?;
    let deployments = sysroot.deployments();
    for d in &deployments {
        let dir = root.join(sysroot.deployment_dirpath(d).as_str());
        if dev_ino(&dir).ok() == Some(want) {
            return Ok(d.clone());
        }
    }
    Err(OsError::NotBooted {
        sysroot: sysroot_name,
        reason: format!(
            "none of its {} deployment directories is the root directory",
            deployments.len()
        ),
    })
}

/// The `version` metadata of a commit.
fn commit_version(repo: &lo::Repo, csum: &str) -> Option<String> {
    let (commit, _) = repo.load_commit(csum).ok()?;
    let meta = commit.child_value(0);
    glib::VariantDict::new(Some(&meta))
        .lookup::<String>("version")
        .ok()
        .flatten()
}
