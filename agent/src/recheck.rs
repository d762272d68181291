//! The no-op re-check without re-reading the config: what verifying a host against a config
//! needs (each managed file's path, mode, owner, size and sha256), kept in a compact index
//! beside the journal once the host was verified in that config.
//!
//! `apply --once-from` with the same desired config again (the same bytes: the index is keyed by
//! the sha256 of the fetched document, and by the name and spec digest the journal records)
//! checks the host against the index: one open per file, no YAML parse, no `data:` URL
//! decoding, no journal specs read. Anything that is not plainly "in sync" falls back to the
//! full path ([`crate::apply::Agent::sync`]), which handles it as before (drift per policy, a
//! pending reboot, an apply to resume, `--force`, the force file): the quick path can only ever
//! conclude `Done`, and only when the full verification would find nothing either.
//!
//! Only configs whose verification is file content, mode and owner are indexed: one with users
//! (SSH keys, password hashes), unit enablement or masks always takes the full path (their
//! state lives in systemd and the user database, not in a file digest). Files the full
//! verification skips (`append`, non-`data:` sources) are skipped here too.
//!
//! The index (`/var/lib/hearth/recheck.json`, version [`RECHECK_VERSION`]) is written atomically
//! through the root like the rest of the agent's state, after the journal records `Done`; an
//! index that does not match the journal (another config, a newer journal) is ignored, so a crash
//! between the two writes costs one full re-check, never a wrong answer. The owners it holds are
//! numeric, resolved from the host's user database; the database files' digest is in the index,
//! so an edited `/etc/passwd` or `/etc/group` also sends the check down the full path.

use crate::apply::{FORCE_FILE, LOCK_FILE};
use crate::drift_policy::DriftPolicies;
use crate::journal::{Journal, NamedConfig, JOURNAL_PATH};
use crate::state::State;
use hearth_config::ignition::Config;
use hearth_hostops::drift::DriftPolicy;
use hearth_hostops::fs::{self, Entry, Root};
use hearth_hostops::passwd::{Db, GROUP_FILES, PASSWD_FILES};
use hearth_hostops::verify::{expected_file_content, expected_file_mode};
use serde::{Deserialize, Serialize};

/// Where the index is kept.
pub const RECHECK_PATH: &str = "/var/lib/hearth/recheck.json";
/// The index format this agent reads and writes; another version is ignored (and replaced by
/// the next full check).
pub const RECHECK_VERSION: u32 = 1;

/// The compact index (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// Format version.
    pub version: u32,
    /// sha256 of the desired config's bytes as fetched.
    pub source: String,
    /// The config's name.
    pub name: String,
    /// The digest of its spec, as the journal refers to it (`configs/<digest>.json`).
    pub config: String,
    /// sha256 of the user database files the owners were resolved from.
    pub users: String,
    /// The local file the config was read from, when it had not changed for a while when it was
    /// opened ([`FileId::of_open`]): the same file again is the same config without reading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_file: Option<FileId>,
    /// Every file the verification checks, in the config's order.
    pub files: Vec<Expected>,
}

/// A local file's identity: if none of these moved, its content did not either (a write moves
/// the change time, which only a clock set back could bring back; see [`FileId::of_open`] for
/// the race with the file system's clock tick).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
}

/// How long a file's change time must lie in the past for its identity to be kept: a file
/// written twice within one tick of the file system's clock keeps its change time, so one read
/// between the two writes would leave the second unseen; this far in the past, the next write
/// moves it.
const STABLE_AFTER_NS: i128 = 2_000_000_000;

/// File systems whose attributes a client may cache, or another host may change behind it (NFS,
/// SMB, FUSE, 9P, Ceph, AFS): a config on one is always read.
const REMOTE_FILE_SYSTEMS: &[i64] = &[
    0x6969,      // NFS
    0xFE53_4D42, // SMB2
    0xFF53_4D42, // CIFS
    0x517B,      // SMB
    0x6573_5546, // FUSE
    0x0102_1997, // 9P
    0x00C3_6400, // Ceph
    0x5346_414F, // AFS
];

impl FileId {
    /// The identity of an open file, when it may stand for the content read from that same open
    /// file: a regular file on a local file system whose change time lies at least two seconds
    /// before now (taken here, before the content is read).
    pub fn of_open(file: &std::fs::File) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        let m = file.metadata().ok()?;
        if !m.is_file() {
            return None;
        }
        let fs = nix::sys::statfs::fstatfs(file).ok()?;
        #[allow(clippy::unnecessary_cast)] // the type of f_type differs between targets
        let fs_type = fs.filesystem_type().0 as i64;
        if REMOTE_FILE_SYSTEMS.contains(&fs_type) {
            return None;
        }
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        let id = FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        };
        (now_ns() - id.ctime_ns >= STABLE_AFTER_NS).then_some(id)
    }
}

/// Now, in nanoseconds since the epoch.
fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// One file as the verification expects it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    /// Absolute path inside the root.
    pub path: String,
    /// Permission bits; `None`: not checked (unit files and drop-ins).
    pub mode: Option<u32>,
    /// Owner (uid, gid); `None`: not checked.
    pub owner: Option<(u32, u32)>,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the content (hex).
    pub sha256: String,
}

pub use hearth_hostops::verify::sha256_hex;

/// The digest of the user database files (missing ones count as absent, distinctly from empty).
fn users_digest(root: &Root) -> Result<String, fs::FsError> {
    let mut all = Vec::new();
    for path in PASSWD_FILES.iter().chain(GROUP_FILES.iter()) {
        match root.read(path)? {
            Some(bytes) => {
                all.push(b'+');
                all.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                all.extend_from_slice(&bytes);
            }
            None => all.push(b'-'),
        }
    }
    Ok(sha256_hex(&all))
}

/// What the journal file says, as far as the quick path needs it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JournalView {
    version: u32,
    state: State,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    progress: Option<serde_json::Value>,
    #[serde(default)]
    drift: Vec<String>,
    #[serde(default)]
    reboot_pending: bool,
    #[serde(default)]
    failed_os: Option<String>,
    #[serde(default)]
    current: Option<Stored>,
    #[serde(default)]
    desired: Option<Stored>,
}

#[derive(Deserialize, PartialEq)]
struct Stored {
    name: String,
    #[serde(default)]
    config: Option<String>,
}

/// The journal's config reference when the host is plainly in it: `Done`, nothing in progress,
/// no drift, no reason, no pending reboot, current and desired the same stored config.
fn settled(root: &Root) -> Option<(String, String)> {
    let bytes = root.read(JOURNAL_PATH).ok()??;
    let j: JournalView = serde_json::from_slice(&bytes).ok()?;
    let plain = j.version == crate::journal::JOURNAL_VERSION
        && j.state == State::Done
        && j.reason.is_none()
        && j.progress.is_none()
        && j.drift.is_empty()
        && !j.reboot_pending
        && j.failed_os.is_none();
    let current = j.current?;
    (plain && j.desired.as_ref() == Some(&current))
        .then_some(())
        .and_then(|()| Some((current.name, current.config?)))
}

/// Whether the host is in the config whose fetched bytes are `source`, decided from the index
/// alone; `false` means "take the full path" (not "not in sync"). Takes the agent lock without
/// waiting (busy: `false`).
///
/// Files that differ and are all under the `revert` drift policy (`drift`) are put back on the
/// same pass, as the full path would: each is written atomically and checked again (see
/// [`revert`] for where their content comes from); drift under `report`
/// or `ignore`, or anything that is not a regular file or missing, takes the full path.
pub fn quick_done(root: &Root, source: &[u8], drift: &DriftPolicies) -> bool {
    let digest = sha256_hex(source);
    quick_check(root, drift, |index| index.source == digest)
}

/// [`quick_done`] for a config read from a local file, without reading it: the file's identity
/// must be the one the index recorded ([`FileId::of_open`]).
pub fn quick_done_by_file(root: &Root, file: &FileId, drift: &DriftPolicies) -> bool {
    let done = quick_check(root, drift, |index| {
        index.source_file.as_ref() == Some(file)
    });
    if done {
        tracing::debug!("the config file is the one indexed (same identity): not read again");
    }
    done
}

fn quick_check(root: &Root, drift: &DriftPolicies, same_source: impl Fn(&Index) -> bool) -> bool {
    let Ok(file) = root.open_or_create(LOCK_FILE, 0o600) else {
        return false;
    };
    let Ok(_lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
    else {
        return false;
    };
    // As the full path does the first time it holds the lock.
    crate::apply::remove_own_temporaries(root);
    if !matches!(root.stat(FORCE_FILE), Ok(None)) {
        return false;
    }
    let Some((name, config)) = settled(root) else {
        return false;
    };
    let Some(index) = root
        .read(RECHECK_PATH)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
    else {
        return false;
    };
    if index.version != RECHECK_VERSION
        || index.name != name
        || index.config != config
        || !same_source(&index)
        || users_digest(root).ok().as_ref() != Some(&index.users)
    {
        return false;
    }
    let mut differ = Vec::new();
    for f in &index.files {
        match check_file(root, f) {
            Check::Same => {}
            Check::Differs if drift.policy(&f.path) == DriftPolicy::Revert => differ.push(f),
            _ => return false,
        }
    }
    tracing::debug!(
        files = index.files.len(),
        differ = differ.len(),
        "quick re-check"
    );
    differ.is_empty() || revert(root, &index.name, &differ)
}

enum Check {
    Same,
    /// A regular file that differs, or none.
    Differs,
    /// Anything else (a link, a directory, an error): the full path says what.
    Other,
}

/// One open: the stat and the content from the same descriptor.
fn check_file(root: &Root, f: &Expected) -> Check {
    let (st, mut file) = match root.open_entry(&f.path) {
        Ok(Some(Entry::File(st, file))) => (st, file),
        Ok(None) => return Check::Differs,
        _ => return Check::Other,
    };
    if st.size != f.size
        || f.mode.is_some_and(|m| m != st.mode)
        || f.owner.is_some_and(|o| o != (st.uid, st.gid))
    {
        return Check::Differs;
    }
    match fs::read_all(&mut file, &f.path, st.size) {
        Ok(data) if sha256_hex(&data) == f.sha256 => Check::Same,
        Ok(_) => Check::Differs,
        Err(_) => Check::Other,
    }
}

/// Puts back the files under `revert` that differ (see [`quick_done`]); `true` when every one
/// is back and checked. Their content comes from the spec the journal stores for the current
/// config (JSON, checked against its digest; the same spec the index was made from), not from
/// the YAML again.
fn revert(root: &Root, name: &str, differ: &[&Expected]) -> bool {
    let Ok(Some(current)) = Journal::load_current(root) else {
        return false;
    };
    if current.name != name {
        return false;
    }
    let c = &current.spec.config;
    for f in differ {
        let Some(content) = content_of(c, &f.path) else {
            return false;
        };
        if sha256_hex(&content) != f.sha256 {
            return false;
        }
        let owner = f.owner.unwrap_or((0, 0));
        if let Err(e) = root.write_atomic(&f.path, &content, f.mode.unwrap_or(0o644), Some(owner)) {
            tracing::warn!(path = %f.path, error = %e, "cannot revert");
            return false;
        }
        if !matches!(check_file(root, f), Check::Same) {
            return false;
        }
        tracing::warn!(path = %f.path, "drift: {}: reverted", f.path);
    }
    true
}

/// The content `config` gives `path` (the last file entry wins; unit files and drop-ins).
fn content_of(c: &Config, path: &str) -> Option<Vec<u8>> {
    if let Some(f) = c.storage.files.iter().rev().find(|f| f.path == path) {
        return expected_file_content(f).ok().flatten();
    }
    for u in c.systemd.units.iter().rev() {
        if hearth_hostops::verify::unit_path(&u.name) == path {
            return u.contents.as_ref().map(|s| s.as_bytes().to_vec());
        }
        for d in u.dropins.iter().rev() {
            if hearth_hostops::verify::dropin_path(&u.name, &d.name) == path {
                return d.contents.as_ref().map(|s| s.as_bytes().to_vec());
            }
        }
    }
    None
}

/// The index of `config`, or `None` when its verification is more than file contents, modes
/// and owners (users, unit enablement, masks, drop-ins that must be absent) or a file cannot
/// be resolved.
fn index_of(
    root: &Root,
    source: &[u8],
    source_file: Option<FileId>,
    desired: &NamedConfig,
    config: &str,
) -> Option<Index> {
    let c: &Config = &desired.spec.config;
    if !c.passwd.users.is_empty()
        || c.systemd.units.iter().any(|u| {
            u.enabled.is_some()
                || u.mask.is_some()
                || u.dropins
                    .iter()
                    .any(|d| d.contents.as_deref().is_none_or(str::is_empty))
        })
    {
        return None;
    }
    let db = Db::load(root).ok()?;
    let mut files: Vec<Expected> = Vec::new();
    for f in &c.storage.files {
        if !f.append.is_empty() {
            continue;
        }
        let Some(content) = expected_file_content(f).ok()? else {
            continue;
        };
        files.push(Expected {
            path: f.path.clone(),
            mode: Some(expected_file_mode(f)),
            owner: Some(db.resolve_owner(&f.user, &f.group).ok()?),
            size: content.len() as u64,
            sha256: sha256_hex(&content),
        });
    }
    for u in &c.systemd.units {
        if let Some(contents) = u.contents.as_deref().filter(|c| !c.is_empty()) {
            files.push(Expected {
                path: hearth_hostops::verify::unit_path(&u.name),
                mode: None,
                owner: None,
                size: contents.len() as u64,
                sha256: sha256_hex(contents.as_bytes()),
            });
        }
        for d in &u.dropins {
            if let Some(contents) = d.contents.as_deref().filter(|c| !c.is_empty()) {
                files.push(Expected {
                    path: hearth_hostops::verify::dropin_path(&u.name, &d.name),
                    mode: None,
                    owner: None,
                    size: contents.len() as u64,
                    sha256: sha256_hex(contents.as_bytes()),
                });
            }
        }
    }
    // The last entry for a path wins, as in the verification (linear: one pass to find each
    // path's last entry, one to keep it).
    let last: std::collections::HashMap<&str, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.path.as_str(), i))
        .collect();
    let keep: Vec<bool> = files
        .iter()
        .enumerate()
        .map(|(i, f)| last.get(f.path.as_str()) == Some(&i))
        .collect();
    let mut keep = keep.into_iter();
    files.retain(|_| keep.next() == Some(true));
    Some(Index {
        version: RECHECK_VERSION,
        source: sha256_hex(source),
        name: desired.name.clone(),
        config: config.to_string(),
        users: users_digest(root).ok()?,
        source_file,
        files,
    })
}

/// After a quick check by content found the host in sync: keeps the identity of the local file
/// the config was read from in the index (when it is stable and the index is this content's), so
/// that the next check does not read the file at all. Failing only costs that.
pub fn record_source_file(root: &Root, source: &[u8], source_file: Option<FileId>) {
    let Some(id) = source_file else {
        return;
    };
    let Some(mut index) = root
        .read(RECHECK_PATH)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
    else {
        return;
    };
    if index.source != sha256_hex(source) || index.source_file == Some(id) {
        return;
    }
    index.source_file = Some(id);
    let written = serde_json::to_vec(&index)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            root.write_atomic(RECHECK_PATH, &b, 0o600, None)
                .map_err(|e| e.to_string())
        });
    if let Err(e) = written {
        tracing::warn!(error = %e, "cannot keep the re-check index {RECHECK_PATH}");
    }
}

/// After a full check ended `Done`: keeps the index of the config the journal now records
/// (unless it is there already), or removes a stale one when this config cannot be indexed.
/// Failing to write it only costs the next re-check its speed.
/// `source_file`: the identity of the open local file `source` was read from
/// ([`FileId::of_open`]).
pub fn record(root: &Root, source: &[u8], source_file: Option<FileId>, desired: &NamedConfig) {
    let Some((name, config)) = settled(root) else {
        return;
    };
    // The journal's current config is this one (same name, same stored spec).
    let spec_digest = serde_json::to_vec(&desired.spec).map(|b| sha256_hex(&b));
    if name != desired.name || spec_digest.ok().as_deref() != Some(config.as_str()) {
        return;
    }
    let existing = root
        .read(RECHECK_PATH)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok());
    let digest = sha256_hex(source);
    // The users digest too: after an edit of /etc/passwd or /etc/group the kept index no
    // longer answers (`quick` refuses it), so it is rewritten here.
    let users = users_digest(root).ok();
    if existing.as_ref().is_some_and(|i| {
        i.version == RECHECK_VERSION
            && i.source == digest
            && i.config == config
            && i.name == name
            && users.as_ref() == Some(&i.users)
            && i.source_file == source_file
    }) {
        return;
    }
    let result = match index_of(root, source, source_file, desired, &config) {
        Some(index) => serde_json::to_vec(&index)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                root.write_atomic(RECHECK_PATH, &bytes, 0o600, None)
                    .map_err(|e| e.to_string())
            }),
        None => root
            .remove(RECHECK_PATH)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, "cannot keep the re-check index {RECHECK_PATH}");
    }
}
