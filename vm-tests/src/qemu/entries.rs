//! The boot loader entries of a VM's disk (`/boot/loader/entries/*.conf`), read with `debugfs`
//! without mounting the disk, and the kernel and initrd an entry names, copied out of it.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};

use crate::util;

/// A boot loader entry of the VM's disk (`/boot/loader/entries/*.conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmBootEntry {
    /// The entry's file name.
    pub file: String,
    /// `title`.
    pub title: String,
    /// `version`: the highest is the default.
    pub version: u64,
    /// `options`: the kernel command line.
    pub options: String,
    /// `linux`, relative to the boot file system.
    pub linux: String,
    /// `initrd`, relative to the boot file system.
    pub initrd: String,
}

impl VmBootEntry {
    /// Parses an entry's text.
    pub fn parse(file: &str, text: &str) -> Result<VmBootEntry> {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for line in text.lines() {
            if let Some((k, v)) = line.trim().split_once(char::is_whitespace) {
                fields.insert(k, v.trim());
            }
        }
        let get = |k: &str| -> Result<String> {
            fields
                .get(k)
                .map(|v| v.to_string())
                .ok_or_else(|| anyhow!("boot entry {file} has no `{k}` line:\n{text}"))
        };
        Ok(VmBootEntry {
            file: file.to_string(),
            title: fields
                .get("title")
                .map(|v| v.to_string())
                .unwrap_or_default(),
            version: get("version")?
                .parse()
                .with_context(|| format!("boot entry {file}: `version` is not a number"))?,
            options: get("options")?,
            linux: get("linux")?,
            initrd: get("initrd")?,
        })
    }

    /// The kernel arguments of `options`.
    pub fn kernel_args(&self) -> Vec<String> {
        self.options
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }
}

/// Runs `debugfs -R REQUEST DISK` (read-only); fails on the errors debugfs prints (it exits 0
/// on most of them).
fn debugfs(disk: &Path, request: &str) -> Result<Vec<u8>> {
    let debugfs = util::require_program("debugfs", "e2fsprogs")?;
    let out = Command::new(debugfs)
        .arg("-R")
        .arg(request)
        .arg(disk)
        .stdin(Stdio::null())
        .output()
        .context("running debugfs")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The first stderr line is debugfs's banner ("debugfs 1.47.0 (5-Feb-2023)").
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("debugfs ") && !l.trim().is_empty())
        .collect();
    if !out.status.success() || !errors.is_empty() {
        bail!(
            "debugfs -R {request:?} {} failed ({}): {}",
            disk.display(),
            out.status,
            errors.join("; ")
        );
    }
    Ok(out.stdout)
}

/// The path of a file of the boot file system on the disk: `/boot` is a directory of the root
/// file system, and the entries' paths are relative to the boot file system.
fn boot_path(path: &str) -> String {
    if path.starts_with("/boot/") {
        path.to_string()
    } else {
        format!("/boot/{}", path.trim_start_matches('/'))
    }
}

/// The entries directory: `/boot/loader` is a symlink (`loader.0` or `loader.1`), which
/// libostree swaps atomically; debugfs does not follow it, so resolve it by hand.
fn entries_dir(disk: &Path) -> Result<String> {
    let stat = debugfs(disk, "stat /boot/loader")?;
    let stat = String::from_utf8_lossy(&stat);
    if let Some(target) = stat
        .lines()
        .find_map(|l| l.trim().strip_prefix("Fast link dest: "))
    {
        let target = target.trim().trim_matches('"');
        let resolved = if target.starts_with('/') {
            target.to_string()
        } else {
            format!("/boot/{target}")
        };
        return Ok(format!("{resolved}/entries"));
    }
    Ok("/boot/loader/entries".to_string())
}

/// All boot entries of a disk, highest `version` (the default) first.
pub fn read_boot_entries(disk: &Path) -> Result<Vec<VmBootEntry>> {
    let dir = entries_dir(disk)?;
    let listing = debugfs(disk, &format!("ls -p {dir}"))?;
    let mut entries = Vec::new();
    for line in String::from_utf8_lossy(&listing).lines() {
        // `/inode/mode/uid/gid/name/size/`
        let fields: Vec<&str> = line.split('/').collect();
        let Some(name) = fields.get(5) else { continue };
        if !name.ends_with(".conf") {
            continue;
        }
        let text = debugfs(disk, &format!("cat {dir}/{name}"))?;
        entries.push(VmBootEntry::parse(name, &String::from_utf8_lossy(&text))?);
    }
    if entries.is_empty() {
        bail!(
            "no boot entries in {dir} on {}: nothing to boot",
            disk.display()
        );
    }
    entries.sort_by_key(|e| std::cmp::Reverse(e.version));
    Ok(entries)
}

/// Copies a file out of the disk's boot file system.
pub(super) fn extract(disk: &Path, path: &str, dest: &Path) -> Result<()> {
    let _ = fs::remove_file(dest);
    debugfs(
        disk,
        &format!("dump {} {}", boot_path(path), dest.display()),
    )?;
    let len = fs::metadata(dest)
        .with_context(|| format!("debugfs did not write {} ({path})", dest.display()))?
        .len();
    if len == 0 {
        bail!("{path} on {} is empty", disk.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_name_what_is_missing() {
        let text = "title Debian GNU/Linux 12 (bookworm) (ostree:debian:0)\nversion 2\n\
                    options root=LABEL=hearth-root rw ostree=/ostree/boot.1/debian/abc/0\n\
                    linux /ostree/debian-abc/vmlinuz-6.1.0-28-amd64\n\
                    initrd /ostree/debian-abc/initramfs-6.1.0-28-amd64.img\n";
        let e = VmBootEntry::parse("ostree-1-debian.conf", text).unwrap();
        assert_eq!(e.version, 2);
        assert_eq!(
            boot_path(&e.linux),
            "/boot/ostree/debian-abc/vmlinuz-6.1.0-28-amd64"
        );
        assert!(e.kernel_args().contains(&"rw".to_string()));
        let err = VmBootEntry::parse("x.conf", "version 1\n").unwrap_err();
        assert!(format!("{err:#}").contains("no `options`"), "{err:#}");
    }
}
