//! Confined lookup: paths inside the root resolved as if it were `/` (symlinks chased through
//! [`Root`](crate::fs::Root), never out of it), the unit search path, and what a search-path
//! entry is (a unit file, masked, an alias, linked from outside); the directories of the search
//! path that the other files name ([`CONFIG_DIR`], the generators' and transient units').

use super::error::OfflineError;
use super::name::{is_instance, template_of};
use crate::fs::EntryKind;
use crate::fs::Root;
use std::collections::{HashSet, VecDeque};

/// The persistent configuration directory, where enablement symlinks are written.
pub const CONFIG_DIR: &str = "/etc/systemd/system";

/// How many symbolic links one lookup follows at most.
pub(super) const SYMLINK_MAX: usize = 64;
/// The generators' output directories: early, normal, late.
pub(super) const GENERATOR_DIRS: [&str; 3] = [
    "/run/systemd/generator.early",
    "/run/systemd/generator",
    "/run/systemd/generator.late",
];
/// Where transient units live.
pub(super) const TRANSIENT_DIR: &str = "/run/systemd/transient";

pub(super) fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

pub(super) fn dirname(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

pub(super) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `path` is `dir` or below it (component-wise).
pub(super) fn path_starts_with(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A root, the search path found in it, and the changes made.
pub(super) struct Ctx<'a> {
    pub(super) root: &'a Root,
    pub(super) search: Vec<String>,
    /// Resolved directories (one operation never creates or removes directory symlinks, so a
    /// resolution stays valid while it runs).
    dirs: std::cell::RefCell<std::collections::HashMap<String, String>>,
}

/// What a search-path entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    Regular,
    Masked,
    /// A symlink into the search path (the resolved target).
    Alias(String),
    /// A symlink out of the search path (the resolved target).
    Linked(String),
}

/// Files ending in `suffix` in `dirs`: a name in an earlier directory hides the same name in
/// later ones; masked ones (links to /dev/null, empty files) are dropped; sorted by name
/// (systemd's `conf_files_list_strv`).
pub(super) fn conf_files(
    ctx: &Ctx<'_>,
    dirs: &[String],
    suffix: &str,
) -> Result<Vec<String>, OfflineError> {
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

impl<'a> Ctx<'a> {
    pub(super) fn new(root: &'a Root) -> Result<Ctx<'a>, OfflineError> {
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

    pub(super) fn root_name(&self) -> String {
        self.root.path().display().to_string()
    }

    /// Whether two directories are the same one (after resolving symlinks), e.g. `/lib/x` and
    /// `/usr/lib/x` on merged-`/usr` systems. Missing directories are not the same.
    pub(super) fn same_dir(&self, a: &str, b: &str) -> Result<bool, OfflineError> {
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
    pub(super) fn chase(&self, path: &str, follow_last: bool) -> Result<String, OfflineError> {
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
    pub(super) fn resolve_parent(&self, path: &str) -> Result<String, OfflineError> {
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

    pub(super) fn lstat(&self, path: &str) -> Result<Option<crate::fs::Stat>, OfflineError> {
        Ok(self.root.stat(&self.resolve_parent(path)?)?)
    }

    pub(super) fn read_link(&self, path: &str) -> Result<Option<String>, OfflineError> {
        Ok(self.root.read_link(&self.resolve_parent(path)?)?)
    }

    pub(super) fn read(&self, path: &str) -> Result<Option<Vec<u8>>, OfflineError> {
        let resolved = self.chase(path, true)?;
        match self.root.stat(&resolved)? {
            Some(st) if st.kind == EntryKind::File => Ok(self.root.read(&resolved)?),
            _ => Ok(None),
        }
    }

    pub(super) fn list_dir(&self, dir: &str) -> Result<Vec<String>, OfflineError> {
        let resolved = self.resolve_dir(dir)?;
        match self.root.stat(&resolved)? {
            Some(st) if st.kind == EntryKind::Dir => Ok(self.root.list_dir(&resolved)?),
            _ => Ok(Vec::new()),
        }
    }

    /// systemd's `null_or_empty_path`: `/dev/null`, a device, or an empty regular file
    /// (following symlinks). Missing: `None`.
    pub(super) fn null_or_empty(&self, path: &str) -> Result<Option<bool>, OfflineError> {
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

    pub(super) fn in_search_path(&self, path: &str) -> bool {
        self.search.iter().any(|d| d == dirname(path))
    }

    pub(super) fn underneath_search_path(&self, path: &str) -> bool {
        self.search.iter().any(|d| path_starts_with(path, d))
    }

    // -----------------------------------------------------------------------------------------
    // Finding unit files
    // -----------------------------------------------------------------------------------------

    /// What is at `path`: `None` when nothing.
    pub(super) fn classify(
        &self,
        op: &'static str,
        path: &str,
    ) -> Result<Option<Kind>, OfflineError> {
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
    pub(super) fn search(
        &self,
        op: &'static str,
        name: &str,
    ) -> Result<Option<(String, Kind)>, OfflineError> {
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
}
