//! Unit enablement without a running systemd: what `systemctl --root=DIR enable | disable |
//! mask | unmask | preset | is-enabled` do, for `hearth-agent apply --root DIR` (disk images
//! prepared in disconnected sites).
//!
//! Every file is read and every symlink written through [`fs::Root`], so nothing outside the
//! root is ever touched; symbolic links inside the root (absolute ones included) are resolved
//! as if the root were `/`, like `systemctl --root` does.
//!
//! The logic follows systemd 252's `src/shared/install.c` (the version of Debian 12 and RHEL 9):
//!
//! - **Search path** (first match wins): `/etc/systemd/system.control`,
//!   `/run/systemd/system.control`, `/run/systemd/transient`, `/run/systemd/generator.early`,
//!   `/etc/systemd/system`, `/etc/systemd/system.attached`, `/run/systemd/system`,
//!   `/run/systemd/system.attached`, `/run/systemd/generator`, `/usr/local/lib/systemd/system`,
//!   `/usr/lib/systemd/system`, `/lib/systemd/system` (only when it is not the same directory
//!   as `/usr/lib/systemd/system`, i.e. on split-`/usr` images), `/run/systemd/generator.late`.
//!   Links therefore point at `/usr/lib/systemd/system/UNIT` on merged-`/usr` images, as
//!   Fedora CoreOS/RHCOS's systemctl writes them (Debian's systemctl, built for split `/usr`,
//!   writes `/lib/systemd/system/UNIT`: the same file).
//! - **enable**: the unit file's `[Install]` section (and its drop-ins' `[Install]` sections,
//!   `UNIT.d/*.conf` and, for instances, `TEMPLATE.d/*.conf`): `WantedBy=T` →
//!   `/etc/systemd/system/T.wants/UNIT`, `RequiredBy=T` → `T.requires/UNIT`, `Alias=A` →
//!   `/etc/systemd/system/A`, each a symlink to the unit file's path; `Also=` units are enabled
//!   too. Templates: an instance `foo@bar.service` links the template's file under its own name;
//!   a template `foo@.service` is enabled as `foo@DEFAULT.service` with `DefaultInstance=`, and
//!   without it only for template targets (`WantedBy=x@.target`), else it is an error. The
//!   specifiers `%n %N %p %P %i %I %j %J %f %%` are expanded. Existing links to somewhere else
//!   are replaced (`--force`), regular files never. A unit without `[Install]` rules is not an
//!   error (logged), as with systemctl.
//! - **disable**: removes every symlink below `/etc/systemd/system` (recursively) that is named
//!   like the unit (or its template) or resolves to a file of that name, then links to the
//!   removed links, and empty directories left behind; `Also=` units are disabled too. A masked
//!   unit is left alone.
//! - **mask**: `/etc/systemd/system/UNIT -> /dev/null` (refused over a regular file).
//! - **unmask**: removes `/etc/systemd/system/UNIT` if it is a link to `/dev/null` (or an empty
//!   file), and links to it.
//! - **preset**: `*.preset` files of `/etc/systemd/system-preset`, `/run/systemd/system-preset`,
//!   `/usr/local/lib/systemd/system-preset`, `/usr/lib/systemd/system-preset` (and
//!   `/lib/systemd/system-preset` on split-`/usr` images); a file name in an earlier directory
//!   hides the same name in later ones (a link to `/dev/null` hides it altogether); all files
//!   are read in the lexicographic order of their names; the first `enable PATTERN
//!   [INSTANCE...]` or `disable PATTERN` line whose glob matches decides. When no line matches,
//!   the unit is **enabled** (systemd.preset(5): "If no preset files exist, preset operations
//!   will enable all units"; systemd's `query_presets` enables on no match). Aliases are
//!   skipped. Preset-enabling a masked unit is an error, as with systemctl.
//! - **is-enabled**: `enabled`, `enabled-runtime`, `linked`, `linked-runtime`, `alias`,
//!   `masked`, `masked-runtime`, `static`, `indirect`, `disabled`, `generated`, `transient`,
//!   computed as systemd's `unit_file_lookup_state` does.
//!
//! Not done: user units, `--runtime`, `reenable`, `link`, unit files given as paths,
//! `UpheldBy=` (systemd 254+), specifiers that depend on the running system (`%H`, `%m`, `%b`,
//! `%v`, `%u`, ...: an error naming them).

use std::collections::{HashSet, VecDeque};

use crate::fs::{EntryKind, FsError, Root};

/// The persistent configuration directory, where enablement symlinks are written.
pub const CONFIG_DIR: &str = "/etc/systemd/system";

const SYMLINK_MAX: usize = 64;
const GENERATOR_DIRS: [&str; 3] = [
    "/run/systemd/generator.early",
    "/run/systemd/generator",
    "/run/systemd/generator.late",
];
const TRANSIENT_DIR: &str = "/run/systemd/transient";
const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
];

/// What went wrong with an offline enablement operation.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// Not a valid unit name (`name.service`, `name@instance.timer`, ...).
    #[error("\"{unit}\" is not a valid unit name")]
    InvalidName {
        /// The name.
        unit: String,
    },
    /// No unit file of that name (nor, for an instance, of its template) in the search path.
    #[error("unit {unit} does not exist: no unit file of that name in {root}")]
    NoSuchUnit {
        /// The unit.
        unit: String,
        /// The root directory searched.
        root: String,
    },
    /// The unit is masked, so it cannot be enabled.
    #[error("unit {unit} is masked ({path} is a link to /dev/null or empty)")]
    Masked {
        /// The unit.
        unit: String,
        /// The masking file (inside the root).
        path: String,
    },
    /// A file that is not a symbolic link is where a link must go.
    #[error(
        "{path} exists and is not a symbolic link: refusing to replace it with a link to {target}"
    )]
    Exists {
        /// The path (inside the root).
        path: String,
        /// The link target that was to be written.
        target: String,
    },
    /// The unit's `[Install]` section (or its files) cannot be acted on.
    #[error("cannot {op} {unit}: {problem}")]
    Install {
        /// `enable`, `disable`, ...
        op: &'static str,
        /// The unit.
        unit: String,
        /// What is wrong.
        problem: String,
    },
    /// A file operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
}

// ---------------------------------------------------------------------------------------------
// Unit names
// ---------------------------------------------------------------------------------------------

/// The parts of a unit name: `prefix@instance.suffix`; `instance` is `Some("")` for templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnitName<'a> {
    prefix: &'a str,
    instance: Option<&'a str>,
    suffix: &'a str,
}

fn valid_char(c: char, allow_at: bool) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.' | '\\') || (allow_at && c == '@')
}

fn parse_name(name: &str) -> Option<UnitName<'_>> {
    if name.is_empty() || name.len() >= 256 {
        return None;
    }
    let (stem, suffix) = name.rsplit_once('.')?;
    if !UNIT_TYPES.contains(&suffix) {
        return None;
    }
    let (prefix, instance) = match stem.split_once('@') {
        Some((p, i)) => (p, Some(i)),
        None => (stem, None),
    };
    if prefix.is_empty() || !prefix.chars().all(|c| valid_char(c, false)) {
        return None;
    }
    if let Some(i) = instance {
        if !i.chars().all(|c| valid_char(c, true)) {
            return None;
        }
    }
    Some(UnitName {
        prefix,
        instance,
        suffix,
    })
}

fn is_valid_name(name: &str) -> bool {
    parse_name(name).is_some()
}

fn is_template(name: &str) -> bool {
    matches!(
        parse_name(name),
        Some(UnitName {
            instance: Some(""),
            ..
        })
    )
}

fn is_instance(name: &str) -> bool {
    matches!(parse_name(name), Some(UnitName { instance: Some(i), .. }) if !i.is_empty())
}

/// `foo@bar.service` → `foo@.service`; `None` for names without `@`.
fn template_of(name: &str) -> Option<String> {
    let n = parse_name(name)?;
    n.instance?;
    Some(format!("{}@.{}", n.prefix, n.suffix))
}

fn instance_of(name: &str) -> Option<&str> {
    parse_name(name)?.instance
}

/// `foo@.service` (or `foo@x.service`) with `bar` → `foo@bar.service`.
fn replace_instance(name: &str, instance: &str) -> Option<String> {
    let n = parse_name(name)?;
    n.instance?;
    Some(format!("{}@{}.{}", n.prefix, instance, n.suffix))
}

fn validate(unit: &str) -> Result<(), OfflineError> {
    if is_valid_name(unit) {
        Ok(())
    } else {
        Err(OfflineError::InvalidName {
            unit: unit.to_string(),
        })
    }
}

/// `\xNN` escapes decoded (systemd's `unit_name_unescape`).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() && bytes[i + 1] == b'x' {
            let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `%n %N %p %P %i %I %j %J %f %%` of `[Install]` values (systemd's `install_name_printf`).
fn printf(name: &str, value: &str) -> Result<String, String> {
    if !value.contains('%') {
        return Ok(value.to_string());
    }
    let parts = parse_name(name).ok_or_else(|| format!("invalid unit name {name}"))?;
    let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
    let instance = parts.instance.unwrap_or("");
    let last_of_prefix = parts.prefix.rsplit('-').next().unwrap_or(parts.prefix);
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = chars
            .next()
            .ok_or_else(|| format!("\"{value}\" ends with a lone %"))?;
        match spec {
            '%' => out.push('%'),
            'n' => out.push_str(name),
            'N' => out.push_str(stem),
            'p' => out.push_str(parts.prefix),
            'P' => out.push_str(&unescape(parts.prefix)),
            'i' => out.push_str(instance),
            'I' => out.push_str(&unescape(instance)),
            'j' => out.push_str(last_of_prefix),
            'J' => out.push_str(&unescape(last_of_prefix)),
            'f' => {
                let src = if instance.is_empty() {
                    parts.prefix
                } else {
                    instance
                };
                let path = unescape(&src.replace('-', "/"));
                out.push('/');
                out.push_str(path.trim_start_matches('/'));
            }
            other => {
                return Err(format!(
                    "the specifier %{other} in \"{value}\" depends on the running system and is \
                     not supported offline"
                ))
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Paths inside the root
// ---------------------------------------------------------------------------------------------

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn dirname(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `path` is `dir` or below it (component-wise).
fn path_starts_with(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A root, the search path found in it, and the changes made.
struct Ctx<'a> {
    root: &'a Root,
    search: Vec<String>,
    /// Resolved directories (one operation never creates or removes directory symlinks, so a
    /// resolution stays valid while it runs).
    dirs: std::cell::RefCell<std::collections::HashMap<String, String>>,
}

impl<'a> Ctx<'a> {
    fn new(root: &'a Root) -> Result<Ctx<'a>, OfflineError> {
        let mut ctx = Ctx {
            root,
            search: Vec::new(),
            dirs: Default::default(),
        };
        let split_usr_lib = !ctx.same_dir("/lib/systemd/system", "/usr/lib/systemd/system")?;
        let mut search: Vec<String> = [
            "/etc/systemd/system.control",
            "/run/systemd/system.control",
            TRANSIENT_DIR,
            GENERATOR_DIRS[0],
            CONFIG_DIR,
            "/etc/systemd/system.attached",
            "/run/systemd/system",
            "/run/systemd/system.attached",
            GENERATOR_DIRS[1],
            "/usr/local/lib/systemd/system",
            "/usr/lib/systemd/system",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if split_usr_lib {
            search.push("/lib/systemd/system".into());
        }
        search.push(GENERATOR_DIRS[2].into());
        ctx.search = search;
        Ok(ctx)
    }

    fn root_name(&self) -> String {
        self.root.path().display().to_string()
    }

    /// Whether two directories are the same one (after resolving symlinks), e.g. `/lib/x` and
    /// `/usr/lib/x` on merged-`/usr` systems. Missing directories are not the same.
    fn same_dir(&self, a: &str, b: &str) -> Result<bool, OfflineError> {
        let (ra, rb) = (self.chase(a, true)?, self.chase(b, true)?);
        if ra != rb {
            return Ok(false);
        }
        Ok(matches!(
            self.root.stat(&ra)?,
            Some(st) if st.kind == EntryKind::Dir
        ))
    }

    /// Resolves `path` inside the root as if it were `/`: `.` and `..` are dropped, symlinks are
    /// followed (absolute ones relative to the root; the last component only if `follow_last`);
    /// a missing component ends the resolution and the rest is appended as it is (systemd's
    /// `chase_symlinks(CHASE_NONEXISTENT)`).
    fn chase(&self, path: &str, follow_last: bool) -> Result<String, OfflineError> {
        let mut done: Vec<String> = Vec::new();
        let mut todo: VecDeque<String> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        let mut hops = 0;
        let mut missing = false;
        while let Some(comp) = todo.pop_front() {
            match comp.as_str() {
                "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => {}
            }
            if missing || (todo.is_empty() && !follow_last) {
                done.push(comp);
                continue;
            }
            let candidate = format!("/{}", {
                let mut v = done.clone();
                v.push(comp.clone());
                v.join("/")
            });
            match self.root.stat(&candidate)? {
                None => {
                    missing = true;
                    done.push(comp);
                }
                Some(st) if st.kind == EntryKind::Symlink => {
                    hops += 1;
                    if hops > SYMLINK_MAX {
                        return Err(OfflineError::Install {
                            op: "resolve",
                            unit: path.to_string(),
                            problem: format!("{candidate}: too many levels of symbolic links"),
                        });
                    }
                    let target = self.root.read_link(&candidate)?.unwrap_or_default();
                    if target.starts_with('/') {
                        done.clear();
                    }
                    for c in target.split('/').filter(|c| !c.is_empty()).rev() {
                        todo.push_front(c.to_string());
                    }
                }
                Some(_) => done.push(comp),
            }
        }
        Ok(format!("/{}", done.join("/")))
    }

    /// `path` with its directories resolved (the last component kept as it is).
    fn resolve_parent(&self, path: &str) -> Result<String, OfflineError> {
        let dir = self.resolve_dir(dirname(path))?;
        Ok(join(&dir, basename(path)))
    }

    /// `chase(dir, true)`, remembered.
    fn resolve_dir(&self, dir: &str) -> Result<String, OfflineError> {
        if let Some(resolved) = self.dirs.borrow().get(dir) {
            return Ok(resolved.clone());
        }
        let resolved = self.chase(dir, true)?;
        self.dirs
            .borrow_mut()
            .insert(dir.to_string(), resolved.clone());
        Ok(resolved)
    }

    fn lstat(&self, path: &str) -> Result<Option<crate::fs::Stat>, OfflineError> {
        Ok(self.root.stat(&self.resolve_parent(path)?)?)
    }

    fn read_link(&self, path: &str) -> Result<Option<String>, OfflineError> {
        Ok(self.root.read_link(&self.resolve_parent(path)?)?)
    }

    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, OfflineError> {
        let resolved = self.chase(path, true)?;
        match self.root.stat(&resolved)? {
            Some(st) if st.kind == EntryKind::File => Ok(self.root.read(&resolved)?),
            _ => Ok(None),
        }
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<String>, OfflineError> {
        let resolved = self.resolve_dir(dir)?;
        match self.root.stat(&resolved)? {
            Some(st) if st.kind == EntryKind::Dir => Ok(self.root.list_dir(&resolved)?),
            _ => Ok(Vec::new()),
        }
    }

    /// systemd's `null_or_empty_path`: `/dev/null`, a device, or an empty regular file
    /// (following symlinks). Missing: `None`.
    fn null_or_empty(&self, path: &str) -> Result<Option<bool>, OfflineError> {
        if path == "/dev/null" {
            return Ok(Some(true));
        }
        let resolved = self.chase(path, true)?;
        if resolved == "/dev/null" {
            return Ok(Some(true));
        }
        Ok(self.root.stat(&resolved)?.map(|st| match st.kind {
            EntryKind::File => st.size == 0,
            EntryKind::Other => true,
            _ => false,
        }))
    }

    fn in_search_path(&self, path: &str) -> bool {
        self.search.iter().any(|d| d == dirname(path))
    }

    fn underneath_search_path(&self, path: &str) -> bool {
        self.search.iter().any(|d| path_starts_with(path, d))
    }

    // -----------------------------------------------------------------------------------------
    // Finding unit files
    // -----------------------------------------------------------------------------------------

    /// What is at `path`: `None` when nothing.
    fn classify(&self, op: &'static str, path: &str) -> Result<Option<Kind>, OfflineError> {
        let Some(st) = self.lstat(path)? else {
            return Ok(None);
        };
        Ok(Some(match st.kind {
            EntryKind::File if st.size == 0 => Kind::Masked,
            EntryKind::File => Kind::Regular,
            EntryKind::Other => Kind::Masked,
            EntryKind::Dir => {
                return Err(OfflineError::Install {
                    op,
                    unit: basename(path).to_string(),
                    problem: format!("{path} is a directory"),
                })
            }
            EntryKind::Symlink => {
                let target = self.read_link(path)?.unwrap_or_default();
                let abs = if target.starts_with('/') {
                    target
                } else {
                    join(dirname(path), &target)
                };
                let simplified = self.chase(&abs, false)?;
                if self.null_or_empty(&simplified)? == Some(true) {
                    Kind::Masked
                } else if self.underneath_search_path(&simplified) {
                    if basename(&simplified) == basename(path) {
                        // systemd 252 ("unit self-alias ... ignoring", then ELOOP) refuses a
                        // link to a unit file of the same name in the search path.
                        return Err(OfflineError::Install {
                            op,
                            unit: basename(path).to_string(),
                            problem: format!(
                                "{path} is a link to {simplified}, a unit file of the same name \
                                 in the search path; systemd refuses to work with such links \
                                 (remove the link, or copy the file)"
                            ),
                        });
                    }
                    Kind::Alias(simplified)
                } else {
                    Kind::Linked(simplified)
                }
            }
        }))
    }

    /// The first unit file named `name` in the search path (for an instance, then its
    /// template's).
    fn search(&self, op: &'static str, name: &str) -> Result<Option<(String, Kind)>, OfflineError> {
        let mut names = vec![name.to_string()];
        if is_instance(name) {
            names.extend(template_of(name));
        }
        for n in &names {
            for dir in &self.search {
                let path = join(dir, n);
                if let Some(kind) = self.classify(op, &path)? {
                    return Ok(Some((path, kind)));
                }
            }
        }
        Ok(None)
    }

    /// Finds the unit file of `name`, following aliases and linked unit files, and reads its
    /// `[Install]` section (systemd's `install_info_discover`).
    fn discover(&self, op: &'static str, name: &str) -> Result<Info, OfflineError> {
        let not_found = |unit: &str| OfflineError::NoSuchUnit {
            unit: unit.to_string(),
            root: self.root_name(),
        };
        let mut name = name.to_string();
        let (mut path, mut kind) = self.search(op, &name)?.ok_or_else(|| not_found(&name))?;
        for _ in 0..SYMLINK_MAX {
            match kind {
                Kind::Regular => {
                    let install = self.load_install(op, &name, &path)?;
                    return Ok(Info {
                        name,
                        path,
                        masked: false,
                        install,
                    });
                }
                Kind::Masked => {
                    return Ok(Info {
                        name,
                        path,
                        masked: true,
                        install: Install::default(),
                    })
                }
                Kind::Linked(target) => {
                    kind = self
                        .classify(op, &target)?
                        .ok_or_else(|| OfflineError::Install {
                            op,
                            unit: name.clone(),
                            problem: format!("{path} is a link to {target}, which does not exist"),
                        })?;
                    path = target;
                }
                Kind::Alias(target) => {
                    let mut bn = basename(&target).to_string();
                    if bn == name {
                        kind = self
                            .classify(op, &target)?
                            .ok_or_else(|| not_found(&name))?;
                        path = target;
                        continue;
                    }
                    if is_instance(&name) && is_template(&bn) {
                        let inst = instance_of(&name).unwrap_or_default().to_string();
                        let filled = replace_instance(&bn, &inst).unwrap_or_default();
                        if filled == name {
                            kind = self
                                .classify(op, &target)?
                                .ok_or_else(|| not_found(&name))?;
                            path = target;
                            continue;
                        }
                        bn = filled;
                    }
                    if !is_valid_name(&bn) {
                        return Err(OfflineError::Install {
                            op,
                            unit: name,
                            problem: format!("{path} is a link to {target}, not to a unit file"),
                        });
                    }
                    let (p, k) = self.search(op, &bn)?.ok_or_else(|| OfflineError::Install {
                        op,
                        unit: name.clone(),
                        problem: format!("{path} is an alias of {bn}, which does not exist"),
                    })?;
                    name = bn;
                    path = p;
                    kind = k;
                }
            }
        }
        Err(OfflineError::Install {
            op,
            unit: name,
            problem: "too many levels of aliases".into(),
        })
    }

    /// `[Install]` of the unit file at `path` and of its drop-ins.
    fn load_install(
        &self,
        op: &'static str,
        name: &str,
        path: &str,
    ) -> Result<Install, OfflineError> {
        let mut install = Install::default();
        let content = self.read(path)?.unwrap_or_default();
        parse_install(name, &String::from_utf8_lossy(&content), &mut install).map_err(
            |problem| OfflineError::Install {
                op,
                unit: name.to_string(),
                problem: format!("{path}: {problem}"),
            },
        )?;
        for dropin in self.dropins(name)? {
            if self.null_or_empty(&dropin)? != Some(false) {
                continue;
            }
            let content = self.read(&dropin)?.unwrap_or_default();
            parse_install(name, &String::from_utf8_lossy(&content), &mut install).map_err(
                |problem| OfflineError::Install {
                    op,
                    unit: name.to_string(),
                    problem: format!("{dropin}: {problem}"),
                },
            )?;
        }
        Ok(install)
    }

    /// `NAME.d/*.conf` (then `TEMPLATE.d/*.conf`) in the search path; the first directory with
    /// a file name wins; ordered by file name.
    fn dropins(&self, name: &str) -> Result<Vec<String>, OfflineError> {
        let mut dirs: Vec<String> = self
            .search
            .iter()
            .map(|d| join(d, &format!("{name}.d")))
            .collect();
        if let Some(t) = template_of(name).filter(|t| t != name) {
            dirs.extend(self.search.iter().map(|d| join(d, &format!("{t}.d"))));
        }
        conf_files(self, &dirs, ".conf")
    }

    // -----------------------------------------------------------------------------------------
    // Symlinks
    // -----------------------------------------------------------------------------------------

    /// Creates `link -> target` unless an equivalent link is there; replaces other links;
    /// refuses to replace anything else.
    fn create_symlink(&self, target: &str, link: &str) -> Result<(), OfflineError> {
        let resolved = self.resolve_parent(link)?;
        match self.root.stat(&resolved)? {
            None => {}
            Some(st) if st.kind == EntryKind::Symlink => {
                let existing = self.root.read_link(&resolved)?.unwrap_or_default();
                if self.links_equivalent(link, &existing, target)? {
                    tracing::debug!("{link} -> {existing} is already there");
                    return Ok(());
                }
                tracing::info!("replacing {link} -> {existing}");
            }
            Some(_) => {
                return Err(OfflineError::Exists {
                    path: link.to_string(),
                    target: target.to_string(),
                })
            }
        }
        self.root.symlink_atomic(&resolved, target)?;
        tracing::info!("created symlink {link} -> {target}");
        Ok(())
    }

    /// systemd's `chroot_unit_symlinks_equivalent`: the same file, or the same name and both in
    /// the search path.
    fn links_equivalent(&self, link: &str, a: &str, b: &str) -> Result<bool, OfflineError> {
        let abs = |t: &str| {
            if t.starts_with('/') {
                t.to_string()
            } else {
                join(dirname(link), t)
            }
        };
        let (a, b) = (abs(a), abs(b));
        if self.chase(&a, true)? == self.chase(&b, true)? {
            return Ok(true);
        }
        Ok(basename(&a) == basename(&b)
            && self.underneath_search_path(&a)
            && self.underneath_search_path(&b))
    }

    /// Removes every symlink below `/etc/systemd/system` that is named like a marked name (or
    /// whose template is), or that resolves to a marked path or a file with a marked name; then
    /// the links to the removed links (systemd's `remove_marked_symlinks`).
    fn remove_marked_symlinks(&self, marks: &mut HashSet<String>) -> Result<(), OfflineError> {
        if marks.is_empty() {
            return Ok(());
        }
        loop {
            let mut restart = false;
            self.remove_marked_in(CONFIG_DIR, marks, &mut restart)?;
            if !restart {
                return Ok(());
            }
        }
    }

    fn remove_marked_in(
        &self,
        dir: &str,
        marks: &mut HashSet<String>,
        restart: &mut bool,
    ) -> Result<(), OfflineError> {
        for entry in self.list_dir(dir)? {
            let path = join(dir, &entry);
            let Some(st) = self.lstat(&path)? else {
                continue;
            };
            match st.kind {
                EntryKind::Dir => self.remove_marked_in(&path, marks, restart)?,
                EntryKind::Symlink => {
                    if !is_valid_name(&entry) {
                        continue;
                    }
                    let mut found = marks.contains(&entry)
                        || template_of(&entry).is_some_and(|t| marks.contains(&t));
                    if !found {
                        match self.chase(&path, true) {
                            Ok(dest) => {
                                found = marks.contains(&dest) || marks.contains(basename(&dest));
                            }
                            Err(e) => tracing::warn!("{path}: cannot resolve: {e}"),
                        }
                    }
                    if !found {
                        continue;
                    }
                    if self.root.remove(&self.resolve_parent(&path)?)? {
                        tracing::info!("removed {path}");
                    }
                    self.remove_empty_parents(&path)?;
                    if marks.insert(path) {
                        *restart = true;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Removes the empty directories above `path`, up to (not including) the config directory.
    fn remove_empty_parents(&self, path: &str) -> Result<(), OfflineError> {
        let mut dir = dirname(path).to_string();
        while path_starts_with(&dir, CONFIG_DIR) && dir != CONFIG_DIR {
            let resolved = self.resolve_parent(&dir)?;
            if !self.root.remove_empty_dir(&resolved)? {
                break;
            }
            dir = dirname(&dir).to_string();
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // enable / disable
    // -----------------------------------------------------------------------------------------

    /// Enables the units of `queue` (the first one must exist and not be masked; `Also=` units
    /// are auxiliary: missing or masked ones are skipped). `preset` skips template links that
    /// need an instance, as `systemctl preset` does.
    fn enable_all(&self, op: &'static str, first: Info, preset: bool) -> Result<(), OfflineError> {
        let mut processed: HashSet<String> = HashSet::new();
        let mut queue: VecDeque<(String, Option<Info>)> = VecDeque::new();
        let first_name = first.name.clone();
        queue.push_back((first.name.clone(), Some(first)));
        let mut rules = 0;
        while let Some((name, info)) = queue.pop_front() {
            if !processed.insert(name.clone()) {
                continue;
            }
            let info = match info {
                Some(info) => info,
                None => match self.discover(op, &name) {
                    Ok(info) => info,
                    Err(e) => {
                        tracing::warn!("{op}: skipping {name} (from Also=): {e}");
                        continue;
                    }
                },
            };
            if info.masked {
                tracing::info!("{op}: unit {name} is masked, ignoring");
                continue;
            }
            rules += self.apply(op, &info, preset)?;
            for also in &info.install.also {
                queue.push_back((also.clone(), None));
            }
        }
        if rules == 0 {
            tracing::info!(
                "{op}: {first_name} has no [Install] rules (WantedBy=, RequiredBy=, Alias=): \
                 nothing to link; such units are started by other units' dependencies"
            );
        }
        Ok(())
    }

    /// The links of one unit (systemd's `install_info_apply`); returns the number of rules.
    fn apply(&self, op: &'static str, info: &Info, preset: bool) -> Result<usize, OfflineError> {
        let err = |problem: String| OfflineError::Install {
            op,
            unit: info.name.clone(),
            problem,
        };
        if GENERATOR_DIRS.contains(&dirname(&info.path)) || dirname(&info.path) == TRANSIENT_DIR {
            return Err(err(format!("{} is generated or transient", info.path)));
        }
        // A linked unit file (outside the search path) gets its link in /etc/systemd/system.
        if !self.in_search_path(&info.path) {
            self.create_symlink(&info.path, &join(CONFIG_DIR, &info.name))?;
        }
        for alias in &info.install.aliases {
            let dst = printf(&info.name, alias).map_err(err)?;
            let Some(dst) = verify_alias(&info.name, &dst).map_err(err)? else {
                continue;
            };
            self.create_symlink(&info.path, &join(CONFIG_DIR, &dst))?;
        }
        self.symlink_wants(op, info, &info.install.wanted_by, ".wants", preset)?;
        self.symlink_wants(op, info, &info.install.required_by, ".requires", preset)?;
        Ok(info.install.aliases.len()
            + info.install.wanted_by.len()
            + info.install.required_by.len())
    }

    fn symlink_wants(
        &self,
        op: &'static str,
        info: &Info,
        list: &[String],
        suffix: &str,
        preset: bool,
    ) -> Result<(), OfflineError> {
        if list.is_empty() {
            return Ok(());
        }
        let err = |problem: String| OfflineError::Install {
            op,
            unit: info.name.clone(),
            problem,
        };
        let mut needs_instance_or_template = false;
        let link_name = if !is_template(&info.name) {
            info.name.clone()
        } else if let Some(default) = &info.install.default_instance {
            let instance = replace_instance(&info.name, default)
                .filter(|n| is_valid_name(n))
                .ok_or_else(|| err(format!("invalid DefaultInstance={default}")))?;
            // A mask of that very instance wins.
            for dir in &self.search {
                let p = join(dir, &instance);
                if let Some(Kind::Masked) = self.classify(op, &p)? {
                    return Err(OfflineError::Masked {
                        unit: instance,
                        path: p,
                    });
                }
            }
            instance
        } else {
            needs_instance_or_template = true;
            info.name.clone()
        };
        for target in list {
            let dst = printf(&info.name, target).map_err(err)?;
            if needs_instance_or_template {
                if !(is_template(&dst) || is_instance(&dst)) {
                    if preset {
                        continue;
                    }
                    let example = replace_instance(&info.name, "INSTANCE").unwrap_or_default();
                    return Err(err(format!(
                        "it is a template without DefaultInstance= and {dst} (from \
                         {}By=) is not a template unit; enable an instance such as {example}",
                        if suffix == ".wants" {
                            "Wanted"
                        } else {
                            "Required"
                        }
                    )));
                }
            } else if !is_valid_name(&dst) {
                return Err(err(format!("\"{dst}\" is not a valid unit name")));
            }
            let link = join(CONFIG_DIR, &format!("{dst}{suffix}/{link_name}"));
            self.create_symlink(&info.path, &link)?;
        }
        Ok(())
    }

    /// Disables `name` and its `Also=` units (systemd's `do_unit_file_disable`).
    fn disable_names(&self, op: &'static str, names: Vec<String>) -> Result<(), OfflineError> {
        let mut marks: HashSet<String> = HashSet::new();
        let mut processed: HashSet<String> = HashSet::new();
        let mut queue: VecDeque<String> = names.into();
        while let Some(name) = queue.pop_front() {
            if !processed.insert(name.clone()) {
                continue;
            }
            match self.discover(op, &name) {
                Ok(info) if info.masked => {
                    tracing::info!("{op}: unit {name} is masked, ignoring");
                }
                Ok(info) => {
                    queue.extend(info.install.also.iter().cloned());
                    marks.insert(info.name);
                }
                Err(e) => {
                    tracing::debug!("{op}: {name}: {e}; removing links by name");
                    marks.insert(name);
                }
            }
        }
        self.remove_marked_symlinks(&mut marks)
    }

    // -----------------------------------------------------------------------------------------
    // is-enabled
    // -----------------------------------------------------------------------------------------

    fn state(&self, name: &str) -> Result<String, OfflineError> {
        let info = self.discover("query", name)?;
        if info.masked {
            return Ok(if info.path.starts_with("/run/") {
                "masked-runtime"
            } else {
                "masked"
            }
            .into());
        }
        if name != basename(&info.path) && !is_instance(&info.name) {
            return Ok("alias".into());
        }
        if GENERATOR_DIRS.contains(&dirname(&info.path)) {
            return Ok("generated".into());
        }
        if dirname(&info.path) == TRANSIENT_DIR {
            return Ok("transient".into());
        }
        if let Some(state) = self.find_symlinks_in_scope(&info, true)? {
            return Ok(state.into());
        }
        if self.find_symlinks_in_scope(&info, false)?.is_some() {
            return Ok("indirect".into());
        }
        let install = &info.install;
        Ok(if install.has_rules() {
            "disabled"
        } else if !install.also.is_empty() {
            "indirect"
        } else {
            "static"
        }
        .into())
    }

    /// systemd's `find_symlinks_in_scope`.
    fn find_symlinks_in_scope(
        &self,
        info: &Info,
        match_name: bool,
    ) -> Result<Option<&'static str>, OfflineError> {
        let mut same_name_link_config = false;
        let mut same_name_link_runtime = false;
        let mut enabled_in_runtime = false;
        let mut enabled_at_all = false;
        let mut ignore_same_name = false;
        for dir in &self.search {
            let (found, same_name_link) =
                self.find_symlinks(info, match_name, ignore_same_name, dir)?;
            let runtime = dir.starts_with("/run/");
            if found {
                if dir == CONFIG_DIR {
                    return Ok(Some("enabled"));
                }
                if runtime {
                    enabled_in_runtime = true;
                } else {
                    enabled_at_all = true;
                }
            } else if same_name_link {
                if dir == CONFIG_DIR {
                    same_name_link_config = true;
                } else if runtime {
                    same_name_link_runtime = true;
                }
            }
            if !ignore_same_name && path_starts_with(&info.path, dir) {
                ignore_same_name = true;
            }
        }
        Ok(if enabled_in_runtime {
            Some("enabled-runtime")
        } else if enabled_at_all && is_instance(&info.name) {
            Some("static")
        } else if same_name_link_config {
            Some("linked")
        } else if same_name_link_runtime {
            Some("linked-runtime")
        } else {
            None
        })
    }

    /// systemd's `find_symlinks`: links in `DIR/*.wants|*.requires` named like the unit (or an
    /// instance of it), then links in `DIR` named like it or pointing at a file of its name.
    /// Returns (found, same-name link in DIR).
    fn find_symlinks(
        &self,
        info: &Info,
        match_name: bool,
        ignore_same_name: bool,
        dir: &str,
    ) -> Result<(bool, bool), OfflineError> {
        let entries = self.list_dir(dir)?;
        let mut same_name_link = false;
        for entry in &entries {
            if !(entry.ends_with(".wants") || entry.ends_with(".requires")) {
                continue;
            }
            let sub = join(dir, entry);
            if !matches!(self.lstat(&sub)?, Some(st) if st.kind == EntryKind::Dir) {
                continue;
            }
            for link in self.list_dir(&sub)? {
                if !matches!(self.lstat(&join(&sub, &link))?, Some(st) if st.kind == EntryKind::Symlink)
                {
                    continue;
                }
                let found = link == info.name || template_of(&link).as_deref() == Some(&info.name);
                if found && (!match_name || info.is_known_name(&link)) {
                    return Ok((true, same_name_link));
                }
            }
        }
        for link in &entries {
            let path = join(dir, link);
            if !matches!(self.lstat(&path)?, Some(st) if st.kind == EntryKind::Symlink) {
                continue;
            }
            let dest = self.read_link(&path)?.unwrap_or_default();
            let found_dest = basename(&dest) == info.name;
            let found_path = !ignore_same_name && *link == info.name;
            if found_path && found_dest {
                same_name_link = true;
            } else if (found_path || found_dest) && (!match_name || info.is_known_name(link)) {
                return Ok((true, same_name_link));
            }
        }
        Ok((false, same_name_link))
    }
}

/// What a search-path entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Regular,
    Masked,
    /// A symlink into the search path (the resolved target).
    Alias(String),
    /// A symlink out of the search path (the resolved target).
    Linked(String),
}

/// A unit found: its name (the alias target's after following aliases), the file's path, and
/// its `[Install]` section.
#[derive(Debug, Clone)]
struct Info {
    name: String,
    path: String,
    masked: bool,
    install: Install,
}

impl Info {
    /// systemd's `is_symlink_with_known_name`.
    fn is_known_name(&self, name: &str) -> bool {
        if name == self.name || self.install.aliases.iter().any(|a| a == name) {
            return true;
        }
        match (&self.install.default_instance, is_template(&self.name)) {
            (Some(default), true) => replace_instance(&self.name, default).as_deref() == Some(name),
            _ => false,
        }
    }
}

/// The `[Install]` section. `also` and `default_instance` are already expanded (as systemd does
/// when parsing); the others are expanded when links are made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Install {
    aliases: Vec<String>,
    wanted_by: Vec<String>,
    required_by: Vec<String>,
    also: Vec<String>,
    default_instance: Option<String>,
}

impl Install {
    fn has_rules(&self) -> bool {
        !self.aliases.is_empty() || !self.wanted_by.is_empty() || !self.required_by.is_empty()
    }
}

/// Words of a list value: whitespace-separated, quotes removed.
fn words(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in value.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// Reads the `[Install]` keys of a unit file (or drop-in) into `install` (systemd's
/// `config_parse` with the install table: comments `#`/`;`, `\` continuation lines, an empty
/// assignment resets a list).
fn parse_install(name: &str, text: &str, install: &mut Install) -> Result<(), String> {
    let mut section = String::new();
    let mut continuation: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if continuation.is_some() && (line.starts_with('#') || line.starts_with(';')) {
            continue;
        }
        let mut full = match continuation.take() {
            Some(mut c) => {
                c.push_str(line);
                c
            }
            None => {
                if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                    continue;
                }
                line.to_string()
            }
        };
        if full.ends_with('\\') {
            full.pop();
            full.push(' ');
            continuation = Some(full);
            continue;
        }
        let full = full.trim();
        if full.starts_with('[') && full.ends_with(']') {
            section = full[1..full.len() - 1].to_string();
            continue;
        }
        if section != "Install" {
            continue;
        }
        let Some((key, value)) = full.split_once('=') else {
            tracing::warn!("{name}: [Install]: ignoring line without '=': {full}");
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let list = match key {
            "Alias" => {
                if name.ends_with(".device") {
                    tracing::warn!("{name}: Alias= is not allowed for device units, ignoring");
                    continue;
                }
                &mut install.aliases
            }
            "WantedBy" => &mut install.wanted_by,
            "RequiredBy" => &mut install.required_by,
            "Also" => {
                if value.is_empty() {
                    install.also.clear();
                }
                for word in words(value) {
                    let unit = printf(name, &word)?;
                    if !install.also.contains(&unit) {
                        install.also.push(unit);
                    }
                }
                continue;
            }
            "DefaultInstance" => {
                if !is_template(name) {
                    // An instance ignores it silently; other units make no sense of it.
                    continue;
                }
                let value = printf(name, value)?;
                install.default_instance = if value.is_empty() {
                    None
                } else if value.chars().all(|c| valid_char(c, true)) {
                    Some(value)
                } else {
                    tracing::warn!("{name}: invalid DefaultInstance={value}, ignoring");
                    continue;
                };
                continue;
            }
            other => {
                tracing::debug!("{name}: unknown [Install] key {other}, ignoring");
                continue;
            }
        };
        if value.is_empty() {
            list.clear();
        } else {
            list.extend(words(value));
        }
    }
    Ok(())
}

/// Checks an `Alias=` value against the unit (systemd's `unit_file_verify_alias`): returns the
/// link name (with the instance filled in for a template alias of an instance), `None` for an
/// alias to the unit itself.
fn verify_alias(name: &str, dst: &str) -> Result<Option<String>, String> {
    if let Some((dir, link)) = dst.rsplit_once('/') {
        // Legacy: Alias=foo.target.wants/bar.service.
        let unit = dir
            .strip_suffix(".wants")
            .or_else(|| dir.strip_suffix(".requires"))
            .ok_or_else(|| format!("invalid alias \"{dst}\""))?;
        if !is_valid_name(unit) || dir.contains('/') {
            return Err(format!("invalid alias \"{dst}\""));
        }
        let ok = link == name
            || (is_template(unit)
                && template_of(link).is_some_and(|t| Some(t) == template_of(name)));
        return if ok {
            Ok(Some(dst.to_string()))
        } else {
            Err(format!("cannot alias {name} as {dst}"))
        };
    }
    let mut dst = dst.to_string();
    if is_template(&dst) && is_instance(name) {
        dst = replace_instance(&dst, instance_of(name).unwrap_or_default()).unwrap_or(dst);
    }
    if dst == name {
        return Ok(None);
    }
    let (Some(a), Some(b)) = (parse_name(name), parse_name(&dst)) else {
        return Err(format!("\"{dst}\" is not a valid unit name"));
    };
    let compatible = a.suffix == b.suffix
        && match (a.instance, b.instance) {
            (None, None) => true,
            (Some(""), Some("")) => true,
            (Some(x), Some(y)) => !x.is_empty() && x == y,
            _ => false,
        };
    if compatible {
        Ok(Some(dst))
    } else {
        Err(format!("cannot alias {name} as {dst}"))
    }
}

/// Files ending in `suffix` in `dirs`: a name in an earlier directory hides the same name in
/// later ones; masked ones (links to /dev/null, empty files) are dropped; sorted by name
/// (systemd's `conf_files_list_strv`).
fn conf_files(ctx: &Ctx<'_>, dirs: &[String], suffix: &str) -> Result<Vec<String>, OfflineError> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut files: Vec<(String, String)> = Vec::new();
    for dir in dirs {
        for name in ctx.list_dir(dir)? {
            if !name.ends_with(suffix) || name.starts_with('.') || !seen.insert(name.clone()) {
                continue;
            }
            let path = join(dir, &name);
            match ctx.null_or_empty(&path)? {
                Some(false) => files.push((name, path)),
                Some(true) => tracing::debug!("{path} is masked"),
                None => {}
            }
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, path)| path).collect())
}

// ---------------------------------------------------------------------------------------------
// Presets
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct PresetRule {
    pattern: String,
    enable: bool,
    instances: Option<Vec<String>>,
}

fn read_presets(ctx: &Ctx<'_>) -> Result<Vec<PresetRule>, OfflineError> {
    let mut dirs: Vec<String> = [
        "/etc/systemd/system-preset",
        "/run/systemd/system-preset",
        "/usr/local/lib/systemd/system-preset",
        "/usr/lib/systemd/system-preset",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !ctx.same_dir(
        "/lib/systemd/system-preset",
        "/usr/lib/systemd/system-preset",
    )? {
        dirs.push("/lib/systemd/system-preset".into());
    }
    let mut rules = Vec::new();
    for file in conf_files(ctx, &dirs, ".preset")? {
        let text = ctx.read(&file)?.unwrap_or_default();
        for (n, line) in String::from_utf8_lossy(&text).lines().enumerate() {
            match parse_preset_line(line) {
                Ok(Some(rule)) => rules.push(rule),
                Ok(None) => {}
                Err(()) => tracing::warn!("{file}:{}: cannot parse \"{line}\", ignoring", n + 1),
            }
        }
    }
    Ok(rules)
}

fn parse_preset_line(line: &str) -> Result<Option<PresetRule>, ()> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
        return Ok(None);
    }
    let first_word = |word: &str| {
        l.strip_prefix(word)
            .filter(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
            .map(str::trim)
    };
    if let Some(param) = first_word("enable") {
        let mut parts = param.split_whitespace();
        let pattern = parts.next().ok_or(())?.to_string();
        let instances: Vec<String> = parts.map(String::from).collect();
        if !instances.is_empty() && !is_template(&pattern) {
            return Err(());
        }
        return Ok(Some(PresetRule {
            pattern,
            enable: true,
            instances: (!instances.is_empty()).then_some(instances),
        }));
    }
    if let Some(param) = first_word("disable") {
        if param.is_empty() {
            return Err(());
        }
        return Ok(Some(PresetRule {
            pattern: param.to_string(),
            enable: false,
            instances: None,
        }));
    }
    Err(())
}

/// The first matching rule decides; none: enable. Returns (enable, instances to enable).
fn query_presets(name: &str, rules: &[PresetRule]) -> (bool, Option<Vec<String>>) {
    for rule in rules {
        if let Some(instances) = &rule.instances {
            if template_of(name).as_deref() == Some(rule.pattern.as_str()) {
                if is_template(name) {
                    let names = instances
                        .iter()
                        .filter_map(|i| replace_instance(name, i))
                        .collect();
                    return (rule.enable, Some(names));
                }
                if instance_of(name).is_some_and(|i| instances.iter().any(|x| x == i)) {
                    return (rule.enable, None);
                }
            }
        }
        if fnmatch(&rule.pattern, name) {
            return (rule.enable, None);
        }
    }
    tracing::debug!("preset files have no rule for {name}: enabling");
    (true, None)
}

/// Shell glob matching as `fnmatch(3)` with `FNM_NOESCAPE`: `*`, `?`, `[...]` (with `!`/`^`
/// negation and ranges); `\` is an ordinary character.
fn fnmatch(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = bracket(&p, pi, n[ni]) {
                        if matched {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the bracket expression at `p[start]` (`[`): `Some((matched, index after
/// it))`, `None` when the bracket is not closed (then `[` is literal).
fn bracket(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let ch = *p.get(i)?;
        if ch == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            let end = p[i + 2];
            if ch <= c && c <= end {
                matched = true;
            }
            i += 3;
        } else {
            if ch == c {
                matched = true;
            }
            i += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The public operations
// ---------------------------------------------------------------------------------------------

/// `systemctl --root=ROOT enable --force UNIT`: creates the `[Install]` symlinks (see the module
/// documentation).
pub fn enable(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    let info = ctx.discover("enable", unit)?;
    if info.masked {
        return Err(OfflineError::Masked {
            unit: unit.to_string(),
            path: info.path,
        });
    }
    ctx.enable_all("enable", info, false)
}

/// `systemctl --root=ROOT disable UNIT`: removes the symlinks in `/etc/systemd/system` that
/// enable the unit (and its `Also=` units). A unit that does not exist is not an error (links
/// named like it are removed), as with systemctl.
pub fn disable(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    // As systemctl: a unit without a unit file is not an error; links named like it still go.
    match ctx.search("disable", unit) {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::warn!("disable: unit {unit} does not exist; removing links named like it")
        }
        Err(e) => tracing::warn!("disable: {e}; removing links named like {unit}"),
    }
    ctx.disable_names("disable", vec![unit.to_string()])
}

/// `systemctl --root=ROOT mask --force UNIT`: `/etc/systemd/system/UNIT -> /dev/null`.
/// A regular file there is an error ([`OfflineError::Exists`]), never overwritten.
pub fn mask(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    ctx.create_symlink("/dev/null", &join(CONFIG_DIR, unit))
}

/// `systemctl --root=ROOT unmask UNIT`: removes `/etc/systemd/system/UNIT` if it masks the unit.
pub fn unmask(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    let path = join(CONFIG_DIR, unit);
    if ctx.null_or_empty(&path)? != Some(true) {
        return Ok(());
    }
    if root.remove(&ctx.resolve_parent(&path)?)? {
        tracing::info!("removed {path}");
    }
    let mut marks = HashSet::from([path]);
    ctx.remove_marked_symlinks(&mut marks)
}

/// `systemctl --root=ROOT preset --force UNIT`: enables or disables the unit as the preset files
/// say (enables it when no line matches).
pub fn preset(root: &Root, unit: &str) -> Result<(), OfflineError> {
    validate(unit)?;
    let ctx = Ctx::new(root)?;
    let rules = read_presets(&ctx)?;
    let info = ctx.discover("preset", unit)?;
    if info.name != unit {
        tracing::info!("preset: skipping {unit}: it is an alias of {}", info.name);
        return Ok(());
    }
    let (enable, instances) = query_presets(unit, &rules);
    tracing::info!(
        "preset: {} {unit}",
        if enable { "enabling" } else { "disabling" }
    );
    if !enable {
        return ctx.disable_names("preset", vec![unit.to_string()]);
    }
    let names = instances.unwrap_or_else(|| vec![unit.to_string()]);
    for name in names {
        let info = ctx.discover("preset", &name)?;
        if info.masked {
            return Err(OfflineError::Masked {
                unit: name,
                path: info.path,
            });
        }
        ctx.enable_all("preset", info, true)?;
    }
    Ok(())
}

/// `systemctl --root=ROOT is-enabled UNIT`: `enabled`, `disabled`, `masked`, `static`,
/// `indirect`, `alias`, `linked`, `enabled-runtime`, ... ([`OfflineError::NoSuchUnit`] when there
/// is no unit file).
pub fn is_enabled(root: &Root, unit: &str) -> Result<String, OfflineError> {
    validate(unit)?;
    Ctx::new(root)?.state(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names() {
        assert!(is_valid_name("foo.service"));
        assert!(is_valid_name("foo@.service"));
        assert!(is_valid_name("foo@bar-baz.timer"));
        assert!(is_valid_name("dev-sda1.device"));
        assert!(!is_valid_name("foo"));
        assert!(!is_valid_name("foo.conf"));
        assert!(!is_valid_name("../foo.service"));
        assert!(!is_valid_name("a/b.service"));
        assert!(!is_valid_name("@x.service"));
        assert!(!is_valid_name(""));
        assert!(is_template("foo@.service"));
        assert!(!is_template("foo@x.service"));
        assert!(is_instance("foo@x.service"));
        assert_eq!(
            template_of("foo@x.service").as_deref(),
            Some("foo@.service")
        );
        assert_eq!(template_of("foo.service"), None);
        assert_eq!(
            replace_instance("foo@.service", "y").as_deref(),
            Some("foo@y.service")
        );
    }

    #[test]
    fn specifiers() {
        assert_eq!(
            printf(
                "spec@x.service",
                "%p-extra.target %N.target %n.foo.target %i %%"
            )
            .unwrap(),
            "spec-extra.target spec@x.target spec@x.service.foo.target x %"
        );
        assert_eq!(printf("a-b-c.service", "%j").unwrap(), "c");
        assert_eq!(printf("x@foo\\x2dbar.service", "%I").unwrap(), "foo-bar");
        assert_eq!(printf("x@dev-sda.service", "%f").unwrap(), "/dev/sda");
        assert!(printf("x.service", "%H").unwrap_err().contains("%H"));
    }

    #[test]
    fn install_section() {
        let mut i = Install::default();
        parse_install(
            "t@.service",
            "[Unit]\nWantedBy=not-here.target\n[Install]\n# comment\nWantedBy=a.target \\\n  b.target\n\
             RequiredBy=\"c.target\"\nAlias=x@.service\nAlso=%p-helper.service\n\
             DefaultInstance=def\n",
            &mut i,
        )
        .unwrap();
        assert_eq!(i.wanted_by, ["a.target", "b.target"]);
        assert_eq!(i.required_by, ["c.target"]);
        assert_eq!(i.aliases, ["x@.service"]);
        assert_eq!(i.also, ["t-helper.service"]);
        assert_eq!(i.default_instance.as_deref(), Some("def"));
        // A drop-in: an empty assignment resets the list.
        parse_install(
            "t@.service",
            "[Install]\nWantedBy=\nWantedBy=d.target\n",
            &mut i,
        )
        .unwrap();
        assert_eq!(i.wanted_by, ["d.target"]);
        assert!(i.has_rules());
    }

    #[test]
    fn aliases() {
        assert_eq!(
            verify_alias("a.service", "b.service").unwrap().as_deref(),
            Some("b.service")
        );
        assert_eq!(verify_alias("a.service", "a.service").unwrap(), None);
        assert!(verify_alias("a.service", "b.socket").is_err());
        assert!(verify_alias("a.service", "b@.service").is_err());
        assert_eq!(
            verify_alias("a@x.service", "b@.service")
                .unwrap()
                .as_deref(),
            Some("b@x.service")
        );
    }

    #[test]
    fn globs() {
        assert!(fnmatch("*", "foo.service"));
        assert!(fnmatch(
            "systemd-journal-gatewayd.*",
            "systemd-journal-gatewayd.socket"
        ));
        assert!(!fnmatch("foo.*", "foobar.service"));
        assert!(fnmatch("f?o.service", "foo.service"));
        assert!(fnmatch("[a-c]x.service", "bx.service"));
        assert!(!fnmatch("[!a-c]x.service", "bx.service"));
        assert!(fnmatch("*.s*e", "a.service"));
        assert!(!fnmatch("a", "ab"));
        assert!(fnmatch("a\\b", "a\\b"));
    }

    #[test]
    fn preset_lines_and_queries() {
        let rules: Vec<PresetRule> = [
            "# c",
            "enable getty@.service tty1 tty2",
            "disable getty@.service",
            "enable a.service",
            "disable *",
        ]
        .iter()
        .filter_map(|l| parse_preset_line(l).unwrap())
        .collect();
        assert_eq!(rules.len(), 4);
        assert_eq!(
            query_presets("getty@.service", &rules),
            (
                true,
                Some(vec![
                    "getty@tty1.service".into(),
                    "getty@tty2.service".into()
                ])
            )
        );
        assert_eq!(query_presets("getty@tty2.service", &rules), (true, None));
        assert_eq!(query_presets("getty@tty3.service", &rules), (false, None));
        assert_eq!(query_presets("a.service", &rules), (true, None));
        assert_eq!(query_presets("b.service", &rules), (false, None));
        assert_eq!(query_presets("b.service", &[]), (true, None));
        assert!(parse_preset_line("enable a.service x").is_err());
        assert!(parse_preset_line("frobnicate a.service").is_err());
    }

    #[test]
    fn chase_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join("usr/lib/systemd/system")).unwrap();
        std::os::unix::fs::symlink("usr/lib", dir.path().join("lib")).unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        // An absolute link resolves inside the root, never on the machine.
        std::os::unix::fs::symlink("/usr/lib/systemd", dir.path().join("etc/abs")).unwrap();
        let ctx = Ctx::new(&root).unwrap();
        assert_eq!(
            ctx.chase("/lib/systemd/system", true).unwrap(),
            "/usr/lib/systemd/system"
        );
        assert_eq!(
            ctx.chase("/etc/abs/system/x.service", true).unwrap(),
            "/usr/lib/systemd/system/x.service"
        );
        assert_eq!(
            ctx.chase("/../../etc/./x/../abs", false).unwrap(),
            "/etc/abs"
        );
        // Merged /usr: /lib/systemd/system is not searched twice.
        assert!(!ctx.search.iter().any(|d| d == "/lib/systemd/system"));
    }
}
