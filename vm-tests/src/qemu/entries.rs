//! The boot loader entries on a VM disk's ESP (`/loader/entries/*.conf`, what systemd-boot
//! reads), read from the host with mtools at the ESP's offset: no mount, no loop device; the
//! harness reads them while QEMU is stopped, between boots, for what the firmware really saw.
//! The counter in a file name is read as systemd's Automatic Boot Assessment names it
//! (`NAME+LEFT[-DONE].conf`), independently of hearth's own reading of it.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util;

/// One entry file on the ESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspEntry {
    /// Its file name, with the boot counter if any (`hearth-<deployment>+2-1.conf`).
    pub file: String,
    /// Its content.
    pub text: String,
}

impl EspEntry {
    /// The boot counter of the file name (`+LEFT[-DONE]`): `(left, done)`. Read here, not with
    /// `hearth_hostops::os::bootcount::EntryName::parse`, on purpose: the harness checks the
    /// names the product writes against systemd-boot's format, not against the product's own
    /// parser.
    pub fn counter(&self) -> Option<(u32, u32)> {
        let stem = self.file.strip_suffix(".conf")?;
        let (_, counter) = stem.rsplit_once('+')?;
        let (left, done) = counter.split_once('-').unwrap_or((counter, "0"));
        Some((left.parse().ok()?, done.parse().ok()?))
    }

    /// The value of `key` (first line).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.text.lines().find_map(|l| {
            l.trim()
                .strip_prefix(key)
                .filter(|rest| rest.starts_with(char::is_whitespace))
                .map(str::trim)
        })
    }
}

fn mtools(disk: &Path, esp_offset: u64, tool: &str, args: &[&str]) -> Result<String> {
    let program = util::require_program(tool, "mtools")?;
    let out = Command::new(program)
        .env("MTOOLS_SKIP_CHECK", "1")
        .arg("-i")
        .arg(format!("{}@@{esp_offset}", disk.display()))
        .args(args)
        .output()
        .with_context(|| format!("running {tool}"))?;
    if !out.status.success() {
        bail!(
            "{tool} {args:?} on the ESP of {} failed: {}",
            disk.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The entries on the ESP of `disk` (the FAT file system at `esp_offset`), sorted by file name.
pub fn read_esp_entries(disk: &Path, esp_offset: u64) -> Result<Vec<EspEntry>> {
    // `mdir -b`: bare names, one per line, with their path.
    let listing = mtools(disk, esp_offset, "mdir", &["-b", "::/loader/entries"])?;
    let mut entries = Vec::new();
    for path in listing
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(".conf"))
    {
        let file = path.rsplit('/').next().unwrap_or(path).to_string();
        let text = mtools(disk, esp_offset, "mtype", &[path])?;
        entries.push(EspEntry { file, text });
    }
    entries.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_names() {
        let e = |file: &str| EspEntry {
            file: file.into(),
            text: "title t\nversion 2\noptions a=b\n".into(),
        };
        assert_eq!(e("hearth-x.conf").counter(), None);
        assert_eq!(e("hearth-x+3.conf").counter(), Some((3, 0)));
        assert_eq!(e("hearth-x+0-3.conf").counter(), Some((0, 3)));
        assert_eq!(e("hearth-x.conf").get("version"), Some("2"));
        assert_eq!(e("hearth-x.conf").get("opt"), None);
    }
}
