// Records the git commit being built as `HEARTH_BUILD_COMMIT`, for `GET /api/v1/version` and
// `hearth version` (`cli/build.rs` includes this file):
// `$HEARTH_COMMIT` when set (a build from a source tarball, which has no `.git`), else
// `git rev-parse HEAD`, else `unknown`. Rebuilt when HEAD or the branch it names moves.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=HEARTH_COMMIT");
    let commit = match std::env::var("HEARTH_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
            watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
            for name in watched {
                if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
                    if std::path::Path::new(&path).exists() {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
            }
            git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    // Only hex digits (or `unknown`) reach the binary.
    let commit = if commit.chars().all(|c| c.is_ascii_alphanumeric()) {
        commit
    } else {
        "unknown".into()
    };
    println!("cargo:rustc-env=HEARTH_BUILD_COMMIT={commit}");
}
