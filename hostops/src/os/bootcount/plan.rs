//! What the ESP must hold for ostree's boot entries (pure: no I/O): one entry per deployment,
//! named after the deployment so its boot counter survives every rewrite, the kernel and
//! initramfs paths moved under `/hearth` on the ESP, a boot counter on the entries of
//! deployments that have not booted yet.

use std::collections::{BTreeMap, BTreeSet};

use super::entry::{BlsEntry, Counter, EntryName};

/// The file names of hearth's entries on the ESP start with this.
pub const ENTRY_PREFIX: &str = "hearth-";

/// The ESP directory kernels and initramfs images are copied to, at their path under `/boot`.
pub const ESP_FILES_DIR: &str = "hearth";

/// The `sort-key` of hearth's entries: systemd-boot then orders them by `version` (ostree's
/// version: the default deployment has the highest), newest first.
pub const SORT_KEY: &str = "hearth";

/// The keys of an ostree entry that name files under `/boot`.
const FILE_KEYS: [&str; 3] = ["linux", "initrd", "devicetree"];

/// The keys copied as they are.
const COPIED_KEYS: [&str; 3] = ["title", "version", "options"];

/// One of ostree's entries (`/boot/loader/entries/*.conf`) and the deployment it boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OstreeEntry {
    /// Its file name in `/boot/loader/entries`.
    pub file: String,
    /// The deployment: `<osname>-<checksum>.<serial>`.
    pub deployment: String,
    /// Its content.
    pub entry: BlsEntry,
}

/// Why an ostree entry cannot be put on the ESP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("boot entry /boot/loader/entries/{file}, {field}: {message}")]
pub struct PlanError {
    /// The ostree entry's file name.
    pub file: String,
    /// The key.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// What the ESP must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EspPlan {
    /// hearth's entries: file name (with its counter) → content.
    pub entries: BTreeMap<String, String>,
    /// The files the entries name, as paths relative to `/boot` (copied to `/hearth/<path>`).
    pub files: BTreeSet<String>,
    /// hearth entries on the ESP that go (their deployment is gone, or a duplicate).
    pub remove: Vec<String>,
    /// Deployments whose entry is new and was given a boot counter.
    pub counted: Vec<String>,
}

/// The ESP entry id of a deployment.
pub fn entry_id(deployment: &str) -> String {
    format!("{ENTRY_PREFIX}{deployment}")
}

/// `<osname>-<checksum>.<serial>` → (`<osname>`, `<checksum>.<serial>`). The checksum is hex,
/// so the last `-` ends the osname (which may hold `-`: `fedora-coreos`).
pub fn split_deployment(deployment: &str) -> Option<(&str, &str)> {
    deployment.rsplit_once('-')
}

/// Of two entry files for one deployment, the one to keep: the one without a counter (it
/// booted and was marked good), else the one with fewer tries left (never a fresh try more
/// than the boot loader counted).
fn keep_first(a: &EntryName, b: &EntryName) -> bool {
    match (a.counter, b.counter) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(x), Some(y)) => x.left <= y.left,
    }
}

/// Plans the ESP for `ostree`'s entries. `esp` are the entry names on the ESP now (others than
/// hearth's are ignored); `booted` the deployment running now (its entry never gets a
/// counter: it booted); `tries` the counter a new entry starts with.
///
/// An entry already on the ESP keeps its file name, so its counter is neither reset nor
/// restarted by a rewrite (systemd-boot counts it down, systemd-bless-boot removes it).
pub fn plan(
    ostree: &[OstreeEntry],
    esp: &[EntryName],
    booted: Option<&str>,
    tries: u32,
) -> Result<EspPlan, PlanError> {
    let mut existing: BTreeMap<&str, &EntryName> = BTreeMap::new();
    let mut out = EspPlan::default();
    for name in esp.iter().filter(|n| n.id.starts_with(ENTRY_PREFIX)) {
        match existing.entry(name.id.as_str()) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(name);
            }
            // Two files for one deployment (a rename interrupted by power loss): keep one.
            std::collections::btree_map::Entry::Occupied(mut o) => {
                if keep_first(o.get(), name) {
                    out.remove.push(name.file_name());
                } else {
                    out.remove.push(o.get().file_name());
                    o.insert(name);
                }
            }
        }
    }
    let mut wanted = BTreeSet::new();
    for o in ostree {
        let id = entry_id(&o.deployment);
        let name = match existing.get(id.as_str()) {
            Some(name) => (*name).clone(),
            None => {
                let counter = (booted != Some(o.deployment.as_str())).then_some(Counter {
                    left: tries,
                    done: 0,
                });
                if counter.is_some() {
                    out.counted.push(o.deployment.clone());
                }
                EntryName {
                    id: id.clone(),
                    counter,
                }
            }
        };
        let content = esp_entry(o, &mut out.files)?;
        wanted.insert(id);
        out.entries.insert(name.file_name(), content);
    }
    for (id, name) in existing {
        if !wanted.contains(id) {
            out.remove.push(name.file_name());
        }
    }
    out.remove.sort();
    out.remove.dedup();
    Ok(out)
}

/// The ESP version of an ostree entry; the files it names are added to `files`.
fn esp_entry(o: &OstreeEntry, files: &mut BTreeSet<String>) -> Result<String, PlanError> {
    let err = |field: &str, message: String| PlanError {
        file: o.file.clone(),
        field: field.to_string(),
        message,
    };
    let mut out = BlsEntry::default();
    let mut has_linux = false;
    if o.entry.ostree_arg().is_none() {
        return Err(err("options", "no ostree= argument".into()));
    }
    for key in COPIED_KEYS {
        if let Some(v) = o.entry.get(key) {
            out.lines.push((key.to_string(), v.to_string()));
        }
    }
    out.lines.push(("sort-key".into(), SORT_KEY.into()));
    for (key, value) in &o.entry.lines {
        if !FILE_KEYS.contains(&key.as_str()) {
            continue;
        }
        let relative = boot_relative(value).ok_or_else(|| {
            err(
                key,
                format!(
                    "{value:?} is not a plain absolute path under /boot (letters, digits, \
                     '.', '_', '-', '+' and '/' only, no '..')"
                ),
            )
        })?;
        has_linux |= key == "linux";
        files.insert(relative.to_string());
        out.lines
            .push((key.clone(), format!("/{ESP_FILES_DIR}/{relative}")));
    }
    if !has_linux {
        return Err(err("linux", "the entry names no kernel".into()));
    }
    Ok(format!(
        "# Written by hearth from /boot/loader/entries/{} (deployment {}); rewritten at every \
         change of the deployments: do not edit.\n{out}",
        o.file, o.deployment
    ))
}

/// `/ostree/debian-abc/vmlinuz` → `ostree/debian-abc/vmlinuz`, if every component is plain.
pub fn boot_relative(path: &str) -> Option<&str> {
    let rel = path.strip_prefix('/')?;
    let plain = |c: &str| {
        !c.is_empty()
            && c != "."
            && c != ".."
            && c.len() <= 255
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
    };
    (rel.len() <= 1024 && rel.split('/').all(plain)).then_some(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ostree_entry(deployment: &str, version: u32, bootcsum: &str) -> OstreeEntry {
        OstreeEntry {
            file: format!("ostree-{version}-debian.conf"),
            deployment: deployment.to_string(),
            entry: BlsEntry::parse(&format!(
                "title Debian (ostree:{version})\nversion {version}\noptions root=LABEL=r rw \
                 ostree=/ostree/boot.1/debian/{bootcsum}/0\nlinux /ostree/debian-{bootcsum}/vmlinuz-6.1\n\
                 initrd /ostree/debian-{bootcsum}/initramfs-6.1.img\n"
            )),
        }
    }

    fn names(files: &[&str]) -> Vec<EntryName> {
        files.iter().map(|f| EntryName::parse(f).unwrap()).collect()
    }

    #[test]
    fn a_new_deployment_gets_a_counter_the_booted_one_does_not() {
        let ostree = [
            ostree_entry("debian-bbb.0", 2, "k2"),
            ostree_entry("debian-aaa.0", 1, "k1"),
        ];
        let p = plan(&ostree, &[], Some("debian-aaa.0"), 3).unwrap();
        let files: Vec<&str> = p.entries.keys().map(String::as_str).collect();
        assert_eq!(
            files,
            ["hearth-debian-aaa.0.conf", "hearth-debian-bbb.0+3.conf"]
        );
        assert_eq!(p.counted, ["debian-bbb.0"]);
        let new = &p.entries["hearth-debian-bbb.0+3.conf"];
        assert!(new.contains("\nversion 2\n"), "{new}");
        assert!(new.contains("\nsort-key hearth\n"), "{new}");
        assert!(
            new.contains("\nlinux /hearth/ostree/debian-k2/vmlinuz-6.1\n"),
            "{new}"
        );
        assert!(new.contains("ostree=/ostree/boot.1/debian/k2/0"), "{new}");
        assert_eq!(
            split_deployment("fedora-coreos-abc.1"),
            Some(("fedora-coreos", "abc.1"))
        );
        assert_eq!(
            p.files.iter().collect::<Vec<_>>(),
            [
                "ostree/debian-k1/initramfs-6.1.img",
                "ostree/debian-k1/vmlinuz-6.1",
                "ostree/debian-k2/initramfs-6.1.img",
                "ostree/debian-k2/vmlinuz-6.1"
            ]
        );
    }

    #[test]
    fn counters_on_the_esp_survive_a_rewrite_and_gone_deployments_go() {
        let ostree = [ostree_entry("debian-bbb.0", 1, "k2")];
        let esp = names(&[
            "hearth-debian-bbb.0+0-3.conf",
            "hearth-debian-aaa.0.conf",
            "other-os.conf",
        ]);
        let p = plan(&ostree, &esp, Some("debian-aaa.0"), 3).unwrap();
        assert_eq!(
            p.entries.keys().collect::<Vec<_>>(),
            ["hearth-debian-bbb.0+0-3.conf"]
        );
        assert_eq!(p.remove, ["hearth-debian-aaa.0.conf"]);
        assert!(p.counted.is_empty());
    }

    #[test]
    fn the_booted_deployment_is_adopted_without_a_counter_and_duplicates_go() {
        let ostree = [ostree_entry("debian-aaa.0", 1, "k1")];
        let esp = names(&["hearth-debian-aaa.0+1-2.conf", "hearth-debian-aaa.0.conf"]);
        let p = plan(&ostree, &esp, Some("debian-aaa.0"), 3).unwrap();
        assert_eq!(
            p.entries.keys().collect::<Vec<_>>(),
            ["hearth-debian-aaa.0.conf"],
            "the one marked good stays"
        );
        assert_eq!(p.remove, ["hearth-debian-aaa.0+1-2.conf"]);
        // Of two counted ones, the one with fewer tries left.
        let esp = names(&[
            "hearth-debian-aaa.0+0-3.conf",
            "hearth-debian-aaa.0+2-1.conf",
        ]);
        let p = plan(&ostree, &esp, None, 3).unwrap();
        assert_eq!(
            p.entries.keys().collect::<Vec<_>>(),
            ["hearth-debian-aaa.0+0-3.conf"]
        );
        // Nothing booted from ostree (a sysroot being prepared): every entry is counted.
        let p = plan(&ostree, &[], None, 2).unwrap();
        assert_eq!(
            p.entries.keys().collect::<Vec<_>>(),
            ["hearth-debian-aaa.0+2.conf"]
        );
    }

    #[test]
    fn entries_naming_paths_outside_boot_are_refused() {
        for (line, field) in [
            ("linux /ostree/../../etc/shadow", "linux"),
            ("linux ostree/x", "linux"),
            ("linux /ostree/a b", "linux"),
            ("initrd /ostree//x", "initrd"),
        ] {
            let mut o = ostree_entry("debian-aaa.0", 1, "k1");
            let (k, v) = line.split_once(' ').unwrap();
            o.entry.lines.retain(|(key, _)| key != k);
            o.entry.lines.push((k.into(), v.into()));
            let e = plan(&[o], &[], None, 3).unwrap_err();
            assert_eq!(e.field, field, "{line}: {e}");
            assert!(e.to_string().contains("ostree-1-debian.conf"), "{e}");
        }
        let mut o = ostree_entry("debian-aaa.0", 1, "k1");
        o.entry.lines.retain(|(k, _)| k != "linux");
        assert!(plan(&[o], &[], None, 3)
            .unwrap_err()
            .to_string()
            .contains("no kernel"));
    }
}
