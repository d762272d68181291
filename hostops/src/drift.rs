//! A drift monitor: notices within a second when someone changes a file hearth manages, and
//! reports it, puts it back, or lets it be.
//!
//! [`DriftMonitor`] watches, with inotify, the parent directory of every managed path (not the
//! files: an atomic replace makes a new inode) for `CLOSE_WRITE`, `MOVED_TO`, `MOVED_FROM`,
//! `DELETE`, `ATTRIB` and `CREATE`. An event for a managed name marks it for a re-check; after the
//! burst settles (editors write in several steps: 50 ms of quiet, at most 500 ms), each marked
//! path is compared with what it should be (sha256 of the content, mode, and owner if given) and
//! a difference becomes a [`DriftEvent`], according to the path's [`DriftPolicy`]:
//!
//! * [`DriftPolicy::Report`] (the default, as the MCO, which marks the node degraded): the event
//!   says what changed, e.g. `content changed: expected sha256 …, found …`, `mode changed:
//!   expected 0644, found 0600`, `deleted`. The same drifted state is reported once;
//! * [`DriftPolicy::Revert`]: the expected bytes are written back atomically with the expected
//!   mode and owner, and the event says so (`…; reverted`, [`DriftEvent::reverted`]);
//! * [`DriftPolicy::Ignore`]: not watched, never reported.
//!
//! Because the monitor re-checks content instead of trusting events, writes that leave a file as
//! expected produce nothing: its own reverts, and hearth's own applies once the expectations are
//! updated. hearth's temporary files (`.hearth-tmp-*`) are ignored. Around an apply, use the
//! [`DriftControl`] handle from another thread: [`DriftControl::pause`] (returns once no check
//! is running; while paused, events are drained and dropped), apply, then
//! [`DriftControl::set_expected`] with the new managed paths and [`DriftControl::resume`], which
//! re-checks every managed path.
//!
//! Watches are made on the directory as resolved inside the root (`openat2` with
//! `RESOLVE_BENEATH`, then the watch on `/proc/self/fd/N`), so a link cannot make hearth watch
//! something outside the root. A watched directory that is deleted or moved is watched again as
//! soon as it exists again (checked every 200 ms while waiting).
//!
//! The API is blocking ([`DriftMonitor::next_event`] with a timeout): run it on a thread of its
//! own or in `spawn_blocking`.

use crate::fs::{self, EntryKind, FsError};
use crate::passwd::{Db, PasswdError};
use crate::verify::{expected_file_content, expected_file_mode, mode_str, sha256_hex};
use hearth_config::ignition::Config;
use hearth_config::paths::Written;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const TMP_PREFIX: &str = ".hearth-tmp-";
/// The longest a wait for events sleeps before looking at controls and lost watches.
const SLICE: Duration = Duration::from_millis(200);
/// Quiet time that ends a burst of events.
const SETTLE_QUIET: Duration = Duration::from_millis(50);
/// The longest a burst is collected before checking.
const SETTLE_MAX: Duration = Duration::from_millis(500);

/// What to do when a managed path drifts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftPolicy {
    /// Report it (the MCO's behaviour).
    #[default]
    Report,
    /// Write the expected content, mode and owner back, and report that.
    Revert,
    /// Neither watch nor report.
    Ignore,
}

/// A path the monitor watches, with what it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedPath {
    /// Absolute path inside the root.
    pub path: String,
    /// sha256 (hex) of the expected content.
    pub expected_sha256: String,
    /// Expected permission bits.
    pub mode: u32,
    /// Expected owner; `None`: not checked (and root when reverting).
    pub owner: Option<(u32, u32)>,
    /// What to do on drift.
    pub policy: DriftPolicy,
    /// The expected bytes: needed for [`DriftPolicy::Revert`].
    pub content: Option<Arc<[u8]>>,
}

impl ManagedPath {
    /// A managed path with its expected bytes (revertible).
    pub fn new(
        path: impl Into<String>,
        content: impl Into<Vec<u8>>,
        mode: u32,
        owner: Option<(u32, u32)>,
        policy: DriftPolicy,
    ) -> ManagedPath {
        let content: Vec<u8> = content.into();
        ManagedPath {
            path: path.into(),
            expected_sha256: sha256_hex(&content),
            mode: mode & 0o7777,
            owner,
            policy,
            content: Some(content.into()),
        }
    }

    /// A managed path known by hash only (it can be reported, not reverted).
    pub fn from_hash(
        path: impl Into<String>,
        expected_sha256: impl Into<String>,
        mode: u32,
        policy: DriftPolicy,
    ) -> ManagedPath {
        ManagedPath {
            path: path.into(),
            expected_sha256: expected_sha256.into(),
            mode: mode & 0o7777,
            owner: None,
            policy,
            content: None,
        }
    }

    fn parent_and_name(&self) -> (String, String) {
        match self.path.rsplit_once('/') {
            Some(("", name)) => ("/".to_string(), name.to_string()),
            Some((dir, name)) => (dir.to_string(), name.to_string()),
            None => ("/".to_string(), self.path.clone()),
        }
    }
}

/// One difference found on a managed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum DriftChange {
    /// The path no longer exists.
    Deleted,
    /// It is no longer a regular file.
    NotAFile {
        /// What it is: `a directory`, `a symbolic link`, `a special file`.
        found: String,
    },
    /// Content differs.
    Content {
        /// sha256 expected.
        expected_sha256: String,
        /// sha256 found.
        found_sha256: String,
    },
    /// Mode differs.
    Mode {
        /// Expected mode (`0644`).
        expected: String,
        /// Found mode.
        found: String,
    },
    /// Owner differs.
    Owner {
        /// Expected `uid:gid`.
        expected: String,
        /// Found `uid:gid`.
        found: String,
    },
}

impl DriftChange {
    /// `content changed: expected sha256 …, found …`, `deleted`, ...
    pub fn describe(&self) -> String {
        match self {
            DriftChange::Deleted => "deleted".into(),
            DriftChange::NotAFile { found } => format!("replaced by {found}"),
            DriftChange::Content {
                expected_sha256,
                found_sha256,
            } => {
                format!("content changed: expected sha256 {expected_sha256}, found {found_sha256}")
            }
            DriftChange::Mode { expected, found } => {
                format!("mode changed: expected {expected}, found {found}")
            }
            DriftChange::Owner { expected, found } => {
                format!("owner changed: expected {expected}, found {found}")
            }
        }
    }
}

/// A managed path that drifted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftEvent {
    /// The path (inside the root).
    pub path: String,
    /// For people: the changes, `; `-separated, then `; reverted` or `; revert failed: …`.
    pub what: String,
    /// The changes found.
    pub changes: Vec<DriftChange>,
    /// True when the expected state was written back.
    pub reverted: bool,
}

/// What went wrong in the monitor itself.
#[derive(Debug, thiserror::Error)]
pub enum DriftError {
    /// inotify failed.
    #[error("inotify: {op}: {errno}")]
    Inotify {
        /// The operation.
        op: &'static str,
        /// The error.
        errno: Errno,
    },
    /// Opening the root failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// Resolving an owner failed.
    #[error(transparent)]
    Passwd(#[from] PasswdError),
    /// A file's expected content cannot be known.
    #[error("{0}")]
    Content(String),
}

/// Managed paths for everything `config` writes: `storage.files` (not those with `append`, nor
/// those whose source is not a `data:` URL), unit files of units that are not masked, and
/// drop-ins with contents; all with their expected bytes, mode and owner, under `policy`.
pub fn managed_paths(
    root: &fs::Root,
    config: &Config,
    policy: DriftPolicy,
) -> Result<Vec<ManagedPath>, DriftError> {
    let db = Db::load(root)?;
    let mut out: Vec<ManagedPath> = Vec::new();
    let mut push = |mp: ManagedPath| {
        out.retain(|m| m.path != mp.path);
        out.push(mp);
    };
    for w in hearth_config::paths::written(config) {
        if !w.has_known_contents() {
            continue;
        }
        match w.what {
            Written::File(f) => {
                let Some(content) = expected_file_content(f).map_err(DriftError::Content)? else {
                    continue;
                };
                let owner = db.resolve_owner(&f.user, &f.group)?;
                push(ManagedPath::new(
                    &w.path,
                    content,
                    expected_file_mode(f),
                    Some(owner),
                    policy,
                ));
            }
            Written::Unit(_, c) | Written::Dropin(_, _, c) => push(ManagedPath::new(
                &w.path,
                c.as_bytes(),
                0o644,
                Some((0, 0)),
                policy,
            )),
            Written::Mask(_) => {}
        }
    }
    Ok(out)
}

#[derive(Debug, Default)]
struct Ctl {
    paused: bool,
    replace: Option<Vec<ManagedPath>>,
    recheck: bool,
}

#[derive(Debug, Default)]
struct Shared {
    ctl: Mutex<Ctl>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Ctl> {
        self.ctl.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on a running [`DriftMonitor`], for the thread that applies configs.
#[derive(Debug, Clone)]
pub struct DriftControl {
    shared: Arc<Shared>,
}

impl DriftControl {
    /// Stops checking: returns once no check or revert is in progress; until
    /// [`DriftControl::resume`], events are dropped.
    pub fn pause(&self) {
        self.shared.lock().paused = true;
    }

    /// Checks again, starting with every managed path.
    pub fn resume(&self) {
        let mut ctl = self.shared.lock();
        ctl.paused = false;
        ctl.recheck = true;
    }

    /// Replaces the managed paths (after an apply); every path is re-checked once not paused.
    pub fn set_expected(&self, managed: Vec<ManagedPath>) {
        let mut ctl = self.shared.lock();
        ctl.replace = Some(managed);
        ctl.recheck = true;
    }

    /// Whether the monitor is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.lock().paused
    }
}

/// What a managed path was found to be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Observed {
    Missing,
    NotFile(EntryKind),
    File {
        sha256: String,
        mode: u32,
        uid: u32,
        gid: u32,
    },
}

/// The monitor. See the module documentation.
#[derive(Debug)]
pub struct DriftMonitor {
    root: fs::Root,
    inotify: Inotify,
    managed: Vec<ManagedPath>,
    by_path: HashMap<String, usize>,
    /// Watched directory -> its descriptor.
    dirs: HashMap<String, WatchDescriptor>,
    /// Descriptor -> the directories it stands for (one inode may have several paths).
    wds: HashMap<WatchDescriptor, Vec<String>>,
    /// Directories to watch that could not be watched (yet).
    unwatched: BTreeSet<String>,
    dirty: BTreeSet<String>,
    queue: VecDeque<DriftEvent>,
    /// The drifted state last reported per path (reported once).
    reported: HashMap<String, Observed>,
    shared: Arc<Shared>,
}

fn watch_mask() -> AddWatchFlags {
    AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
}

impl DriftMonitor {
    /// Starts watching `managed` in `root` (opened again: the monitor owns its handle). Nothing
    /// is checked until something changes: call [`DriftMonitor::check_all`] for drift that
    /// happened while no monitor ran.
    pub fn new(root: &fs::Root, managed: Vec<ManagedPath>) -> Result<DriftMonitor, DriftError> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|errno| DriftError::Inotify { op: "init", errno })?;
        let mut m = DriftMonitor {
            root: fs::Root::open(root.path())?,
            inotify,
            managed: Vec::new(),
            by_path: HashMap::new(),
            dirs: HashMap::new(),
            wds: HashMap::new(),
            unwatched: BTreeSet::new(),
            dirty: BTreeSet::new(),
            queue: VecDeque::new(),
            reported: HashMap::new(),
            shared: Arc::new(Shared::default()),
        };
        m.install(managed);
        Ok(m)
    }

    /// A handle to pause, resume and update this monitor from another thread.
    pub fn control(&self) -> DriftControl {
        DriftControl {
            shared: self.shared.clone(),
        }
    }

    /// The managed paths.
    pub fn managed(&self) -> &[ManagedPath] {
        &self.managed
    }

    /// The directories watched right now.
    pub fn watched_dirs(&self) -> Vec<String> {
        let mut v: Vec<String> = self.dirs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Replaces the managed paths (see also [`DriftControl::set_expected`]). Nothing is
    /// re-checked by this call itself.
    pub fn set_expected(&mut self, managed: Vec<ManagedPath>) {
        self.install(managed);
    }

    /// Checks every managed path now (applying the policies) and returns the events, together
    /// with any that were waiting.
    pub fn check_all(&mut self) -> Vec<DriftEvent> {
        let shared = self.shared.clone();
        let _ctl = shared.lock();
        self.dirty_all();
        self.process_dirty();
        self.queue.drain(..).collect()
    }

    /// Waits up to `timeout` for the next drift event; `Ok(None)` when there was none.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<DriftEvent>, DriftError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            {
                let shared = self.shared.clone();
                let mut ctl = shared.lock();
                if let Some(new) = ctl.replace.take() {
                    self.install(new);
                }
                if ctl.paused {
                    self.dirty.clear();
                } else {
                    if ctl.recheck {
                        ctl.recheck = false;
                        self.dirty_all();
                    }
                    self.process_dirty();
                }
            }
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.rewatch();
            if self.wait_readable((deadline - now).min(SLICE))? {
                self.read_events()?;
                let settle = Instant::now() + SETTLE_MAX;
                while Instant::now() < settle && self.wait_readable(SETTLE_QUIET)? {
                    self.read_events()?;
                }
            }
        }
    }

    fn install(&mut self, managed: Vec<ManagedPath>) {
        // Keep "already reported" only where the expectation did not change.
        let old: HashMap<String, ManagedPath> = self
            .managed
            .drain(..)
            .map(|m| (m.path.clone(), m))
            .collect();
        self.reported.retain(|p, _| {
            managed
                .iter()
                .any(|m| &m.path == p && old.get(p) == Some(m))
        });
        let mut dedup: Vec<ManagedPath> = Vec::new();
        for m in managed {
            dedup.retain(|d| d.path != m.path);
            dedup.push(m);
        }
        self.managed = dedup;
        self.by_path = self
            .managed
            .iter()
            .enumerate()
            .map(|(i, m)| (m.path.clone(), i))
            .collect();
        self.dirty.retain(|p| self.by_path.contains_key(p));

        let wanted: BTreeSet<String> = self
            .managed
            .iter()
            .filter(|m| m.policy != DriftPolicy::Ignore)
            .map(|m| m.parent_and_name().0)
            .collect();
        let gone: Vec<String> = self
            .dirs
            .keys()
            .filter(|d| !wanted.contains(*d))
            .cloned()
            .collect();
        for dir in gone {
            self.unwatch(&dir);
        }
        self.unwatched.retain(|d| wanted.contains(d));
        for dir in wanted {
            if !self.dirs.contains_key(&dir) {
                self.unwatched.insert(dir);
            }
        }
        // Newly managed directories are not re-checked here: callers ask for that (resume,
        // check_all). Directories that come back later are (see rewatch).
        self.rewatch_with(false);
    }

    fn unwatch(&mut self, dir: &str) {
        if let Some(wd) = self.dirs.remove(dir) {
            if let Some(list) = self.wds.get_mut(&wd) {
                list.retain(|d| d != dir);
                if list.is_empty() {
                    self.wds.remove(&wd);
                    let _ = self.inotify.rm_watch(wd);
                }
            }
        }
    }

    /// Tries to watch the directories not watched yet; files of a directory that is watched
    /// again are re-checked (they may have changed while it was not watched).
    fn rewatch(&mut self) {
        self.rewatch_with(true);
    }

    fn rewatch_with(&mut self, recheck: bool) {
        let pending: Vec<String> = self.unwatched.iter().cloned().collect();
        for dir in pending {
            let fd = match crate::users::open_dir_beneath(&self.root, &dir) {
                Ok(Some(fd)) => fd,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!("drift monitor: cannot open {dir}: {e}");
                    continue;
                }
            };
            let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            match self.inotify.add_watch(proc_path.as_str(), watch_mask()) {
                Ok(wd) => {
                    self.unwatched.remove(&dir);
                    self.dirs.insert(dir.clone(), wd);
                    let list = self.wds.entry(wd).or_default();
                    if !list.contains(&dir) {
                        list.push(dir.clone());
                    }
                    if recheck {
                        self.dirty_dir(&dir);
                    }
                }
                Err(e) => tracing::warn!("drift monitor: cannot watch {dir}: {e}"),
            }
        }
    }

    fn dirty_dir(&mut self, dir: &str) {
        for m in &self.managed {
            if m.policy != DriftPolicy::Ignore && m.parent_and_name().0 == dir {
                self.dirty.insert(m.path.clone());
            }
        }
    }

    fn dirty_all(&mut self) {
        for m in &self.managed {
            if m.policy != DriftPolicy::Ignore {
                self.dirty.insert(m.path.clone());
            }
        }
    }

    fn wait_readable(&self, timeout: Duration) -> Result<bool, DriftError> {
        let mut fds = [PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        match nix::poll::poll(&mut fds, ms) {
            Ok(n) => Ok(n > 0),
            Err(Errno::EINTR) => Ok(false),
            Err(errno) => Err(DriftError::Inotify { op: "poll", errno }),
        }
    }

    fn read_events(&mut self) -> Result<(), DriftError> {
        loop {
            let events = match self.inotify.read_events() {
                Ok(ev) => ev,
                Err(Errno::EAGAIN | Errno::EINTR) => return Ok(()),
                Err(errno) => return Err(DriftError::Inotify { op: "read", errno }),
            };
            if events.is_empty() {
                return Ok(());
            }
            for ev in events {
                if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    self.dirty_all();
                    continue;
                }
                let dirs = self.wds.get(&ev.wd).cloned().unwrap_or_default();
                if ev.mask.intersects(
                    AddWatchFlags::IN_IGNORED
                        | AddWatchFlags::IN_DELETE_SELF
                        | AddWatchFlags::IN_MOVE_SELF,
                ) {
                    // The directory is gone (or elsewhere): watch its path again when it exists.
                    for dir in &dirs {
                        self.dirs.remove(dir);
                        self.unwatched.insert(dir.clone());
                        self.dirty_dir(dir);
                    }
                    if self.wds.remove(&ev.wd).is_some()
                        && !ev.mask.contains(AddWatchFlags::IN_IGNORED)
                    {
                        let _ = self.inotify.rm_watch(ev.wd);
                    }
                    continue;
                }
                let Some(name) = ev.name.as_ref().map(|n| n.to_string_lossy().into_owned()) else {
                    continue;
                };
                if name.starts_with(TMP_PREFIX) {
                    continue;
                }
                for dir in dirs {
                    let path = if dir == "/" {
                        format!("/{name}")
                    } else {
                        format!("{dir}/{name}")
                    };
                    if self.by_path.contains_key(&path) {
                        self.dirty.insert(path);
                    }
                }
            }
        }
    }

    fn observe(&self, path: &str) -> Result<Observed, FsError> {
        let Some(st) = self.root.stat(path)? else {
            return Ok(Observed::Missing);
        };
        if st.kind != EntryKind::File {
            return Ok(Observed::NotFile(st.kind));
        }
        let Some(data) = self.root.read(path)? else {
            return Ok(Observed::Missing);
        };
        Ok(Observed::File {
            sha256: sha256_hex(&data),
            mode: st.mode,
            uid: st.uid,
            gid: st.gid,
        })
    }

    fn process_dirty(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for path in dirty {
            if let Some(ev) = self.check(&path) {
                tracing::info!(path = %ev.path, "drift: {}", ev.what);
                self.queue.push_back(ev);
            }
        }
    }

    fn check(&mut self, path: &str) -> Option<DriftEvent> {
        let m = self.managed.get(*self.by_path.get(path)?)?.clone();
        if m.policy == DriftPolicy::Ignore {
            return None;
        }
        let observed = match self.observe(path) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!("drift monitor: cannot check {path}: {e}");
                return None;
            }
        };
        let changes = compare(&m, &observed);
        if changes.is_empty() {
            self.reported.remove(path);
            return None;
        }
        if self.reported.get(path) == Some(&observed) {
            return None;
        }
        let mut what = changes
            .iter()
            .map(DriftChange::describe)
            .collect::<Vec<_>>()
            .join("; ");
        let mut reverted = false;
        if m.policy == DriftPolicy::Revert {
            match &m.content {
                Some(content) => {
                    match self.root.write_atomic(
                        path,
                        content,
                        m.mode,
                        Some(m.owner.unwrap_or((0, 0))),
                    ) {
                        Ok(()) => {
                            reverted = true;
                            what.push_str("; reverted");
                        }
                        Err(e) => what.push_str(&format!("; revert failed: {e}")),
                    }
                }
                None => what.push_str("; not reverted: the expected content is not known"),
            }
        }
        if reverted {
            self.reported.remove(path);
            // The parent may have been re-created by the revert.
            let dir = m.parent_and_name().0;
            if self.unwatched.contains(&dir) {
                self.rewatch();
                self.dirty.remove(path);
            }
        } else {
            self.reported.insert(path.to_string(), observed);
        }
        Some(DriftEvent {
            path: path.to_string(),
            what,
            changes,
            reverted,
        })
    }
}

fn compare(m: &ManagedPath, observed: &Observed) -> Vec<DriftChange> {
    match observed {
        Observed::Missing => vec![DriftChange::Deleted],
        Observed::NotFile(kind) => vec![DriftChange::NotAFile {
            found: match kind {
                EntryKind::Dir => "a directory",
                EntryKind::Symlink => "a symbolic link",
                _ => "a special file",
            }
            .to_string(),
        }],
        Observed::File {
            sha256,
            mode,
            uid,
            gid,
        } => {
            let mut out = Vec::new();
            if *sha256 != m.expected_sha256 {
                out.push(DriftChange::Content {
                    expected_sha256: m.expected_sha256.clone(),
                    found_sha256: sha256.clone(),
                });
            }
            if *mode != m.mode {
                out.push(DriftChange::Mode {
                    expected: mode_str(m.mode),
                    found: mode_str(*mode),
                });
            }
            if let Some((eu, eg)) = m.owner {
                if (eu, eg) != (*uid, *gid) {
                    out.push(DriftChange::Owner {
                        expected: format!("{eu}:{eg}"),
                        found: format!("{uid}:{gid}"),
                    });
                }
            }
            out
        }
    }
}
