//! The libostree backend (`ostree` crate, libostree 2022.7 on Debian 12).
//!
//! ## Native and external
//!
//! The sysroot is opened **at the root** (`/` in production), exactly as `ostree admin` does
//! on a booted system: `<root>/ostree` is the deployment's link to `sysroot/ostree`,
//! `<root>/boot` is `/boot`. Two cases:
//!
//! - **native**: the root is this process's `/` (hearth runs on the booted host). libostree
//!   itself finds the booted deployment (`/run/ostree-booted` and the device and inode of `/`),
//!   and [`OstreeBackend::stage`] *stages* the new deployment (`stage_tree`): it is written to
//!   the sysroot now and finalized at shutdown by `ostree-finalize-staged.service` (bootloader
//!   entries, and the `/etc` merge as `/etc` is then). This is the production path.
//! - **external**: the root is another host's root seen from outside (in tests the live root of
//!   a container, `/proc/<pid>/root`). libostree does not consider such a sysroot booted and
//!   cannot stage for it, so hearth finds the booted deployment itself, with libostree's own
//!   rule (the deployment directory with the root's device and inode), and *writes* the new
//!   deployment as the default right away (`deploy_tree` + `write_deployments`, keeping the
//!   booted deployment, pinned ones and other stateroots, as `simple_write_deployment` does).
//!
//! ## Threads
//!
//! libostree's types are not `Send`: every operation runs on a thread of its own (a new OS
//! thread per call, awaited through a oneshot channel) that opens the sysroot, does the work and
//! drops everything. Not the tokio blocking pool: on a host whose `/sysroot` is mounted
//! read-only (Fedora CoreOS), libostree unshares the calling thread's mount namespace to remount
//! it writable, and that must not leak into a pooled thread that later writes the agent's files.
//! Mutating calls take libostree's sysroot lock (the one `ostree admin` takes).
//!
//! One operation at a time per process: the worker holds a process-wide mutex. The agent never
//! runs two anyway; the tests, which drive many sysroots from one process in parallel, once hit
//! a GLib assertion (`g_hash_table_lookup: assertion 'hash_table != NULL' failed`) followed by a
//! crash while libostree operations on different sysroots ran at the same time (once in nine
//! runs of the suite), and none in the six runs since the operations are serialized.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

use ::ostree as lo;
use hearth_config::model::KernelType;
use lo::gio;
use lo::glib;
use tracing::{debug, info};

use super::ledger::{plan_kernel_args, KargLedger, LEDGER_PATH};
use super::{
    compare_booted, display, human_bytes, inside, DeploymentId, DeploymentInfo, Finalization,
    ImageRef, OsChange, OsConfig, OsError, OsExpectation, OsStatus, RemoteConfig, RollbackOutcome,
    SpaceCheck, StagedDeployment,
};

/// The origin-file group in which hearth records a deployment's image and kernel type.
pub const ORIGIN_GROUP: &str = "hearth";

/// Where libostree records a failed finalization, below `/boot`.
const FINALIZE_FAILURE_STAMP: &str = "/boot/ostree/finalize-failure.stamp";

/// Bytes a directory costs on disk (one block).
const DIR_BYTES: u64 = 4096;

/// How long a mutating call waits for libostree's sysroot lock.
const LOCK_TIMEOUT: Duration = Duration::from_secs(300);

/// The libostree backend for the host at a root.
#[derive(Debug, Clone)]
pub struct OstreeBackend {
    root: PathBuf,
    config: OsConfig,
}

impl OstreeBackend {
    /// The backend for the sysroot at `root` (see the module documentation).
    pub fn new(root: &Path, config: OsConfig) -> OstreeBackend {
        OstreeBackend {
            root: root.to_path_buf(),
            config,
        }
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configuration.
    pub fn config(&self) -> &OsConfig {
        &self.config
    }

    /// Whether the root is this process's `/` (staging available), see the module docs.
    pub fn is_native(&self) -> Result<bool, OsError> {
        is_native(&self.root)
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        let (root, config) = (self.root.clone(), self.config.clone());
        on_worker(move || {
            let s = Session::open(&root, false)?;
            s.status(&config)
        })
        .await
    }

    /// Stages one new deployment carrying the whole change.
    pub async fn stage(&self, change: &OsChange) -> Result<StagedDeployment, OsError> {
        let (root, config, change) = (self.root.clone(), self.config.clone(), change.clone());
        on_worker(move || {
            let s = Session::open(&root, true)?;
            s.stage(&config, &change)
        })
        .await
    }

    /// The differences between the booted deployment and `expected`.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        let (root, config, expected) = (self.root.clone(), self.config.clone(), expected.clone());
        on_worker(move || {
            let s = Session::open(&root, false)?;
            s.verify_booted(&config, &expected)
        })
        .await
    }

    /// Makes the previous deployment the default at the next boot, or drops a pending one.
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        let (root, config) = (self.root.clone(), self.config.clone());
        on_worker(move || {
            let s = Session::open(&root, true)?;
            s.rollback(&config)
        })
        .await
    }

    /// Records kernel arguments of the booted deployment as hearth's (see
    /// [`OsBackend::adopt_kernel_arguments`](super::OsBackend::adopt_kernel_arguments)).
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        let (root, config, kargs) = (self.root.clone(), self.config.clone(), kargs.to_vec());
        on_worker(move || {
            let s = Session::open(&root, true)?;
            let booted = s.info(&s.booted, &config);
            let ledger = KargLedger::new(&root);
            let mut file = ledger.load()?;
            let mut owned = file.hearth_added(&booted.kernel_args);
            for arg in &kargs {
                let have = owned.iter().filter(|a| *a == arg).count();
                let present = booted.kernel_args.iter().filter(|a| *a == arg).count();
                if have < present {
                    owned.push(arg.clone());
                }
            }
            file.record(&booted.kernel_args, &owned);
            ledger.store(&file)?;
            Ok(file.hearth_added(&booted.kernel_args))
        })
        .await
    }
}

/// Held by the worker thread for the duration of each operation.
static LIBOSTREE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on a new thread and awaits its result.
async fn on_worker<T, F>(f: F) -> Result<T, OsError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, OsError> + Send + 'static,
{
    route_glib_output();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("hearth-ostree".into())
        .spawn(move || {
            // One libostree operation at a time in this process (see the module docs).
            let _serial = LIBOSTREE.lock().unwrap_or_else(|e| e.into_inner());
            let _ = tx.send(f());
        })
        .map_err(|e| OsError::Worker(format!("spawning a thread: {e}")))?;
    rx.await
        .map_err(|_| OsError::Worker("the thread panicked".into()))?
}

/// libostree prints notes with `g_print`/`g_printerr` ("note: Deploying commit ... which
/// contains content in /var/log that will be ignored"): send them to the log instead of the
/// agent's standard output.
fn route_glib_output() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        glib::set_print_handler(|msg| info!(target: "libostree", "{}", msg.trim_end()));
        glib::set_printerr_handler(|msg| info!(target: "libostree", "{}", msg.trim_end()));
    });
}

/// `(st_dev, st_ino)` of a path.
fn dev_ino(path: &Path) -> Result<(u64, u64), OsError> {
    let m = std::fs::metadata(path).map_err(|e| OsError::io(path, e))?;
    Ok((m.dev(), m.ino()))
}

fn is_native(root: &Path) -> Result<bool, OsError> {
    Ok(dev_ino(root)? == dev_ino(Path::new("/"))?)
}

/// `statvfs`: (bytes available to unprivileged users, inodes available, inodes total).
fn free_space(path: &Path) -> Result<(u64, u64, u64), OsError> {
    let st = nix::sys::statvfs::statvfs(path).map_err(|e| OsError::io(path, e))?;
    Ok((
        st.blocks_available() as u64 * st.fragment_size() as u64,
        st.files_available() as u64,
        st.files() as u64,
    ))
}

fn is_read_only(path: &Path) -> bool {
    nix::sys::statvfs::statvfs(path)
        .map(|st| st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false)
}

fn none() -> Option<&'static gio::Cancellable> {
    gio::Cancellable::NONE
}

/// One opened sysroot on the worker thread.
struct Session {
    root: PathBuf,
    native: bool,
    sysroot: lo::Sysroot,
    repo: lo::Repo,
    booted: lo::Deployment,
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
    fn open(root: &Path, write: bool) -> Result<Session, OsError> {
        let native = is_native(root)?;
        let sysroot = lo::Sysroot::new(Some(&gio::File::for_path(root)));
        let where_ = display(root);
        if native
            && write
            && (is_read_only(Path::new("/sysroot")) || is_read_only(Path::new("/boot")))
        {
            // libostree remounts them writable in a mount namespace of this thread.
            sysroot
                .initialize_with_mount_namespace(none())
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

    fn reload(&self) -> Result<(), OsError> {
        self.sysroot.load(none()).map_err(|e| {
            OsError::ostree(
                format!("reloading the sysroot at {}", display(&self.root)),
                e,
            )
        })
    }

    fn id(d: &lo::Deployment) -> DeploymentId {
        DeploymentId {
            osname: d.osname().to_string(),
            checksum: d.csum().to_string(),
            serial: d.deployserial(),
        }
    }

    /// A deployment as the status reports it.
    fn info(&self, d: &lo::Deployment, config: &OsConfig) -> DeploymentInfo {
        let origin = d.origin();
        let get = |group: &str, key: &str| -> Option<String> {
            origin
                .as_ref()
                .and_then(|o| o.string(group, key).ok())
                .map(|s| s.to_string())
        };
        let refspec = get("origin", "refspec");
        let checksum = d.csum().to_string();
        let (image, kernel_type) = match get(ORIGIN_GROUP, "image") {
            Some(image) => (
                image,
                get(ORIGIN_GROUP, "kernel-type")
                    .and_then(|k| KernelType::parse(&k))
                    .unwrap_or_default(),
            ),
            None => match &refspec {
                Some(rs) => {
                    let r = rs.split_once(':').map(|(_, r)| r).unwrap_or(rs);
                    match ImageRef::parse(r) {
                        Ok(ImageRef::Ref(r)) => config.split_ref(&r),
                        _ => (r.to_string(), KernelType::Default),
                    }
                }
                None => (checksum.clone(), KernelType::Default),
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
            kernel_type,
            kernel_args,
            booted: d.equal(&self.booted),
            staged: d.is_staged(),
            pinned: d.is_pinned(),
        }
    }

    fn status(&self, config: &OsConfig) -> Result<OsStatus, OsError> {
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

    fn verify_booted(
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
        out.extend(super::cmdline_differences(&self.root, expected));
        Ok(out)
    }

    /// Pulls or resolves the target.
    fn fetch(&self, config: &OsConfig, target: &ImageRef) -> Result<Fetched, OsError> {
        let repo_path = inside(&self.root, "/ostree/repo");
        let repo_name = display(&repo_path);
        let local = |rev: &str| -> Result<Option<String>, OsError> {
            self.repo
                .resolve_rev(rev, true)
                .map(|o| o.map(|s| s.to_string()))
                .map_err(|e| OsError::ostree(format!("resolving {rev} in {repo_name}"), e))
        };
        let complete = |csum: &str| -> bool {
            matches!(self.repo.load_commit(csum), Ok((_, state)) if !state.contains(lo::RepoCommitState::PARTIAL))
        };
        let Some(remote) = &config.remote else {
            let why = "no remote is configured to pull it from (\"remote\" in /etc/hearth/os.json)";
            return match target {
                ImageRef::Ref(r) => match local(r)? {
                    Some(csum) if complete(&csum) => Ok(Fetched::local(csum, Some(r.clone()))),
                    _ => Err(OsError::NotFound {
                        reference: target.to_string(),
                        repo: repo_name,
                        why: why.into(),
                    }),
                },
                ImageRef::Commit(c) if complete(c) => Ok(Fetched::local(c.clone(), None)),
                ImageRef::Commit(_) => Err(OsError::NotFound {
                    reference: target.to_string(),
                    repo: repo_name,
                    why: why.into(),
                }),
            };
        };
        if let ImageRef::Commit(c) = target {
            if complete(c) {
                return Ok(Fetched::local(c.clone(), None));
            }
        }
        let url = self.ensure_remote(remote)?;
        let token = match &remote.bearer_token_file {
            Some(file) => {
                let path = inside(&self.root, file);
                let token = std::fs::read_to_string(&path).map_err(|e| OsError::Config {
                    source_name: super::CONFIG_PATH.into(),
                    message: format!(
                        "remote.bearerTokenFile {}: {e} (the agent writes it when it enrolls \
                         with hearth-server)",
                        display(&path)
                    ),
                })?;
                Some(token.trim().to_string())
            }
            None => None,
        };
        let pull = |what: &str, flags: lo::RepoPullFlags| -> Result<(), OsError> {
            debug!(remote = %remote.name, what, ?flags, "pulling");
            let opts = glib::VariantDict::new(None);
            opts.insert_value("refs", &glib::Variant::from(vec![what.to_string()]));
            opts.insert("flags", flags.bits() as i32);
            if let Some(token) = &token {
                let headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
                opts.insert_value("http-headers", &glib::Variant::from(headers));
            }
            self.repo
                .pull_with_options(&remote.name, &opts.end(), None, none())
                .map_err(|e| OsError::Pull {
                    remote: remote.name.clone(),
                    url: url.clone(),
                    reference: what.to_string(),
                    cause: e.to_string(),
                })
        };
        // The commit object first: its size metadata says how much the pull will write.
        pull(target.as_str(), lo::RepoPullFlags::COMMIT_ONLY)?;
        let (csum, refspec) = match target {
            ImageRef::Ref(r) => {
                let refspec = format!("{}:{r}", remote.name);
                let csum = local(&refspec)?.ok_or_else(|| OsError::NotFound {
                    reference: target.to_string(),
                    repo: repo_name.clone(),
                    why: format!("remote {} did not provide it", remote.name),
                })?;
                (csum, Some(refspec))
            }
            ImageRef::Commit(c) => (c.clone(), None),
        };
        let check = self.pull_space(config, &csum, target)?;
        pull(&csum, lo::RepoPullFlags::NONE)?;
        if let ImageRef::Ref(r) = target {
            self.repo
                .set_ref_immediate(Some(&remote.name), r, Some(&csum), none())
                .map_err(|e| {
                    OsError::ostree(format!("setting ref {}:{r} to {csum}", remote.name), e)
                })?;
        }
        let pulled = format!("{} ({csum})", refspec.as_deref().unwrap_or(&csum));
        info!(pulled, "pulled the OS image");
        Ok(Fetched {
            commit: csum,
            refspec,
            pulled: Some(pulled),
            space: vec![check],
        })
    }

    /// Adds the remote or updates its URL; returns the URL.
    fn ensure_remote(&self, remote: &RemoteConfig) -> Result<String, OsError> {
        let existing = self
            .repo
            .remote_get_url(&remote.name)
            .ok()
            .map(|u| u.to_string());
        let Some(url) = &remote.url else {
            return existing.ok_or_else(|| OsError::Config {
                source_name: super::CONFIG_PATH.into(),
                message: format!(
                    "remote {} has no url and the sysroot's repository does not know it",
                    remote.name
                ),
            });
        };
        let gpg = self.repo.remote_get_gpg_verify(&remote.name).ok();
        let ca = self
            .repo
            .remote_option(&remote.name, "tls-ca-path", None)
            .ok()
            .flatten()
            .map(|s| s.to_string());
        let want_ca = remote
            .tls_ca_path
            .as_ref()
            .map(|p| display(&inside(&self.root, p)));
        if existing.as_deref() == Some(url.as_str())
            && gpg == Some(remote.gpg_verify)
            && ca == want_ca
        {
            return Ok(url.clone());
        }
        let opts = glib::VariantDict::new(None);
        opts.insert("gpg-verify", remote.gpg_verify);
        if let Some(ca) = &want_ca {
            opts.insert("tls-ca-path", ca.as_str());
        }
        let change = if existing.is_some() {
            lo::RepoRemoteChange::Replace
        } else {
            lo::RepoRemoteChange::Add
        };
        self.repo
            .remote_change(
                None::<&gio::File>,
                change,
                &remote.name,
                Some(url),
                Some(&opts.end()),
                none(),
            )
            .map_err(|e| {
                OsError::ostree(format!("configuring remote {} ({url})", remote.name), e)
            })?;
        Ok(url.clone())
    }

    /// Checks the sysroot's free space for the objects a pull of `csum` will write (from the
    /// commit's `ostree.sizes` metadata).
    fn pull_space(
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
    fn deploy_space(
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

    fn stage(&self, config: &OsConfig, change: &OsChange) -> Result<StagedDeployment, OsError> {
        let booted = self.info(&self.booted, config);
        let osname = booted.id.osname.clone();
        let current_image = ImageRef::parse(&booted.image)
            .unwrap_or_else(|_| ImageRef::Commit(booted.id.checksum.clone()));
        let image = match &change.os_image {
            Some(i) => ImageRef::parse(i)?,
            None => current_image.clone(),
        };
        let kernel_type = change
            .kernel_type
            .map(|(_, to)| to)
            .unwrap_or(booted.kernel_type);
        let moves = image != current_image || kernel_type != booted.kernel_type;
        info!(
            booted = %booted.describe(),
            change = %change,
            image = %image,
            kernel_type = %kernel_type,
            native = self.native,
            "staging an OS change"
        );

        // 1. The commit to deploy.
        let t0 = Instant::now();
        let (revision, refspec, pulled, mut space, target) = if moves {
            let target = config.ref_for(&image, kernel_type)?;
            let f = self.fetch(config, &target)?;
            (f.commit, f.refspec, f.pulled, f.space, target.to_string())
        } else {
            (
                booted.id.checksum.clone(),
                booted.refspec.clone(),
                None,
                Vec::new(),
                format!("commit {} (the booted commit)", booted.id.checksum),
            )
        };

        let t_fetch = t0.elapsed();
        // 2. Kernel arguments, under the ledger.
        let ledger = KargLedger::new(&self.root);
        let mut ledger_file = ledger.load()?;
        let owned = ledger_file.hearth_added(&booted.kernel_args);
        let plan = plan_kernel_args(
            &booted.kernel_args,
            &owned,
            &change.kargs_delete,
            &change.kargs_append,
            LEDGER_PATH,
        );
        for s in &plan.skipped {
            info!(argument = %s.argument, "kernel argument not deleted: {}", s.reason);
        }

        // 3. Space for the deployment and its kernel.
        let t1 = Instant::now();
        space.extend(self.deploy_space(config, &revision, &target)?);

        let t_space = t1.elapsed();
        // 4. The ledger, before the deployment exists (see ledger.rs).
        let t2 = Instant::now();
        ledger_file.record(&booted.kernel_args, &owned);
        ledger_file.record(&plan.kernel_args, &plan.hearth_added);
        ledger.store(&ledger_file)?;

        let t_ledger = t2.elapsed();
        // 5. The origin: a copy of the booted one when the commit stays, else a new one.
        let origin = if moves {
            let spec = refspec.clone().unwrap_or_else(|| revision.clone());
            self.sysroot.origin_new_from_refspec(&spec)
        } else {
            let copy = glib::KeyFile::new();
            if let Some(o) = self.booted.origin() {
                copy.load_from_data(&o.to_data(), glib::KeyFileFlags::KEEP_COMMENTS)
                    .map_err(|e| {
                        OsError::ostree(format!("copying the origin of {}", booted.id), e)
                    })?;
                lo::Deployment::origin_remove_transient_state(&copy);
            } else {
                copy.set_string("origin", "refspec", &revision);
            }
            copy
        };
        origin.set_string(ORIGIN_GROUP, "image", image.as_str());
        origin.set_string(ORIGIN_GROUP, "kernel-type", kernel_type.as_str());

        // 6. Stage (native) or write (external).
        let t3 = Instant::now();
        let kargs: Vec<&str> = plan.kernel_args.iter().map(String::as_str).collect();
        let opts = lo::SysrootDeployTreeOpts {
            override_kernel_argv: Some(&kargs),
            ..Default::default()
        };
        let what = format!("deploying {target} in stateroot {osname}");
        let (new_id, finalization) = if self.native {
            let new = self
                .sysroot
                .stage_tree_with_options(
                    Some(&osname),
                    &revision,
                    Some(&origin),
                    Some(&self.booted),
                    &opts,
                    none(),
                )
                .map_err(|e| OsError::ostree(format!("staging: {what}"), e))?;
            (Self::id(&new), Finalization::AtShutdown)
        } else {
            let new = self
                .sysroot
                .deploy_tree_with_options(
                    Some(&osname),
                    &revision,
                    Some(&origin),
                    Some(&self.booted),
                    Some(&opts),
                    none(),
                )
                .map_err(|e| OsError::ostree(what.clone(), e))?;
            let mut list = vec![new.clone()];
            for d in self.sysroot.deployments() {
                if d.equal(&self.booted) || d.is_pinned() || d.osname() != osname {
                    list.push(d);
                }
            }
            self.sysroot
                .write_deployments(&list, none())
                .map_err(|e| OsError::ostree(format!("writing the deployments after {what}"), e))?;
            (Self::id(&new), Finalization::Written)
        };
        let t_deploy = t3.elapsed();
        self.reload()?;
        let new = self
            .sysroot
            .deployments()
            .into_iter()
            .find(|d| Self::id(d) == new_id)
            .ok_or_else(|| {
                OsError::ostree(
                    what,
                    format!("deployment {new_id} is not in the sysroot after it was written"),
                )
            })?;
        let deployment = self.info(&new, config);
        info!(
            deployment = %deployment.describe(),
            ?finalization,
            fetch_ms = t_fetch.as_millis() as u64,
            space_check_ms = t_space.as_millis() as u64,
            ledger_ms = t_ledger.as_millis() as u64,
            libostree_deploy_ms = t_deploy.as_millis() as u64,
            total_ms = t0.elapsed().as_millis() as u64,
            "OS change staged"
        );
        Ok(StagedDeployment {
            deployment,
            from: booted.id,
            finalization,
            skipped_deletes: plan.skipped,
            pulled,
            space,
        })
    }

    fn rollback(&self, config: &OsConfig) -> Result<RollbackOutcome, OsError> {
        let all = self.sysroot.deployments();
        let booted_id = Self::id(&self.booted);
        let osname = self.booted.osname();
        let write = |list: Vec<lo::Deployment>, what: &str| -> Result<(), OsError> {
            self.sysroot
                .write_deployments(&list, none())
                .map_err(|e| OsError::ostree(what.to_string(), e))?;
            self.reload()
        };
        if let Some(staged) = self.sysroot.staged_deployment() {
            let dropped = Self::id(&staged);
            let list: Vec<lo::Deployment> = all.into_iter().filter(|d| !d.is_staged()).collect();
            write(list, &format!("dropping the staged deployment {dropped}"))?;
            info!(%dropped, "staged deployment dropped");
            return Ok(RollbackOutcome::CancelledPending { dropped });
        }
        let booted_pos = all
            .iter()
            .position(|d| d.equal(&self.booted))
            .ok_or_else(|| {
                OsError::NoRollback(format!(
                    "booted deployment {booted_id} is not in the deployment list"
                ))
            })?;
        if let Some(pending) = all[..booted_pos].iter().find(|d| d.osname() == osname) {
            let dropped = Self::id(pending);
            let list: Vec<lo::Deployment> = all
                .iter()
                .filter(|d| !(d.osname() == osname && d.index() < booted_pos as i32))
                .cloned()
                .collect();
            write(list, &format!("dropping the pending deployment {dropped}"))?;
            info!(%dropped, "pending deployment dropped");
            return Ok(RollbackOutcome::CancelledPending { dropped });
        }
        let Some(previous) = all[booted_pos + 1..]
            .iter()
            .find(|d| d.osname() == osname)
            .cloned()
        else {
            return Err(OsError::NoRollback(format!(
                "the booted deployment {} is the only deployment of stateroot {osname}",
                self.info(&self.booted, config).describe()
            )));
        };
        let to = Self::id(&previous);
        let mut list = vec![previous.clone()];
        list.extend(all.iter().filter(|d| !d.equal(&previous)).cloned());
        write(list, &format!("making {to} the default deployment"))?;
        info!(from = %booted_id, %to, "rolled back");
        Ok(RollbackOutcome::RolledBack {
            from: booted_id,
            to,
        })
    }
}

/// What [`Session::fetch`] found or pulled.
struct Fetched {
    /// The commit to deploy.
    commit: String,
    /// The refspec for the new deployment's origin (`remote:ref`, or a local ref).
    refspec: Option<String>,
    /// What was pulled, for the report.
    pulled: Option<String>,
    /// The space checks done before pulling.
    space: Vec<SpaceCheck>,
}

impl Fetched {
    fn local(commit: String, refspec: Option<String>) -> Fetched {
        Fetched {
            commit,
            refspec,
            pulled: None,
            space: Vec::new(),
        }
    }
}

/// Fails with [`OsError::InsufficientSpace`] when the check does not pass.
fn space_ok(check: &SpaceCheck, target: &str) -> Result<(), OsError> {
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
