//! The I/O of the boot entry sync: ostree's entries read from `/boot`, each resolved to its
//! deployment, the ESP's entries read, and the [`EspPlan`] applied in an order a power loss
//! cannot turn into an ESP that boots nothing: entries of deployments that are gone (which
//! cannot boot anyway) and the files only they named go first (so the ESP needs room for what
//! is deployed, not for that plus the old), then the kernels of new entries, then the entries.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::entry::{BlsEntry, EntryName, MAX_ENTRY_BYTES};
use super::error::BootCountError;
use super::plan::{
    entry_id, plan, split_deployment, EspPlan, OstreeEntry, ENTRY_PREFIX, ESP_FILES_DIR,
};
use crate::os::paths::inside;

/// ostree's entries, read at most this many (a host keeps two or three deployments).
pub const MAX_ENTRIES: usize = 64;

/// Space kept free on the ESP on top of what a sync copies.
const ESP_RESERVE: u64 = 1 << 20;

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// The deployment running now, when it is one of ostree's entries.
    pub booted: Option<String>,
    /// Entries written (new or changed), by file name.
    pub written: Vec<String>,
    /// Entries removed.
    pub removed: Vec<String>,
    /// Files copied to the ESP.
    pub copied: Vec<String>,
    /// Files removed from the ESP.
    pub pruned: Vec<String>,
    /// Deployments whose new entry got a boot counter.
    pub counted: Vec<String>,
}

/// Suffix of a file being written (renamed into place when complete; systemd-boot reads only
/// `*.conf` and the paths entries name).
const TMP_SUFFIX: &str = ".hearth-tmp";

fn io(path: &Path, e: std::io::Error) -> BootCountError {
    BootCountError::Io {
        path: path.display().to_string(),
        cause: e.to_string(),
    }
}

/// Reads ostree's entries under `<root>/boot/loader/entries` with their deployments.
pub(super) fn read_ostree_entries(root: &Path) -> Result<Vec<OstreeEntry>, BootCountError> {
    let dir = inside(root, "/boot/loader/entries");
    let mut out = Vec::new();
    for item in fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
        let item = item.map_err(|e| io(&dir, e))?;
        let file = item.file_name().to_string_lossy().into_owned();
        if !file.ends_with(".conf") {
            continue;
        }
        if out.len() == MAX_ENTRIES {
            return Err(BootCountError::TooMany {
                dir: dir.display().to_string(),
                max: MAX_ENTRIES,
            });
        }
        let path = item.path();
        let text = read_bounded(&path)?;
        let entry = BlsEntry::parse(&text);
        let deployment = deployment_of(root, &file, &entry)?;
        out.push(OstreeEntry {
            file,
            deployment,
            entry,
        });
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(out)
}

fn read_bounded(path: &Path) -> Result<String, BootCountError> {
    let meta = fs::metadata(path).map_err(|e| io(path, e))?;
    if meta.len() > MAX_ENTRY_BYTES as u64 {
        return Err(BootCountError::Io {
            path: path.display().to_string(),
            cause: format!(
                "{} bytes, more than a boot entry may have ({MAX_ENTRY_BYTES})",
                meta.len()
            ),
        });
    }
    fs::read_to_string(path).map_err(|e| io(path, e))
}

/// The deployment an ostree entry boots: its `ostree=` path is a symlink to
/// `../../../deploy/<osname>/deploy/<checksum>.<serial>`.
fn deployment_of(root: &Path, file: &str, entry: &BlsEntry) -> Result<String, BootCountError> {
    let unresolved = |why: String| BootCountError::Entry {
        file: file.to_string(),
        message: why,
    };
    let arg = entry
        .ostree_arg()
        .ok_or_else(|| unresolved("no ostree= argument in options".into()))?;
    let link = inside(root, arg);
    let target = fs::read_link(&link)
        .map_err(|e| unresolved(format!("ostree={arg}: {e}")))?
        .to_string_lossy()
        .into_owned();
    let mut parts = target.rsplit('/');
    let (name, deploy, osname) = (parts.next(), parts.next(), parts.next());
    match (name, deploy, osname) {
        (Some(name), Some("deploy"), Some(osname))
            if plain(name) && plain(osname) && name.contains('.') =>
        {
            Ok(format!("{osname}-{name}"))
        }
        _ => Err(unresolved(format!(
            "ostree={arg} points at {target:?}, not at a deployment \
             (deploy/<osname>/deploy/<checksum>.<serial>)"
        ))),
    }
}

fn plain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The deployment `root` runs, if it is one of `entries`' (device and inode of the root
/// directory against each deployment's directory, as libostree finds the booted deployment).
pub(super) fn booted_deployment(root: &Path, entries: &[OstreeEntry]) -> Option<String> {
    let here = fs::metadata(root).ok()?;
    entries.iter().find_map(|e| {
        let (osname, name) = split_deployment(&e.deployment)?;
        let dir = inside(root, &format!("/ostree/deploy/{osname}/deploy/{name}"));
        let m = fs::metadata(dir).ok()?;
        (m.dev() == here.dev() && m.ino() == here.ino()).then(|| e.deployment.clone())
    })
}

/// The entry names in the ESP's `loader/entries`.
pub(super) fn read_esp_names(esp: &Path) -> Result<Vec<EntryName>, BootCountError> {
    let dir = esp.join("loader/entries");
    let mut out = Vec::new();
    for item in fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
        let item = item.map_err(|e| io(&dir, e))?;
        if let Some(name) = EntryName::parse(&item.file_name().to_string_lossy()) {
            out.push(name);
        }
        if out.len() > 4 * MAX_ENTRIES {
            return Err(BootCountError::TooMany {
                dir: dir.display().to_string(),
                max: 4 * MAX_ENTRIES,
            });
        }
    }
    Ok(out)
}

/// Applies `p` to the ESP (see the module documentation for the order).
pub(super) fn apply(root: &Path, esp: &Path, p: &EspPlan) -> Result<SyncReport, BootCountError> {
    let mut report = SyncReport {
        counted: p.counted.clone(),
        ..SyncReport::default()
    };
    let entries = esp.join("loader/entries");
    let files_dir = esp.join(ESP_FILES_DIR);
    // 1. Entries of deployments that are gone, then the files no entry of the plan names.
    for name in &p.remove {
        let path = entries.join(name);
        match fs::remove_file(&path) {
            Ok(()) => report.removed.push(name.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path, e)),
        }
    }
    sync_dir(&entries)?;
    prune(&files_dir, &files_dir, &p.files, &mut report)?;
    // 2. The files the entries name, complete before any entry names them.
    let mut to_copy: Vec<(PathBuf, PathBuf, u64)> = Vec::new();
    for rel in &p.files {
        let src = inside(root, &format!("/boot/{rel}"));
        let dest = files_dir.join(rel);
        let size = fs::metadata(&src).map_err(|e| io(&src, e))?.len();
        match fs::metadata(&dest) {
            Ok(m) if m.len() == size => {}
            _ => to_copy.push((src, dest, size)),
        }
    }
    let needed: u64 = to_copy.iter().map(|c| c.2).sum();
    let mut full = None;
    if needed > 0 {
        let free = free_bytes(esp)?;
        if needed + ESP_RESERVE > free {
            full = Some(BootCountError::EspFull {
                esp: esp.display().to_string(),
                needed,
                free,
            });
        }
    }
    if full.is_none() {
        for (src, dest, _) in &to_copy {
            copy_atomic(src, dest)?;
            report.copied.push(dest.display().to_string());
        }
    }
    // 3. The entries: every one whose files are on the ESP, also when the new ones did not fit
    //    (the others' links may have changed with ostree's last write).
    for (name, content) in &p.entries {
        let path = entries.join(name);
        if fs::read(&path).ok().as_deref() == Some(content.as_bytes()) {
            continue;
        }
        if !files_present(esp, content) {
            continue;
        }
        write_atomic(&path, content.as_bytes())?;
        report.written.push(name.clone());
    }
    sync_dir(&entries)?;
    match full {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Whether the files an ESP entry names are on the ESP.
fn files_present(esp: &Path, content: &str) -> bool {
    BlsEntry::parse(content)
        .lines
        .iter()
        .filter(|(k, _)| ["linux", "initrd", "devicetree"].contains(&k.as_str()))
        .all(|(_, v)| esp.join(v.trim_start_matches('/')).is_file())
}

/// Whether the ESP has room for the kernel and initramfs of `deployment` (boot checksum
/// `bootcsum`), before ostree puts them in `/boot` at its finalization: their size in the
/// deployment (`usr/lib/modules/<kver>/`), against the ESP's free space plus the files of boot
/// checksums other than `keep` (those of deployments the finalization drops go first). `Ok`
/// when the ESP has that boot checksum already.
pub(super) fn check_room(
    root: &Path,
    esp: &Path,
    deployment: &str,
    bootcsum: &str,
    keep: &[&str],
) -> Result<(), BootCountError> {
    let Some((osname, name)) = split_deployment(deployment) else {
        return Ok(());
    };
    let dirs = esp.join(ESP_FILES_DIR).join("ostree");
    if dirs.join(format!("{osname}-{bootcsum}")).is_dir() {
        return Ok(());
    }
    let modules = inside(
        root,
        &format!("/ostree/deploy/{osname}/deploy/{name}/usr/lib/modules"),
    );
    let mut needed = 0u64;
    for kver in fs::read_dir(&modules)
        .map_err(|e| io(&modules, e))?
        .flatten()
    {
        for file in ["vmlinuz", "initramfs.img"] {
            if let Ok(m) = fs::metadata(kver.path().join(file)) {
                needed += m.len();
            }
        }
    }
    let mut freeable = 0u64;
    if let Ok(items) = fs::read_dir(&dirs) {
        for item in items.flatten() {
            let dir_name = item.file_name().to_string_lossy().into_owned();
            if keep.iter().any(|k| dir_name == format!("{osname}-{k}")) {
                continue;
            }
            for f in fs::read_dir(item.path()).into_iter().flatten().flatten() {
                freeable += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    let free = free_bytes(esp)?;
    if needed + ESP_RESERVE > free + freeable {
        return Err(BootCountError::EspFull {
            esp: esp.display().to_string(),
            needed,
            free: free + freeable,
        });
    }
    Ok(())
}

/// Removes the ESP entries of `deployment` (whatever their counter): a deployment staged anew
/// gets fresh tries, never the counter of an earlier deployment of the same name.
pub(super) fn forget(esp: &Path, deployment: &str) -> Result<Vec<String>, BootCountError> {
    let id = entry_id(deployment);
    let dir = esp.join("loader/entries");
    let mut removed = Vec::new();
    for name in read_esp_names(esp)? {
        if name.id == id {
            let path = dir.join(name.file_name());
            fs::remove_file(&path).map_err(|e| io(&path, e))?;
            removed.push(name.file_name());
        }
    }
    if !removed.is_empty() {
        sync_dir(&dir)?;
    }
    Ok(removed)
}

/// Removes the files under the ESP's `/hearth` that no entry names (and directories left
/// empty); `keep` holds paths relative to `base`.
fn prune(
    base: &Path,
    dir: &Path,
    keep: &std::collections::BTreeSet<String>,
    report: &mut SyncReport,
) -> Result<(), BootCountError> {
    let items = match fs::read_dir(dir) {
        Ok(items) => items,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(dir, e)),
    };
    for item in items {
        let item = item.map_err(|e| io(dir, e))?;
        let path = item.path();
        let kind = item.file_type().map_err(|e| io(&path, e))?;
        if kind.is_dir() {
            prune(base, &path, keep, report)?;
            if fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none()) {
                fs::remove_dir(&path).map_err(|e| io(&path, e))?;
            }
            continue;
        }
        let rel = path
            .strip_prefix(base)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !keep.contains(&rel) {
            fs::remove_file(&path).map_err(|e| io(&path, e))?;
            report.pruned.push(path.display().to_string());
        }
    }
    Ok(())
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(TMP_SUFFIX);
    path.with_file_name(name)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), BootCountError> {
    let tmp = tmp_path(path);
    let mut f = fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io(&tmp, e))?;
    f.sync_all().map_err(|e| io(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| io(path, e))
}

fn copy_atomic(src: &Path, dest: &Path) -> Result<(), BootCountError> {
    let parent = dest.parent().unwrap_or(dest);
    fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let tmp = tmp_path(dest);
    fs::copy(src, &tmp).map_err(|e| io(&tmp, e))?;
    fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| io(&tmp, e))?;
    fs::rename(&tmp, dest).map_err(|e| io(dest, e))?;
    sync_dir(parent)
}

fn sync_dir(dir: &Path) -> Result<(), BootCountError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))
}

fn free_bytes(path: &Path) -> Result<u64, BootCountError> {
    let st = nix::sys::statvfs::statvfs(path).map_err(|e| io(path, e.into()))?;
    Ok(st.blocks_available() as u64 * st.fragment_size() as u64)
}

/// The whole sync: read, plan, apply.
pub(super) fn sync(root: &Path, esp: &Path, tries: u32) -> Result<SyncReport, BootCountError> {
    if !esp.join("loader").is_dir() {
        return Err(BootCountError::NoEsp {
            esp: esp.display().to_string(),
        });
    }
    let entries_dir = esp.join("loader/entries");
    fs::create_dir_all(&entries_dir).map_err(|e| io(&entries_dir, e))?;
    remove_leftovers(&entries_dir)?;
    let ostree = read_ostree_entries(root)?;
    if ostree.is_empty() {
        return Err(BootCountError::NoOstreeEntries {
            dir: inside(root, "/boot/loader/entries").display().to_string(),
        });
    }
    let booted = booted_deployment(root, &ostree);
    let names = read_esp_names(esp)?;
    let p = plan(&ostree, &names, booted.as_deref(), tries)?;
    let mut report = apply(root, esp, &p)?;
    report.booted = booted;
    Ok(report)
}

/// Files a sync interrupted by a power loss left half-written.
fn remove_leftovers(entries_dir: &Path) -> Result<(), BootCountError> {
    for item in fs::read_dir(entries_dir).map_err(|e| io(entries_dir, e))? {
        let item = item.map_err(|e| io(entries_dir, e))?;
        let name = item.file_name().to_string_lossy().into_owned();
        if name.starts_with(ENTRY_PREFIX) && name.ends_with(TMP_SUFFIX) {
            let _ = fs::remove_file(item.path());
        }
    }
    Ok(())
}
