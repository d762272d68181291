//! Finding a unit (following aliases) and its `[Install]` section: reading it from the unit
//! file and its drop-ins, parsing `WantedBy=`, `RequiredBy=`, `Alias=`, `Also=`,
//! `DefaultInstance=`, and checking aliases.

use super::error::OfflineError;
use super::lookup::SYMLINK_MAX;
use super::lookup::{basename, conf_files, join, Ctx, Kind};
use super::name::{
    instance_of, is_instance, is_template, is_valid_name, parse_name, printf, replace_instance,
    template_of, valid_char,
};

/// A unit found: its name (the alias target's after following aliases), the file's path, and
/// its `[Install]` section.
#[derive(Debug, Clone)]
pub(super) struct Info {
    pub(super) name: String,
    pub(super) path: String,
    pub(super) masked: bool,
    pub(super) install: Install,
}

impl Info {
    /// systemd's `is_symlink_with_known_name`.
    pub(super) fn is_known_name(&self, name: &str) -> bool {
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
pub(super) struct Install {
    pub(super) aliases: Vec<String>,
    pub(super) wanted_by: Vec<String>,
    pub(super) required_by: Vec<String>,
    pub(super) also: Vec<String>,
    pub(super) default_instance: Option<String>,
}

impl Install {
    pub(super) fn has_rules(&self) -> bool {
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
pub(super) fn parse_install(name: &str, text: &str, install: &mut Install) -> Result<(), String> {
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
                } else if value.chars().all(valid_char) {
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
pub(super) fn verify_alias(name: &str, dst: &str) -> Result<Option<String>, String> {
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

impl Ctx<'_> {
    /// Finds the unit file of `name`, following aliases and linked unit files, and reads its
    /// `[Install]` section (systemd's `install_info_discover`).
    pub(super) fn discover(&self, op: &'static str, name: &str) -> Result<Info, OfflineError> {
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
}
