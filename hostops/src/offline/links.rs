//! Enablement links: creating the `[Install]` symlinks (`enable`, `preset`), removing them
//! (`disable`), and the `is-enabled` state computed from the links found.

use super::error::OfflineError;
use super::install::{verify_alias, Info};
use super::lookup::{
    basename, dirname, join, path_starts_with, Ctx, Kind, CONFIG_DIR, GENERATOR_DIRS, TRANSIENT_DIR,
};
use super::name::{is_instance, is_template, is_valid_name, printf, replace_instance, template_of};
use crate::fs::EntryKind;
use std::collections::{HashSet, VecDeque};

impl Ctx<'_> {
    // -----------------------------------------------------------------------------------------
    // Symlinks
    // -----------------------------------------------------------------------------------------

    /// Creates `link -> target` unless an equivalent link is there; replaces other links;
    /// refuses to replace anything else.
    pub(super) fn create_symlink(&self, target: &str, link: &str) -> Result<(), OfflineError> {
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
    pub(super) fn remove_marked_symlinks(
        &self,
        marks: &mut HashSet<String>,
    ) -> Result<(), OfflineError> {
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
    pub(super) fn enable_all(
        &self,
        op: &'static str,
        first: Info,
        preset: bool,
    ) -> Result<(), OfflineError> {
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
    pub(super) fn disable_names(
        &self,
        op: &'static str,
        names: Vec<String>,
    ) -> Result<(), OfflineError> {
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

    pub(super) fn state(&self, name: &str) -> Result<String, OfflineError> {
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
