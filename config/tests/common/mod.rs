//! Shared helpers for the acceptance tests: where the shared corpus and seeds are, and how YAML
//! blocks are taken out of the seed documents.
#![allow(dead_code)]

use std::path::PathBuf;

/// The shared directory (`../shared` next to the repository), or `HEARTH_SHARED`.
pub fn shared() -> PathBuf {
    if let Ok(p) = std::env::var("HEARTH_SHARED") {
        return PathBuf::from(p);
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidate = here.join("../../shared");
    assert!(
        candidate.join("corpus").is_dir(),
        "the shared corpus is not at {} (set HEARTH_SHARED to its location)",
        candidate.display()
    );
    candidate
}

/// A manifest block taken from a seed document.
#[derive(Debug, Clone)]
pub struct SeedBlock {
    /// `seeds/004_...txt`.
    pub file: String,
    /// 1-based line of the block's first line in the seed file.
    pub first_line: usize,
    /// The block, preceded by blank lines so that line numbers match the seed file.
    pub text: String,
}

/// Every fenced code block of every seed that holds a Kubernetes manifest (`apiVersion:`); for
/// `cat << EOF > file` blocks, the here-document only.
pub fn seed_blocks() -> Vec<SeedBlock> {
    let dir = shared().join("seeds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("seeds directory")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let name = format!("seeds/{}", f.file_name().unwrap().to_string_lossy());
        let mut i = 0;
        while i < lines.len() {
            if lines[i].trim_start().starts_with("```") {
                let start = i + 1;
                let mut end = start;
                while end < lines.len() && !lines[end].trim_start().starts_with("```") {
                    end += 1;
                }
                let mut body_start = start;
                let mut body_end = end;
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
                    out.push(SeedBlock {
                        file: name.clone(),
                        first_line: body_start + 1,
                        text: padded,
                    });
                }
                i = end + 1;
            } else {
                i += 1;
            }
        }
    }
    out
}

/// The corpus manifests, sorted by file name.
pub fn corpus_files() -> Vec<(String, String)> {
    let dir = shared().join("corpus/mco-e2e");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus directory")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}
