//! A boot loader entry of a sysroot (`boot/loader/entries/*.conf`), resolved through its
//! `ostree=` argument to the deployment directory it boots.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

/// One boot loader entry (`boot/loader/entries/*.conf`), resolved to its deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootEntry {
    /// The entry file.
    pub path: PathBuf,
    /// `title`.
    pub title: String,
    /// `version`: the highest is the default.
    pub version: u64,
    /// `options`: the kernel command line.
    pub options: String,
    /// `linux`.
    pub linux: String,
    /// `initrd`.
    pub initrd: String,
    /// The deployment directory (on this machine) that `ostree=` points to.
    pub deployment: PathBuf,
    /// Its commit checksum.
    pub checksum: String,
    /// Its deployment serial.
    pub serial: i32,
}

impl BootEntry {
    /// The kernel arguments of `options` without libostree's `ostree=`.
    pub fn kernel_args(&self) -> Vec<String> {
        self.options
            .split_whitespace()
            .filter(|a| !a.starts_with("ostree="))
            .map(str::to_string)
            .collect()
    }

    pub(super) fn parse(sysroot: &Path, path: &Path) -> Result<BootEntry> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for line in text.lines() {
            if let Some((k, v)) = line.trim().split_once(char::is_whitespace) {
                fields.insert(k, v.trim());
            }
        }
        let get = |k: &str| fields.get(k).map(|v| v.to_string()).unwrap_or_default();
        let options = get("options");
        let ostree = options
            .split_whitespace()
            .find_map(|a| a.strip_prefix("ostree="))
            .ok_or_else(|| anyhow!("{}: no ostree= in options {options:?}", path.display()))?;
        let link = sysroot.join(ostree.trim_start_matches('/'));
        let deployment = fs::canonicalize(&link)
            .with_context(|| format!("{}: resolving ostree={ostree}", path.display()))?;
        let base = deployment
            .file_name()
            .and_then(OsStr::to_str)
            .unwrap_or_default()
            .to_string();
        let (checksum, serial) = base
            .rsplit_once('.')
            .and_then(|(c, s)| Some((c.to_string(), s.parse().ok()?)))
            .ok_or_else(|| anyhow!("{}: unexpected deployment directory {base}", path.display()))?;
        Ok(BootEntry {
            path: path.to_path_buf(),
            title: get("title"),
            version: get("version").parse().unwrap_or(0),
            options,
            linux: get("linux"),
            initrd: get("initrd"),
            deployment,
            checksum,
            serial,
        })
    }
}
