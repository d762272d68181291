//! Where a config writes: the one answer to "which paths does this config manage", for the
//! agent's managed set, the drift monitor's expected contents, the server's check of a
//! `restore-file` request and the planner (they used to enumerate them each on their own, and
//! disagreed on drop-ins of masked units).

use crate::ignition::{Config, Dropin, File, Unit};

/// Where systemd units and drop-ins are written.
pub const SYSTEMD_UNIT_DIR: &str = "/etc/systemd/system";

/// The path of a unit file.
pub fn unit_path(name: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{name}")
}

/// The path of a drop-in of `unit`.
pub fn dropin_path(unit: &str, name: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{unit}.d/{name}")
}

/// What a config writes at one path.
#[derive(Debug, Clone, Copy)]
pub enum Written<'a> {
    /// A file of `storage.files` (written whole, or appended to).
    File(&'a File),
    /// A unit's file, from its contents (not empty; the unit is not masked).
    Unit(&'a Unit, &'a str),
    /// A masked unit: its path is a link to /dev/null.
    Mask(&'a Unit),
    /// A drop-in, with its contents (not empty).
    Dropin(&'a Unit, &'a Dropin, &'a str),
}

/// One path a config writes, and what.
#[derive(Debug, Clone)]
pub struct WrittenPath<'a> {
    /// The absolute path.
    pub path: String,
    /// What is written there.
    pub what: Written<'a>,
}

impl WrittenPath<'_> {
    /// Whether the config says exactly what the path holds, so that it can be compared with the
    /// host (drift) and put back (`restore-file`): a file written whole (not appended to), a
    /// unit file, a drop-in of a unit that is not masked (systemd ignores those).
    pub fn has_known_contents(&self) -> bool {
        match self.what {
            Written::File(f) => f.append.is_empty(),
            Written::Unit(..) => true,
            Written::Mask(_) => false,
            Written::Dropin(u, ..) => u.mask != Some(true),
        }
    }
}

/// Every path `config` writes, in the config's order: its files, then per unit its file (or
/// mask) and its drop-ins. Units without contents and drop-ins without contents write nothing.
pub fn written(config: &Config) -> Vec<WrittenPath<'_>> {
    let mut out: Vec<WrittenPath<'_>> = config
        .storage
        .files
        .iter()
        .map(|f| WrittenPath {
            path: f.path.clone(),
            what: Written::File(f),
        })
        .collect();
    for u in &config.systemd.units {
        if u.mask == Some(true) {
            out.push(WrittenPath {
                path: unit_path(&u.name),
                what: Written::Mask(u),
            });
        } else if let Some(c) = u.contents.as_deref().filter(|c| !c.is_empty()) {
            out.push(WrittenPath {
                path: unit_path(&u.name),
                what: Written::Unit(u, c),
            });
        }
        for d in &u.dropins {
            if let Some(c) = d.contents.as_deref().filter(|c| !c.is_empty()) {
                out.push(WrittenPath {
                    path: dropin_path(&u.name, &d.name),
                    what: Written::Dropin(u, d, c),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_path_once_with_what_is_known() {
        let config: Config = serde_json::from_value(serde_json::json!({
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [
                {"path": "/etc/whole", "contents": {"source": "data:,x"}},
                {"path": "/etc/appended", "append": [{"source": "data:,y"}]},
            ]},
            "systemd": {"units": [
                {"name": "a.service", "contents": "[Service]\n", "dropins": [{"name": "10.conf", "contents": "[Service]\n"}]},
                {"name": "m.service", "mask": true, "dropins": [{"name": "10.conf", "contents": "[Service]\n"}]},
                {"name": "e.service", "enabled": true, "dropins": [{"name": "empty.conf"}]},
            ]},
        }))
        .unwrap();
        let got: Vec<(String, bool)> = written(&config)
            .iter()
            .map(|w| (w.path.clone(), w.has_known_contents()))
            .collect();
        let want = [
            ("/etc/whole", true),
            ("/etc/appended", false),
            ("/etc/systemd/system/a.service", true),
            ("/etc/systemd/system/a.service.d/10.conf", true),
            ("/etc/systemd/system/m.service", false),
            ("/etc/systemd/system/m.service.d/10.conf", false),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(p, k)| (p.to_string(), *k))
                .collect::<Vec<_>>()
        );
    }
}
