//! The agent served at first boot (`--serve-agent DIR`), so that a stock OS image (Fedora
//! CoreOS, RHCOS, plain Debian) becomes a node with nothing but a pointer Ignition config.
//!
//! At start the server reads `DIR/hearth-agent` (required) and `DIR/hearth-ostree-helper`
//! (optional: ostree hosts run libostree through it), each a regular file of at most
//! [`MAX_BINARY_BYTES`], and keeps them with their sha512. Every first-boot config then writes
//! them to [`INSTALL_DIR`] (writable on a read-only `/usr`: `/usr/local` is `/var/usrlocal` on
//! Fedora CoreOS), fetched from `GET /firstboot/bin/<name>` and checked by Ignition against the
//! sha512 in the (authenticated) config, and the shipped `hearth-agent.service` with its
//! `ExecStart` pointing there. The binaries carry no secret: the download needs no credential
//! (Ignition 2.x and 3.0 cannot send one per file); their integrity is the config's hash.

use axum::body::Bytes;
use sha2::{Digest, Sha512};
use std::io::Read;
use std::path::Path;

/// The largest binary served (a debug build of the agent is about 75 MiB; a release build a
/// few MiB).
pub const MAX_BINARY_BYTES: u64 = 256 << 20;
/// Where first-boot configs put the binaries.
pub const INSTALL_DIR: &str = "/usr/local/bin";
/// The agent (required in `--serve-agent DIR`).
pub const AGENT: &str = "hearth-agent";
/// The libostree helper (served when present).
pub const OSTREE_HELPER: &str = "hearth-ostree-helper";
/// The URL path the binaries are served under (`<path>/<name>`).
pub const URL_PATH: &str = "/firstboot/bin";

/// The shipped unit, as packaged for `/usr/bin/hearth-agent`.
const SHIPPED_UNIT: &str = include_str!("../../units/hearth-agent.service");

/// One served binary.
#[derive(Debug, Clone)]
pub struct ServedBinary {
    /// Its file name (also under [`INSTALL_DIR`] and [`URL_PATH`]).
    pub name: &'static str,
    /// Its content.
    pub bytes: Bytes,
    /// Its sha512, hex.
    pub sha512: String,
}

/// The binaries of `--serve-agent DIR`.
#[derive(Debug, Clone, Default)]
pub struct ServedAgent {
    /// The agent first, then the helper if present.
    pub binaries: Vec<ServedBinary>,
}

impl ServedAgent {
    /// Reads the binaries of `dir`; the error names the file and what to do.
    pub fn load(dir: &Path) -> Result<ServedAgent, String> {
        let mut binaries = Vec::new();
        for name in [AGENT, OSTREE_HELPER] {
            let path = dir.join(name);
            let file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && name == OSTREE_HELPER => {
                    continue
                }
                Err(e) => {
                    return Err(format!(
                        "--serve-agent: cannot open {}: {e} (the directory must hold {AGENT}, \
                         and {OSTREE_HELPER} for ostree hosts)",
                        path.display()
                    ))
                }
            };
            let meta = file
                .metadata()
                .map_err(|e| format!("--serve-agent: {}: {e}", path.display()))?;
            if !meta.is_file() {
                return Err(format!(
                    "--serve-agent: {} is not a regular file",
                    path.display()
                ));
            }
            if meta.len() > MAX_BINARY_BYTES {
                return Err(format!(
                    "--serve-agent: {} has {} bytes, more than the {MAX_BINARY_BYTES} served",
                    path.display(),
                    meta.len()
                ));
            }
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            file.take(MAX_BINARY_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("--serve-agent: reading {}: {e}", path.display()))?;
            if bytes.len() as u64 > MAX_BINARY_BYTES {
                return Err(format!(
                    "--serve-agent: {} grew past {MAX_BINARY_BYTES} bytes while read",
                    path.display()
                ));
            }
            let sha512 = hex::encode(Sha512::digest(&bytes));
            binaries.push(ServedBinary {
                name,
                bytes: Bytes::from(bytes),
                sha512,
            });
        }
        Ok(ServedAgent { binaries })
    }

    /// The binary named `name`.
    pub fn get(&self, name: &str) -> Option<&ServedBinary> {
        self.binaries.iter().find(|b| b.name == name)
    }
}

/// The shipped unit with `ExecStart` running the agent from [`INSTALL_DIR`].
pub fn unit_text() -> String {
    SHIPPED_UNIT
        .lines()
        .map(|l| {
            if l.starts_with("ExecStart=/usr/bin/hearth-agent") {
                l.replacen("/usr/bin/", &format!("{INSTALL_DIR}/"), 1)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_unit_runs_the_served_agent() {
        let unit = unit_text();
        assert!(
            unit.contains("\nExecStart=/usr/local/bin/hearth-agent run\n"),
            "{unit}"
        );
        assert!(!unit.contains("ExecStart=/usr/bin/"));
        assert!(unit.contains("WatchdogSec="));
    }

    #[test]
    fn binaries_are_read_with_their_hash_and_the_helper_is_optional() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ServedAgent::load(dir.path())
            .unwrap_err()
            .contains("hearth-agent"));
        std::fs::write(dir.path().join(AGENT), b"agent").unwrap();
        let a = ServedAgent::load(dir.path()).unwrap();
        assert_eq!(a.binaries.len(), 1);
        assert_eq!(
            a.get(AGENT).unwrap().sha512,
            hex::encode(Sha512::digest(b"agent"))
        );
        std::fs::create_dir(dir.path().join(OSTREE_HELPER)).unwrap();
        assert!(ServedAgent::load(dir.path())
            .unwrap_err()
            .contains("not a regular file"));
    }
}
