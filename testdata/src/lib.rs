//! hearth's own test fixtures and the optional corpus beside the repository, found in one place.
//!
//! - [`manifest_files`]: `testdata/manifests/`, MachineConfigs and pools written for hearth's
//!   tests (shaped like the MCO's end-to-end manifests where that is the point). Every test of
//!   a plain clone reads these.
//! - [`mco_corpus_files`] and [`seed_blocks`] of [`seeds_dir`]: the MCO's own end-to-end
//!   manifests and the documents users wrote, kept outside the repository (`../shared` beside
//!   it, or `HEARTH_SHARED`). Only tests marked `#[ignore = "needs the MCO e2e corpus: …"]` read
//!   them; `.ci/run` runs those with the path, and they fail, never pass, when it is missing.

use std::path::{Path, PathBuf};

/// `testdata/` in the repository.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// `testdata/manifests/`.
pub fn manifests_dir() -> PathBuf {
    root().join("manifests")
}

/// The path of one of hearth's own manifests, which must exist.
pub fn manifest_path(name: &str) -> PathBuf {
    let p = manifests_dir().join(name);
    assert!(p.is_file(), "no fixture {}", p.display());
    p
}

/// The text of one of hearth's own manifests.
pub fn manifest(name: &str) -> String {
    read(&manifest_path(name))
}

/// hearth's own manifests, `(file name, text)` sorted by name.
pub fn manifest_files() -> Vec<(String, String)> {
    yaml_files(&manifests_dir())
}

/// The directory outside the repository that holds the MCO corpus and the users' documents:
/// `HEARTH_SHARED` (a relative path is taken from the repository's top, as a user types it there,
/// not from the test's package directory that cargo runs it in), else `../shared` beside the
/// repository. Panics, naming it, when it has no `corpus/` (a test that needs it must fail, not
/// pass, without it).
pub fn shared() -> PathBuf {
    let top = root().join("..");
    let dir = match std::env::var_os("HEARTH_SHARED") {
        Some(p) => top.join(p),
        None => top.join("../shared"),
    };
    assert!(
        dir.join("corpus").is_dir(),
        "the MCO e2e corpus is not at {}: set HEARTH_SHARED to the directory that holds \
         corpus/mco-e2e and seeds/ (tests that need it are #[ignore]d; docs/testing.md)",
        dir.display()
    );
    dir
}

/// The MCO's end-to-end manifests (`corpus/mco-e2e` of [`shared`]).
pub fn mco_corpus_dir() -> PathBuf {
    shared().join("corpus/mco-e2e")
}

/// The MCO's end-to-end manifests, `(file name, text)` sorted by name.
pub fn mco_corpus_files() -> Vec<(String, String)> {
    yaml_files(&mco_corpus_dir())
}

/// The users' documents hearth started from (`seeds/` of [`shared`]).
pub fn seeds_dir() -> PathBuf {
    shared().join("seeds")
}

/// hearth's own users' posts (`testdata/posts/`): prose around manifests, as users write it.
pub fn posts_dir() -> PathBuf {
    root().join("posts")
}

/// A manifest block taken from a document.
#[derive(Debug, Clone)]
pub struct Block {
    /// `<directory name>/<file name>`, e.g. `seeds/004_...txt`.
    pub file: String,
    /// 1-based line of the block's first line in the document.
    pub first_line: usize,
    /// The block, preceded by blank lines so that line numbers match the document.
    pub text: String,
}

/// Every fenced code block of every document in `dir` that holds a Kubernetes manifest (a line
/// starting `apiVersion:`); of a `cat << EOF > file` block, the here-document only.
pub fn blocks(dir: &Path) -> Vec<Block> {
    let label = dir.file_name().unwrap_or_default().to_string_lossy();
    let mut out = Vec::new();
    for f in sorted_files(dir) {
        let text = read(&f);
        let name = format!(
            "{label}/{}",
            f.file_name().unwrap_or_default().to_string_lossy()
        );
        out.extend(blocks_of(&name, &text));
    }
    out
}

fn blocks_of(name: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        let start = i + 1;
        let end = (start..lines.len())
            .find(|&j| lines[j].trim_start().starts_with("```"))
            .unwrap_or(lines.len());
        let (mut body_start, mut body_end) = (start, end);
        if let Some(h) = (start..end).find(|&j| lines[j].contains("<< EOF")) {
            body_start = h + 1;
            body_end = (body_start..end)
                .find(|&j| lines[j].trim() == "EOF")
                .unwrap_or(end);
        }
        let body = &lines[body_start..body_end];
        if body.iter().any(|l| l.starts_with("apiVersion:")) {
            let mut padded = "\n".repeat(body_start);
            padded.push_str(&body.join("\n"));
            padded.push('\n');
            out.push(Block {
                file: name.to_string(),
                first_line: body_start + 1,
                text: padded,
            });
        }
        i = end + 1;
    }
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn yaml_files(dir: &Path) -> Vec<(String, String)> {
    sorted_files(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, read(&p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_take_the_here_document_and_keep_line_numbers() {
        let doc =
            "intro\n```bash\ncat << EOF > a.yaml\napiVersion: v1\nkind: X\nEOF\noc apply\n```\n\
                   ```\nNAME CONFIG\n```\n";
        let b = blocks_of("posts/x.md", doc);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].first_line, 4);
        assert_eq!(b[0].text.lines().nth(3), Some("apiVersion: v1"));
        assert!(!b[0].text.contains("oc apply"));
    }

    #[test]
    fn the_posts_hold_four_manifest_blocks() {
        let b = blocks(&posts_dir());
        let lines: Vec<usize> = b.iter().map(|b| b.first_line).collect();
        assert_eq!(lines, [10, 29, 45, 59], "{b:#?}");
    }
}
