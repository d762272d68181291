//! Does the host match a rendered config? The MCO's "on-disk state validation", with a precise,
//! human message for every difference.
//!
//! [`verify`] checks, against the target root:
//!
//! * `storage.files`: each file exists, is a regular file, and has the content (`data:` URLs,
//!   decoded and decompressed), mode (default `0644`) and owner (default `0:0`, names resolved in
//!   the target's passwd/group) of the config. Files with `append` are skipped with a note (their
//!   final content depends on what was there before), as are files whose source is not a
//!   `data:` URL;
//! * `systemd.units`: a masked unit's path `/etc/systemd/system/NAME` is a link to `/dev/null`;
//!   otherwise a unit with contents has that unit file, each drop-in with contents has that
//!   file in `/etc/systemd/system/NAME.d/`, a drop-in without contents is absent (the MCO deletes
//!   it), and `enabled: true/false` matches the unit-file state that systemd reports (enablement
//!   is not checked for masked units, which the MCO does not enable or disable);
//! * `passwd.users`: the SSH keys in the user's key file (see [`crate::users`]) and, when the
//!   config sets `passwordHash`, the hash in `/etc/shadow` (the value itself is never printed).
//!
//! Unit-file states come from a [`UnitStates`]: a closure, a map filled over D-Bus with
//! [`unit_file_states`] (what the agent uses), or [`OfflineUnitStates`], which reads the links
//! in the root (for tests and for roots that are not running).

use crate::fs::{self, EntryKind};
use crate::passwd::Db;
use crate::users::{self, SshKeyLayout};
use hearth_config::ignition::{Config, File, Unit};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Where unit files and drop-ins live.
pub use hearth_config::paths::SYSTEMD_UNIT_DIR as UNIT_DIR;
/// Ignition's default file mode.
pub const DEFAULT_FILE_MODE: u32 = 0o644;

/// What kind of difference a [`Mismatch`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MismatchKind {
    /// A file of `storage.files` does not exist.
    FileMissing,
    /// A file of `storage.files` is a directory, link or special file.
    FileNotRegular,
    /// Content differs.
    FileContent,
    /// Mode differs.
    FileMode,
    /// Owner differs (or the owner in the config cannot be resolved).
    FileOwner,
    /// A unit file does not exist.
    UnitFileMissing,
    /// A unit file's content differs (or it is not a regular file).
    UnitFileContent,
    /// A drop-in does not exist.
    DropinMissing,
    /// A drop-in's content differs (or it is not a regular file).
    DropinContent,
    /// A drop-in the config removes is still there.
    DropinPresent,
    /// Enablement differs.
    UnitEnablement,
    /// A unit should be masked and is not, or the reverse.
    UnitMask,
    /// A user's SSH keys differ.
    SshKeys,
    /// A user's password hash differs.
    PasswordHash,
    /// A user of the config does not exist on the host.
    UserMissing,
    /// Something could not be checked at all (read error, undecodable contents).
    Error,
    /// Not a mismatch: something was not checked, and why (see [`Report::notes`]).
    Skipped,
}

/// One difference between the host and the config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mismatch {
    /// The kind.
    pub kind: MismatchKind,
    /// What it is about: a path, a unit name or a user name.
    pub subject: String,
    /// What the config wants (a sha256, a mode, `uid:gid`, a state), when it has a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What the host has, when it has a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// The sentence for people, e.g. `mode mismatch for file "/etc/x": expected 0644, found
    /// 0600`.
    pub message: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Mismatch {
    fn new(kind: MismatchKind, subject: impl Into<String>, message: String) -> Mismatch {
        Mismatch {
            kind,
            subject: subject.into(),
            expected: None,
            found: None,
            message,
        }
    }

    fn values(mut self, expected: impl Into<String>, found: impl Into<String>) -> Mismatch {
        self.expected = Some(expected.into());
        self.found = Some(found.into());
        self
    }
}

/// All differences, and what was not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The differences, in config order (files, units, users).
    pub mismatches: Vec<Mismatch>,
    /// What was skipped and why (kind [`MismatchKind::Skipped`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Mismatch>,
}

impl Report {
    /// True when the host matches.
    pub fn matches(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// Options of [`verify_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Where SSH keys are expected.
    pub ssh_layout: SshKeyLayout,
}

/// The unit-file state systemd reports (`GetUnitFileState`, `systemctl is-enabled`):
/// `enabled`, `disabled`, `masked`, `static`, ...; `None` when there is no such unit.
pub trait UnitStates {
    /// The state of `unit`.
    fn unit_file_state(&self, unit: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String>> UnitStates for F {
    fn unit_file_state(&self, unit: &str) -> Option<String> {
        self(unit)
    }
}

impl UnitStates for HashMap<String, String> {
    fn unit_file_state(&self, unit: &str) -> Option<String> {
        self.get(unit).cloned()
    }
}

impl UnitStates for BTreeMap<String, String> {
    fn unit_file_state(&self, unit: &str) -> Option<String> {
        self.get(unit).cloned()
    }
}

/// The sha256 of `data`, in hex.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// `0644`.
pub fn mode_str(mode: u32) -> String {
    format!("{mode:04o}")
}

pub use hearth_config::paths::{dropin_path, unit_path};

/// The units whose state [`verify`] asks for (those with `enabled` set or `mask: true`).
pub fn units_to_query(config: &Config) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for u in &config.systemd.units {
        if (u.enabled.is_some() || u.mask == Some(true)) && !out.contains(&u.name) {
            out.push(u.name.clone());
        }
    }
    out
}

/// The expected content of a file entry: `Ok(None)` when it cannot be known here (the source is
/// not a `data:` URL), an error when the `data:` URL cannot be decoded. No source means empty.
pub fn expected_file_content(file: &File) -> Result<Option<Vec<u8>>, String> {
    match file.contents.source.as_deref() {
        None => Ok(Some(Vec::new())),
        Some(src) if src.len() >= 5 && src[..5].eq_ignore_ascii_case("data:") => {
            hearth_config::dataurl::decode(src, file.contents.compression.as_deref())
                .map(Some)
                .map_err(|e| format!("cannot decode the contents of file \"{}\": {e}", file.path))
        }
        Some(_) => Ok(None),
    }
}

/// The mode a file entry asks for (Ignition's default `0644`).
pub fn expected_file_mode(file: &File) -> u32 {
    file.mode
        .map(|m| (m as u32) & 0o7777)
        .unwrap_or(DEFAULT_FILE_MODE)
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "a regular file",
        EntryKind::Dir => "a directory",
        EntryKind::Symlink => "a symbolic link",
        EntryKind::Other => "a special file",
    }
}

/// Keeps the last entry of every key (later entries of a rendered config replace earlier ones).
fn last_wins<T>(items: &[T], key: impl Fn(&T) -> &str) -> Vec<&T> {
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        last.insert(key(item), i);
    }
    items
        .iter()
        .enumerate()
        .filter(|(i, item)| last.get(key(item)) == Some(i))
        .map(|(_, item)| item)
        .collect()
}

/// Checks the host against `config` and returns the differences (see the module
/// documentation); SSH keys are expected in the default layout ([`SshKeyLayout::Fragment`]).
pub fn verify(root: &fs::Root, units: &dyn UnitStates, config: &Config) -> Vec<Mismatch> {
    verify_with(root, units, config, &VerifyOptions::default()).mismatches
}

/// [`verify`] with options, returning the notes too.
pub fn verify_with(
    root: &fs::Root,
    units: &dyn UnitStates,
    config: &Config,
    opts: &VerifyOptions,
) -> Report {
    let mut report = Report::default();
    let db = match Db::load(root) {
        Ok(db) => Some(db),
        Err(e) => {
            report.mismatches.push(Mismatch::new(
                MismatchKind::Error,
                "/etc/passwd",
                format!("cannot read the users and groups of the host: {e}"),
            ));
            None
        }
    };
    for file in last_wins(&config.storage.files, |f| f.path.as_str()) {
        check_file(root, db.as_ref(), file, &mut report);
    }
    for unit in last_wins(&config.systemd.units, |u| u.name.as_str()) {
        check_unit(root, units, unit, &mut report);
    }
    if let Some(db) = &db {
        for user in last_wins(&config.passwd.users, |u| u.name.as_str()) {
            check_user(root, db, user, opts, &mut report);
        }
    }
    report
}

/// Compares a regular file's content with `expected`; pushes what differs. `what` is `file`,
/// `unit file` or `drop-in`. Returns the stat when the entry exists.
fn check_content(
    root: &fs::Root,
    path: &str,
    expected: &[u8],
    what: &str,
    kinds: (MismatchKind, MismatchKind),
    report: &mut Report,
) -> Option<fs::Stat> {
    let (missing, content) = kinds;
    // One open per file: the stat and the content come from the same descriptor.
    let (st, file) = match root.open_entry(path) {
        Ok(Some(fs::Entry::File(st, file))) => (st, Some(file)),
        Ok(Some(fs::Entry::Other(st))) => (st, None),
        Ok(None) => {
            report.mismatches.push(Mismatch::new(
                missing,
                path,
                format!("{what} \"{path}\" is missing"),
            ));
            return None;
        }
        Err(e) => {
            report.mismatches.push(Mismatch::new(
                MismatchKind::Error,
                path,
                format!("cannot check {what} \"{path}\": {e}"),
            ));
            return None;
        }
    };
    let Some(mut file) = file else {
        let found = match (st.kind, root.read_link(path)) {
            (EntryKind::Symlink, Ok(Some(t))) => format!("a symbolic link to {t}"),
            (k, _) => kind_name(k).to_string(),
        };
        let kind = if what == "file" {
            MismatchKind::FileNotRegular
        } else {
            content
        };
        report.mismatches.push(
            Mismatch::new(
                kind,
                path,
                format!("{what} \"{path}\" is not a regular file: found {found}"),
            )
            .values("a regular file", found),
        );
        return None;
    };
    match fs::read_all(&mut file, path, st.size) {
        Ok(data) => {
            if data != expected {
                let (e, f) = (sha256_hex(expected), sha256_hex(&data));
                let message = if what == "file" {
                    format!("content mismatch for file \"{path}\": expected sha256 {e}, found {f}")
                } else {
                    format!("{what} \"{path}\" content mismatch: expected sha256 {e}, found {f}")
                };
                report
                    .mismatches
                    .push(Mismatch::new(content, path, message).values(e, f));
            }
            Some(st)
        }
        Err(e) => {
            report.mismatches.push(Mismatch::new(
                MismatchKind::Error,
                path,
                format!("cannot read {what} \"{path}\": {e}"),
            ));
            None
        }
    }
}

fn check_file(root: &fs::Root, db: Option<&Db>, file: &File, report: &mut Report) {
    let path = file.path.as_str();
    if !file.append.is_empty() {
        report.notes.push(Mismatch::new(
            MismatchKind::Skipped,
            path,
            format!(
                "file \"{path}\" not verified: it has append entries, so its content depends on \
                 what was there before"
            ),
        ));
        return;
    }
    let expected = match expected_file_content(file) {
        Ok(Some(c)) => c,
        Ok(None) => {
            let scheme = file
                .contents
                .source
                .as_deref()
                .and_then(|s| s.split_once(':'))
                .map_or("", |(s, _)| s);
            report.notes.push(Mismatch::new(
                MismatchKind::Skipped,
                path,
                format!("file \"{path}\" not verified: its source is a {scheme}: URL, not data:"),
            ));
            return;
        }
        Err(msg) => {
            report
                .mismatches
                .push(Mismatch::new(MismatchKind::Error, path, msg));
            return;
        }
    };
    let Some(st) = check_content(
        root,
        path,
        &expected,
        "file",
        (MismatchKind::FileMissing, MismatchKind::FileContent),
        report,
    ) else {
        return;
    };
    let mode = expected_file_mode(file);
    if st.mode != mode {
        report.mismatches.push(
            Mismatch::new(
                MismatchKind::FileMode,
                path,
                format!(
                    "mode mismatch for file \"{path}\": expected {}, found {}",
                    mode_str(mode),
                    mode_str(st.mode)
                ),
            )
            .values(mode_str(mode), mode_str(st.mode)),
        );
    }
    let Some(db) = db else { return };
    match db.resolve_owner(&file.user, &file.group) {
        Ok((uid, gid)) => {
            if (st.uid, st.gid) != (uid, gid) {
                let (e, f) = (format!("{uid}:{gid}"), format!("{}:{}", st.uid, st.gid));
                report.mismatches.push(
                    Mismatch::new(
                        MismatchKind::FileOwner,
                        path,
                        format!("owner mismatch for file \"{path}\": expected {e}, found {f}"),
                    )
                    .values(e, f),
                );
            }
        }
        Err(e) => report.mismatches.push(Mismatch::new(
            MismatchKind::FileOwner,
            path,
            format!("cannot check the owner of file \"{path}\": {e}"),
        )),
    }
}

fn non_empty(c: &Option<String>) -> Option<&str> {
    c.as_deref().filter(|c| !c.is_empty())
}

fn is_masked_link(root: &fs::Root, path: &str) -> bool {
    matches!(root.read_link(path), Ok(Some(t)) if t == "/dev/null")
}

fn describe_state(state: Option<&str>) -> String {
    state.unwrap_or("not found").to_string()
}

fn check_unit(root: &fs::Root, units: &dyn UnitStates, unit: &Unit, report: &mut Report) {
    let name = unit.name.as_str();
    let path = unit_path(name);
    let masked = unit.mask == Some(true);
    let state = if unit.enabled.is_some() || masked || unit.mask == Some(false) {
        units.unit_file_state(name)
    } else {
        None
    };

    if masked {
        if !is_masked_link(root, &path) {
            let found = match root.read_link(&path) {
                Ok(Some(t)) => format!("{path} is a link to {t}"),
                _ => match root.stat(&path) {
                    Ok(Some(st)) => format!("{path} is {}", kind_name(st.kind)),
                    _ => format!("{path} does not exist"),
                },
            };
            let is = describe_state(state.as_deref());
            report.mismatches.push(
                Mismatch::new(
                    MismatchKind::UnitMask,
                    name,
                    format!("unit \"{name}\" should be masked, is {is} ({found})"),
                )
                .values("masked", is),
            );
        }
    } else {
        let link_masked = is_masked_link(root, &path);
        if link_masked && (unit.mask == Some(false) || non_empty(&unit.contents).is_some()) {
            report.mismatches.push(
                Mismatch::new(
                    MismatchKind::UnitMask,
                    name,
                    format!(
                        "unit \"{name}\" should not be masked, is masked ({path} is a link to \
                         /dev/null)"
                    ),
                )
                .values("not masked", "masked"),
            );
        } else if let Some(contents) = non_empty(&unit.contents) {
            check_content(
                root,
                &path,
                contents.as_bytes(),
                "unit file",
                (MismatchKind::UnitFileMissing, MismatchKind::UnitFileContent),
                report,
            );
        }
        if !link_masked {
            check_enablement(name, unit.enabled, state.as_deref(), report);
        }
    }

    for dropin in last_wins(&unit.dropins, |d| d.name.as_str()) {
        let dpath = dropin_path(name, &dropin.name);
        match non_empty(&dropin.contents) {
            Some(contents) => {
                check_content(
                    root,
                    &dpath,
                    contents.as_bytes(),
                    "drop-in",
                    (MismatchKind::DropinMissing, MismatchKind::DropinContent),
                    report,
                );
            }
            None => {
                if let Ok(Some(_)) = root.stat(&dpath) {
                    report.mismatches.push(
                        Mismatch::new(
                            MismatchKind::DropinPresent,
                            &dpath,
                            format!(
                                "drop-in \"{dpath}\" should be absent (it has no contents in the \
                                 config), is present"
                            ),
                        )
                        .values("absent", "present"),
                    );
                }
            }
        }
    }
}

fn check_enablement(name: &str, enabled: Option<bool>, state: Option<&str>, report: &mut Report) {
    let Some(want) = enabled else { return };
    let ok = match (want, state) {
        (true, Some("enabled" | "alias")) => true,
        (false, Some(s)) => !matches!(s, "enabled" | "enabled-runtime" | "linked"),
        (false, None) => true,
        _ => false,
    };
    if ok {
        return;
    }
    if want
        && matches!(
            state,
            Some("static" | "indirect" | "generated" | "transient")
        )
    {
        report.notes.push(Mismatch::new(
            MismatchKind::Skipped,
            name,
            format!(
                "unit \"{name}\" should be enabled, but it is {} and cannot be enabled",
                state.unwrap_or_default()
            ),
        ));
        return;
    }
    let (want_s, is) = (
        if want { "enabled" } else { "disabled" },
        describe_state(state),
    );
    report.mismatches.push(
        Mismatch::new(
            MismatchKind::UnitEnablement,
            name,
            format!("unit \"{name}\" should be {want_s}, is {is}"),
        )
        .values(want_s, is),
    );
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "key"
    } else {
        "keys"
    }
}

fn check_user(
    root: &fs::Root,
    db: &Db,
    user: &hearth_config::ignition::User,
    opts: &VerifyOptions,
    report: &mut Report,
) {
    let name = user.name.as_str();
    let Some(entry) = db.user(name) else {
        if !user.ssh_authorized_keys.is_empty() || user.password_hash.is_some() {
            report.mismatches.push(Mismatch::new(
                MismatchKind::UserMissing,
                name,
                format!("user \"{name}\" does not exist on the host"),
            ));
        }
        return;
    };
    let key_path = opts.ssh_layout.key_file(&entry.home);
    match users::read_ssh_keys(root, name, opts.ssh_layout) {
        Ok(found) => {
            let found = found.unwrap_or_default();
            if found != user.ssh_authorized_keys {
                let (n, m) = (user.ssh_authorized_keys.len(), found.len());
                let found_where = if root.stat(&key_path).ok().flatten().is_some() {
                    format!("found {m} {} in \"{key_path}\"", plural(m))
                } else {
                    format!("\"{key_path}\" does not exist")
                };
                let e = sha256_hex(users::key_file_contents(&user.ssh_authorized_keys).as_bytes());
                let f = sha256_hex(users::key_file_contents(&found).as_bytes());
                report.mismatches.push(
                    Mismatch::new(
                        MismatchKind::SshKeys,
                        name,
                        format!(
                            "SSH keys of user {name} differ: expected {n} {}, {found_where}",
                            plural(n)
                        ),
                    )
                    .values(e, f),
                );
            }
        }
        Err(e) => report.mismatches.push(Mismatch::new(
            MismatchKind::Error,
            name,
            format!("cannot read the SSH keys of user {name}: {e}"),
        )),
    }
    if let Some(hash) = &user.password_hash {
        let want = users::stored_hash(Some(hash));
        match users::password_hash(root, name) {
            Ok(have) if have == want => {}
            Ok(_) => report.mismatches.push(Mismatch::new(
                MismatchKind::PasswordHash,
                name,
                format!("password hash of user {name} differs from the config"),
            )),
            Err(e) => report.mismatches.push(Mismatch::new(
                MismatchKind::PasswordHash,
                name,
                format!("cannot check the password hash of user {name}: {e}"),
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Unit-file states.
// ---------------------------------------------------------------------------------------------

/// Asks systemd (`org.freedesktop.systemd1.Manager.GetUnitFileState`) for the state of each
/// unit; units systemd does not know are left out of the map (so they read as `None`).
pub async fn unit_file_states(
    conn: &zbus::Connection,
    units: &[String],
) -> Result<HashMap<String, String>, zbus::Error> {
    let mut out = HashMap::new();
    for unit in units {
        let reply = conn
            .call_method(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.systemd1.Manager"),
                "GetUnitFileState",
                &(unit.as_str(),),
            )
            .await;
        match reply {
            Ok(msg) => {
                let state: String = msg.body().deserialize()?;
                out.insert(unit.clone(), state);
            }
            Err(zbus::Error::FDO(e))
                if matches!(
                    *e,
                    zbus::fdo::Error::FileNotFound(_) | zbus::fdo::Error::InvalidArgs(_)
                ) => {}
            Err(zbus::Error::MethodError(name, _, _))
                if name.as_str() == "org.freedesktop.systemd1.NoSuchUnit" => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Unit-file states read from the links in a root, without systemd: `masked` (a `/dev/null`
/// link in `/etc/systemd/system`), `enabled` (a link in some `*.wants`, `*.requires` or
/// `*.upholds` directory of `/etc/systemd/system`), else `disabled` for a unit file with an
/// `[Install]` section, `static` for one without, and `None` when no unit file exists in
/// `/etc/systemd/system`, `/usr/lib/systemd/system` or `/lib/systemd/system`. An approximation
/// of systemd's answer that is good for the units hearth writes (no presets, aliases or
/// `/run`).
#[derive(Debug)]
pub struct OfflineUnitStates<'a> {
    root: &'a fs::Root,
}

impl<'a> OfflineUnitStates<'a> {
    /// States read from `root`.
    pub fn new(root: &'a fs::Root) -> Self {
        OfflineUnitStates { root }
    }
}

const UNIT_SEARCH: [&str; 3] = [UNIT_DIR, "/usr/lib/systemd/system", "/lib/systemd/system"];

impl UnitStates for OfflineUnitStates<'_> {
    fn unit_file_state(&self, unit: &str) -> Option<String> {
        let path = unit_path(unit);
        if is_masked_link(self.root, &path) {
            return Some("masked".into());
        }
        for dir in self.root.list_dir(UNIT_DIR).ok()? {
            if [".wants", ".requires", ".upholds"]
                .iter()
                .any(|s| dir.ends_with(s))
                && self
                    .root
                    .read_link(&format!("{UNIT_DIR}/{dir}/{unit}"))
                    .ok()
                    .flatten()
                    .is_some()
            {
                return Some("enabled".into());
            }
        }
        // Template instances are described by their template's file.
        let template = match unit.split_once('@') {
            Some((pre, rest)) if !rest.starts_with('.') => rest
                .rsplit_once('.')
                .map(|(_, suf)| format!("{pre}@.{suf}")),
            _ => None,
        };
        for dir in UNIT_SEARCH {
            for name in std::iter::once(unit.to_string()).chain(template.clone()) {
                if let Ok(Some(data)) = self.root.read(&format!("{dir}/{name}")) {
                    let text = String::from_utf8_lossy(&data);
                    let installable = text.lines().any(|l| {
                        let l = l.trim_start();
                        ["WantedBy=", "RequiredBy=", "UpheldBy=", "Alias=", "Also="]
                            .iter()
                            .any(|k| l.starts_with(k) && l.len() > k.len())
                    });
                    return Some(if installable { "disabled" } else { "static" }.into());
                }
            }
        }
        None
    }
}
