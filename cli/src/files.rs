//! What `-f` names, as `kubectl` reads it: each `-f PATH` (the flag repeats) is a file, `-`
//! (standard input), or a directory, whose `*.yaml`, `*.yml` and `*.json` files are read in
//! sorted order; its subdirectories only with `-R` (`--recursive`). A file named on the command
//! line is read whatever its extension. With `-R`, a symbolic link to a directory is not
//! followed (as `kubectl`'s walk does not), so a link loop cannot make the walk endless.

use anyhow::Context;
use std::path::{Path, PathBuf};

fn is_manifest(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot list {}", dir.display()))?;
    entries.sort();
    for entry in entries {
        let link = std::fs::symlink_metadata(&entry)
            .with_context(|| format!("cannot read {}", entry.display()))?;
        if entry.is_dir() {
            if recursive && !link.file_type().is_symlink() {
                walk(&entry, recursive, out)?;
            }
        } else if is_manifest(&entry) {
            out.push(entry);
        }
    }
    Ok(())
}

/// The manifest files `paths` name (see the module doc), in order: each path's files sorted,
/// paths in the order given.
pub fn manifest_files(paths: &[PathBuf], recursive: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            out.push(path.clone());
            continue;
        }
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        if meta.is_dir() {
            walk(path, recursive, &mut out)?;
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_flat_unless_recursive() {
        let d = tempfile::tempdir().unwrap();
        let p = |s: &str| d.path().join(s);
        std::fs::create_dir_all(p("dir/sub")).unwrap();
        for f in [
            "dir/b.yaml",
            "dir/a.yml",
            "dir/c.json",
            "dir/notes.txt",
            "dir/sub/d.yaml",
            "x.conf",
        ] {
            std::fs::write(p(f), "").unwrap();
        }
        std::os::unix::fs::symlink(p("dir"), p("dir/sub/loop")).unwrap();
        let flat = manifest_files(&[p("dir"), p("x.conf")], false).unwrap();
        assert_eq!(
            flat,
            [
                p("dir/a.yml"),
                p("dir/b.yaml"),
                p("dir/c.json"),
                p("x.conf")
            ]
        );
        let deep = manifest_files(&[p("dir")], true).unwrap();
        assert_eq!(
            deep,
            [
                p("dir/a.yml"),
                p("dir/b.yaml"),
                p("dir/c.json"),
                p("dir/sub/d.yaml")
            ]
        );
        let e = manifest_files(&[p("missing")], false).unwrap_err();
        assert!(format!("{e:#}").contains("cannot read"), "{e:#}");
    }
}
