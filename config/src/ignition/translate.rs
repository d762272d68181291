//! Translations between versions: a 2.x config into the internal model (with the MCO's merge
//! rules), and the internal model out to any supported version, refusing what it cannot express.

use super::ssh_keys::dedup_users_ssh_keys;
use super::v2::{V2Config, V2Filesystem, V2Mount, V2Node, V2Unit, V2User};
use super::v3::{Config, Directory, File, Filesystem, Link, Resource, Unit, User};
use super::version::SpecVersion;

/// A problem translating between versions: the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TranslateError {
    /// Field path within the Ignition config (`storage.files[0].filesystem`).
    pub path: String,
    /// What is wrong and what to do.
    pub message: String,
}

fn terr(path: impl Into<String>, message: impl Into<String>) -> TranslateError {
    TranslateError {
        path: path.into(),
        message: message.into(),
    }
}

/// Upper bound on list lengths that 2.x configs may duplicate-merge quadratically.
fn dedup_by_key<T, K: std::hash::Hash + Eq>(
    items: Vec<T>,
    key: impl Fn(&T) -> K,
    merge: impl Fn(&mut T, T),
) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    let mut index: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    for item in items {
        match index.entry(key(&item)) {
            std::collections::hash_map::Entry::Occupied(e) => merge(&mut out[*e.get()], item),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(out.len());
                out.push(item);
            }
        }
    }
    out
}

impl V2Config {
    /// Translates to the internal model with the MCO's rules: files must be on filesystem
    /// `root` (dropped in 3.x); duplicate files and units are de-duplicated (the last wins; drop-ins
    /// of duplicate units are concatenated); SSH keys of every user entry are merged into user
    /// `core`. Things 3.x has no form for (networkd units, path-only filesystems) are refused.
    pub fn into_v3(self) -> Result<Config, Vec<TranslateError>> {
        let mut errors = Vec::new();
        let mut out = Config::default();
        out.ignition.version = Some(SpecVersion::LATEST.as_str().to_string());
        out.ignition.config.merge = self.ignition.config.append;
        if let Some(replace) = self.ignition.config.replace {
            out.ignition.config.replace = replace;
        }
        out.ignition.proxy = self.ignition.proxy;
        out.ignition.security = self.ignition.security;
        out.ignition.timeouts = self.ignition.timeouts;

        if !self.networkd.units.is_empty() {
            errors.push(terr(
                "networkd.units",
                "networkd units have no Ignition 3 form; write them as files under /etc/systemd/network/ instead",
            ));
        }

        // Filesystems: only mount-style ones translate; `root` is implicit in 3.x.
        for (i, fs) in self.storage.filesystems.into_iter().enumerate() {
            let p = format!("storage.filesystems[{i}]");
            match (fs.mount, fs.path) {
                (Some(m), None) => {
                    if fs.name.as_deref().is_some_and(|n| n != "root") {
                        errors.push(terr(
                            format!("{p}.name"),
                            format!(
                                "files can only be placed on filesystem \"root\" when translating from 2.x; filesystem {:?} needs an explicit mount path in Ignition 3",
                                fs.name.unwrap_or_default()
                            ),
                        ));
                        continue;
                    }
                    out.storage.filesystems.push(Filesystem {
                        device: m.device,
                        format: m.format,
                        label: m.label,
                        options: m.options,
                        uuid: m.uuid,
                        wipe_filesystem: m.wipe_filesystem,
                        ..Default::default()
                    });
                }
                _ => errors.push(terr(
                    p,
                    "a 2.x filesystem given by path (or without mount) has no Ignition 3 form",
                )),
            }
        }
        out.storage.disks = self.storage.disks;
        out.storage.raid = self.storage.raid;

        let check_fs = |kind: &str,
                        i: usize,
                        fs: &Option<String>,
                        errors: &mut Vec<TranslateError>| {
            if let Some(name) = fs {
                if name != "root" {
                    errors.push(terr(
                        format!("storage.{kind}[{i}].filesystem"),
                        format!("filesystem {name:?} is not supported; only \"root\" translates to Ignition 3 (write the full path instead)"),
                    ));
                }
            }
        };

        let mut files = Vec::new();
        for (i, f) in self.storage.files.into_iter().enumerate() {
            check_fs("files", i, &f.filesystem, &mut errors);
            let contents = f.contents.unwrap_or_default();
            let (contents, append) = if f.append == Some(true) {
                (Resource::default(), vec![contents])
            } else {
                (contents, Vec::new())
            };
            files.push(File {
                path: f.path,
                // 2.x always replaced existing files; 3.x defaults to refusing to.
                overwrite: Some(f.overwrite.unwrap_or(true)),
                user: f.user.unwrap_or_default(),
                group: f.group.unwrap_or_default(),
                append,
                contents,
                mode: f.mode,
            });
        }
        out.storage.files = dedup_by_key(files, |f| f.path.clone(), |a, b| *a = b);

        let mut dirs = Vec::new();
        for (i, d) in self.storage.directories.into_iter().enumerate() {
            check_fs("directories", i, &d.filesystem, &mut errors);
            dirs.push(Directory {
                path: d.path,
                overwrite: d.overwrite,
                user: d.user.unwrap_or_default(),
                group: d.group.unwrap_or_default(),
                mode: d.mode,
            });
        }
        out.storage.directories = dedup_by_key(dirs, |d| d.path.clone(), |a, b| *a = b);

        let mut links = Vec::new();
        for (i, l) in self.storage.links.into_iter().enumerate() {
            check_fs("links", i, &l.filesystem, &mut errors);
            links.push(Link {
                path: l.path,
                overwrite: l.overwrite,
                user: l.user.unwrap_or_default(),
                group: l.group.unwrap_or_default(),
                target: l.target,
                hard: l.hard,
            });
        }
        out.storage.links = dedup_by_key(links, |l| l.path.clone(), |a, b| *a = b);

        let units: Vec<Unit> = self
            .systemd
            .units
            .into_iter()
            .map(|u| Unit {
                name: u.name,
                contents: u.contents,
                dropins: u.dropins,
                enabled: u.enabled.or(u.enable.filter(|e| *e)),
                mask: u.mask,
            })
            .collect();
        out.systemd.units = dedup_by_key(
            units,
            |u| u.name.clone(),
            |a, b| {
                let mut dropins = std::mem::take(&mut a.dropins);
                let mut index: std::collections::HashMap<String, usize> =
                    std::collections::HashMap::new();
                for (i, d) in dropins.iter().enumerate() {
                    index.entry(d.name.clone()).or_insert(i);
                }
                for d in b.dropins.iter().cloned() {
                    match index.get(&d.name) {
                        Some(&i) => dropins[i] = d,
                        None => {
                            index.insert(d.name.clone(), dropins.len());
                            dropins.push(d);
                        }
                    }
                }
                *a = b;
                a.dropins = dropins;
            },
        );

        // Users: the MCO only manages `core` on day 2 and folds every key into it.
        let mut users: Vec<User> = Vec::new();
        let mut user_index: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        let mut user_keys: Vec<std::collections::HashSet<String>> = Vec::new();
        for u in self.passwd.users {
            let user = User {
                name: u.name,
                gecos: u.gecos,
                groups: u.groups,
                home_dir: u.home_dir,
                no_create_home: u.no_create_home,
                no_log_init: u.no_log_init,
                no_user_group: u.no_user_group,
                password_hash: u.password_hash,
                primary_group: u.primary_group,
                shell: u.shell,
                should_exist: None,
                ssh_authorized_keys: u.ssh_authorized_keys,
                system: u.system,
                uid: u.uid,
            };
            if let Some(&i) = user_index.get(&user.name) {
                let existing = &mut users[i];
                for k in user.ssh_authorized_keys.iter() {
                    if user_keys[i].insert(k.clone()) {
                        existing.ssh_authorized_keys.push(k.clone());
                    }
                }
                let keys = std::mem::take(&mut existing.ssh_authorized_keys);
                *existing = User {
                    ssh_authorized_keys: keys,
                    ..user
                };
            } else {
                user_index.insert(user.name.clone(), users.len());
                user_keys.push(user.ssh_authorized_keys.iter().cloned().collect());
                users.push(user);
            }
        }
        dedup_users_ssh_keys(&mut users);
        out.passwd.users = users;
        out.passwd.groups = dedup_by_key(self.passwd.groups, |g| g.name.clone(), |a, b| *a = b);

        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }
}
impl Config {
    /// Serialises this config as Ignition of spec `version`, refusing (with every offending
    /// field) what that version cannot express.
    pub fn to_version(
        &self,
        version: SpecVersion,
    ) -> Result<serde_json::Value, Vec<TranslateError>> {
        let mut errors: Vec<TranslateError> = self
            .fields_needing_newer(version)
            .into_iter()
            .map(|(path, min)| {
                terr(
                    path,
                    format!("needs Ignition spec {min} or newer; the target asked for {version}"),
                )
            })
            .collect();
        if version.is_v2() {
            let v2 = self.to_v2(version, &mut errors);
            if errors.is_empty() {
                return serde_json::to_value(v2).map_err(|e| vec![terr("", e.to_string())]);
            }
            return Err(errors);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut out = self.clone();
        out.ignition.version = Some(version.as_str().to_string());
        serde_json::to_value(out).map_err(|e| vec![terr("", e.to_string())])
    }

    fn to_v2(&self, version: SpecVersion, errors: &mut Vec<TranslateError>) -> V2Config {
        let mut out = V2Config::default();
        out.ignition.version = Some(version.as_str().to_string());
        out.ignition.config.append = self.ignition.config.merge.clone();
        if !self.ignition.config.replace.is_empty() {
            out.ignition.config.replace = Some(self.ignition.config.replace.clone());
        }
        out.ignition.security = self.ignition.security.clone();
        out.ignition.timeouts = self.ignition.timeouts.clone();
        for (i, fs) in self.storage.filesystems.iter().enumerate() {
            if fs.path.as_deref().is_some_and(|p| p != "/") {
                errors.push(terr(
                    format!("storage.filesystems[{i}].path"),
                    "a filesystem mounted at a path cannot be expressed in spec 2.x (2.x has no mount points); ask for a 3.x version",
                ));
            }
            out.storage.filesystems.push(V2Filesystem {
                name: Some(format!("fs{i}")),
                mount: Some(V2Mount {
                    device: fs.device.clone(),
                    format: fs.format.clone(),
                    label: fs.label.clone(),
                    options: fs.options.clone(),
                    uuid: fs.uuid.clone(),
                    wipe_filesystem: fs.wipe_filesystem,
                    create: None,
                }),
                path: None,
            });
        }
        out.storage.disks = self.storage.disks.clone();
        out.storage.raid = self.storage.raid.clone();
        let root = Some("root".to_string());
        for (i, f) in self.storage.files.iter().enumerate() {
            let (contents, append) = match (f.contents.is_empty(), f.append.len()) {
                (_, 0) => (Some(f.contents.clone()), None),
                (true, 1) => (Some(f.append[0].clone()), Some(true)),
                _ => {
                    errors.push(terr(
                        format!("storage.files[{i}].append"),
                        "spec 2.x can append exactly one fragment and only without contents; ask for a 3.x version",
                    ));
                    (None, None)
                }
            };
            out.storage.files.push(V2Node {
                filesystem: root.clone(),
                path: f.path.clone(),
                append,
                contents,
                mode: f.mode,
                overwrite: f.overwrite,
                user: Some(f.user.clone()).filter(|u| !u.is_empty()),
                group: Some(f.group.clone()).filter(|g| !g.is_empty()),
                target: None,
                hard: None,
            });
        }
        for d in &self.storage.directories {
            out.storage.directories.push(V2Node {
                filesystem: root.clone(),
                path: d.path.clone(),
                mode: d.mode,
                overwrite: d.overwrite,
                user: Some(d.user.clone()).filter(|u| !u.is_empty()),
                group: Some(d.group.clone()).filter(|g| !g.is_empty()),
                ..Default::default()
            });
        }
        for l in &self.storage.links {
            out.storage.links.push(V2Node {
                filesystem: root.clone(),
                path: l.path.clone(),
                overwrite: l.overwrite,
                user: Some(l.user.clone()).filter(|u| !u.is_empty()),
                group: Some(l.group.clone()).filter(|g| !g.is_empty()),
                target: l.target.clone(),
                hard: l.hard,
                ..Default::default()
            });
        }
        out.systemd.units = self
            .systemd
            .units
            .iter()
            .map(|u| V2Unit {
                name: u.name.clone(),
                contents: u.contents.clone(),
                dropins: u.dropins.clone(),
                enable: None,
                enabled: u.enabled,
                mask: u.mask,
            })
            .collect();
        out.passwd.groups = self.passwd.groups.clone();
        out.passwd.users = self
            .passwd
            .users
            .iter()
            .map(|u| V2User {
                name: u.name.clone(),
                create: None,
                gecos: u.gecos.clone(),
                groups: u.groups.clone(),
                home_dir: u.home_dir.clone(),
                no_create_home: u.no_create_home,
                no_log_init: u.no_log_init,
                no_user_group: u.no_user_group,
                password_hash: u.password_hash.clone(),
                primary_group: u.primary_group.clone(),
                shell: u.shell.clone(),
                ssh_authorized_keys: u.ssh_authorized_keys.clone(),
                system: u.system,
                uid: u.uid,
            })
            .collect();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignition::{Dropin, V2Networkd, V2Passwd, V2Storage, V2Systemd};
    #[test]
    fn v2_duplicates_merge_like_the_mco() {
        let v2 = V2Config {
            storage: V2Storage {
                files: vec![
                    V2Node {
                        filesystem: Some("root".into()),
                        path: "/etc/a".into(),
                        contents: Some(Resource {
                            source: Some("data:,one".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    V2Node {
                        filesystem: Some("root".into()),
                        path: "/etc/a".into(),
                        contents: Some(Resource {
                            source: Some("data:,two".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            systemd: V2Systemd {
                units: vec![
                    V2Unit {
                        name: "a.service".into(),
                        dropins: vec![Dropin {
                            name: "1.conf".into(),
                            contents: Some("x".into()),
                        }],
                        ..Default::default()
                    },
                    V2Unit {
                        name: "a.service".into(),
                        enable: Some(true),
                        dropins: vec![Dropin {
                            name: "2.conf".into(),
                            contents: Some("y".into()),
                        }],
                        ..Default::default()
                    },
                ],
            },
            passwd: V2Passwd {
                users: vec![
                    V2User {
                        name: "core".into(),
                        ssh_authorized_keys: vec!["k1".into()],
                        ..Default::default()
                    },
                    V2User {
                        name: "core".into(),
                        ssh_authorized_keys: vec!["k2".into(), "k1".into()],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            ..Default::default()
        };
        let v3 = v2.into_v3().unwrap();
        assert_eq!(v3.storage.files.len(), 1);
        assert_eq!(
            v3.storage.files[0].contents.source.as_deref(),
            Some("data:,two")
        );
        assert_eq!(v3.storage.files[0].overwrite, Some(true));
        assert_eq!(v3.systemd.units.len(), 1);
        assert_eq!(v3.systemd.units[0].enabled, Some(true));
        let names: Vec<_> = v3.systemd.units[0]
            .dropins
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["1.conf", "2.conf"]);
        assert_eq!(v3.passwd.users.len(), 1);
        assert_eq!(v3.passwd.users[0].ssh_authorized_keys, ["k1", "k2"]);
    }

    #[test]
    fn down_conversion_refuses_what_old_versions_lack() {
        let mut c = Config::default();
        c.kernel_arguments.should_exist.push("enforcing=0".into());
        let errs = c.to_version(SpecVersion::V3_2).unwrap_err();
        assert_eq!(errs[0].path, "kernelArguments");
        assert!(errs[0].message.contains("3.3.0"));
        assert!(c.to_version(SpecVersion::V3_3).is_ok());
    }

    #[test]
    fn networkd_is_refused_with_advice() {
        let v2 = V2Config {
            networkd: V2Networkd {
                units: vec![serde_json::json!({"name": "a.network"})],
            },
            ..Default::default()
        };
        let errs = v2.into_v3().unwrap_err();
        assert_eq!(errs[0].path, "networkd.units");
        assert!(errs[0].message.contains("/etc/systemd/network"));
    }
}
