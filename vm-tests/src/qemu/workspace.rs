//! Binaries of this workspace (the agent) for tests to copy into a guest.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// A binary of this workspace (e.g. `hearth-agent`) in the target directory the tests run
/// from, built with `cargo build -p PACKAGE --bin NAME` first if it is missing. It is not
/// rebuilt when it exists (`cargo test --workspace` has just built it with the workspace's
/// features; a `cargo build -p` here could rebuild half the dependency tree with others):
/// run `cargo build -p PACKAGE` before `cargo test -p hearth-vm-tests` alone.
pub fn workspace_binary(package: &str, name: &str) -> Result<PathBuf> {
    // The test binary is <target>/<profile>/deps/<test>-<hash>.
    let exe = std::env::current_exe().context("locating the test binary")?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow!("unexpected test binary location {}", exe.display()))?;
    let path = profile_dir.join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", package, "--bin", name]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .context("running cargo build")?;
        if !status.success() {
            bail!("cargo build -p {package} --bin {name} failed: {status}");
        }
    }
    if !path.exists() {
        bail!(
            "{} not found after cargo build -p {package}",
            path.display()
        );
    }
    Ok(path)
}
