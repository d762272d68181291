//! skopeo, as the helper runs it for container images: `inspect --raw` for a manifest, and
//! `copy` into the node's OCI layout ([`IMAGE_CACHE`](hearth_hostops::os::paths::IMAGE_CACHE)),
//! which checks the containers signature policy (`policy.json`) before a layer is fetched.
//!
//! Why `copy` and not ostree-ext's pull through skopeo's image proxy: Debian 12's skopeo (1.9.3)
//! speaks proxy protocol 0.2.3, which does not enforce `policy.json` (0.2.6 does), and ostree-ext
//! 0.15 imports whatever the proxy returns. `skopeo copy` enforces it; ostree-ext then imports
//! from the verified local layout. skopeo also reads the node's mirrors (`registries.conf`),
//! registry CAs (`certs.d`) and lookaside signature stores (`registries.d`) itself.
//!
//! skopeo runs under `setpriv --pdeathsig KILL`: when the agent stops the helper past its time
//! limit, skopeo goes with it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tracing::{debug, info};

use hearth_hostops::os::paths::{
    display, inside, AUTH_FILES, CERTS_D, CONTAINERS_POLICY, REGISTRIES_CONF, REGISTRIES_D,
};
use hearth_hostops::os::{ContainerImage, OsError, Transport};

/// The largest manifest read (containers/image refuses larger ones too).
pub(crate) const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// The most of skopeo's standard error kept for a message.
const MAX_STDERR_BYTES: usize = 64 * 1024;

/// The largest `policy.json` read.
const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// `setpriv --pdeathsig KILL -- skopeo`: skopeo, killed with the helper.
pub(crate) fn skopeo_command() -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--pdeathsig", "KILL", "--", "skopeo"]);
    c
}

/// The containers configuration of the root a pull is for.
#[derive(Debug)]
pub(crate) struct Skopeo {
    root: PathBuf,
    native: bool,
    authfile: Option<PathBuf>,
    policy: PathBuf,
}

impl Skopeo {
    pub(crate) fn new(root: &Path, native: bool) -> Skopeo {
        let authfile = AUTH_FILES
            .iter()
            .map(|f| inside(root, f))
            .find(|p| p.is_file());
        Skopeo {
            root: root.to_path_buf(),
            native,
            authfile,
            policy: inside(root, CONTAINERS_POLICY),
        }
    }

    /// The policy file a copy is checked against.
    pub(crate) fn policy(&self) -> String {
        display(&self.policy)
    }

    /// `skopeo SUB` with the root's containers configuration: on the booted host skopeo finds it
    /// where it always does; for a root seen from outside it is named (`--policy`,
    /// `--registries.d`, `CONTAINERS_REGISTRIES_CONF`).
    fn command(&self, sub: &str) -> Command {
        let mut c = skopeo_command();
        c.arg("--policy").arg(&self.policy);
        if !self.native {
            c.arg("--registries.d")
                .arg(inside(&self.root, REGISTRIES_D));
            c.env(
                "CONTAINERS_REGISTRIES_CONF",
                inside(&self.root, REGISTRIES_CONF),
            );
        }
        c.arg(sub);
        c
    }

    /// Credentials and, for a root seen from outside, the registry's certificates, with the
    /// option names of `sub` (`inspect`: `--authfile`; `copy`: `--src-authfile`).
    fn source_options(&self, c: &mut Command, image: &ContainerImage, copy: bool) {
        if image.transport != Transport::Registry {
            return;
        }
        if let Some(auth) = &self.authfile {
            c.arg(if copy { "--src-authfile" } else { "--authfile" })
                .arg(auth);
        }
        if !self.native {
            if let Some(registry) = image.registry() {
                let dir = inside(&self.root, CERTS_D).join(registry);
                if dir.is_dir() {
                    c.arg(if copy { "--src-cert-dir" } else { "--cert-dir" })
                        .arg(dir);
                }
            }
        }
    }

    /// Whether the policy's default accepts any image (`insecureAcceptAnything` first): what
    /// ostree-ext refuses for an `ostree-image-signed:` reference.
    pub(crate) fn policy_accepts_anything(&self) -> Result<bool, OsError> {
        let mut raw = Vec::new();
        std::fs::File::open(&self.policy)
            .and_then(|f| f.take(MAX_POLICY_BYTES).read_to_end(&mut raw))
            .map_err(|e| OsError::io(&self.policy, e))?;
        let policy: serde_json::Value = serde_json::from_slice(&raw)
            .map_err(|e| OsError::io(&self.policy, format!("invalid JSON: {e}")))?;
        Ok(policy["default"][0]["type"] == "insecureAcceptAnything")
    }

    fn check_policy(&self, image: &ContainerImage) -> Result<(), OsError> {
        if self.policy.is_file() {
            return Ok(());
        }
        Err(OsError::ImagePull {
            image: image.to_string(),
            cause: format!(
                "there is no containers signature policy at {} (Debian: package \
                 golang-github-containers-common; Fedora: containers-common), and hearth pulls \
                 no image without one",
                self.policy()
            ),
        })
    }

    /// The raw manifest `reference` names (`docker://…@sha256:…`, `oci:…`), at most
    /// [`MAX_MANIFEST_BYTES`].
    pub(crate) fn inspect_raw(
        &self,
        image: &ContainerImage,
        reference: &str,
    ) -> Result<Vec<u8>, OsError> {
        self.check_policy(image)?;
        let mut c = self.command("inspect");
        c.arg("--raw").arg("--retry-times").arg("2");
        self.source_options(&mut c, image, false);
        c.arg(reference);
        debug!(?c, "inspecting");
        let (mut child, stderr) = spawn(c, image)?;
        let mut raw = Vec::new();
        let read = child.stdout.take().map(|out| {
            out.take(MAX_MANIFEST_BYTES as u64 + 1)
                .read_to_end(&mut raw)
        });
        if raw.len() > MAX_MANIFEST_BYTES {
            let _ = child.kill();
        }
        let status = child.wait().map_err(|e| spawn_error(image, e))?;
        let stderr = stderr.join().unwrap_or_default();
        if raw.len() > MAX_MANIFEST_BYTES {
            return Err(OsError::ImagePull {
                image: image.to_string(),
                cause: format!("its manifest is larger than {MAX_MANIFEST_BYTES} bytes"),
            });
        }
        if let Some(Err(e)) = read {
            return Err(spawn_error(image, e));
        }
        if !status.success() {
            return Err(failure(self, image, &stderr));
        }
        Ok(raw)
    }

    /// Copies `reference` into the OCI layout `layout` as `tag`, checked against the policy;
    /// skopeo's progress lines go to the log, and `watch` is called about every half second
    /// while it runs (the caller measures what reached the layout).
    pub(crate) fn copy(
        &self,
        image: &ContainerImage,
        reference: &str,
        layout: &Path,
        tag: &str,
        mut watch: impl FnMut(),
    ) -> Result<(), OsError> {
        self.check_policy(image)?;
        let mut c = self.command("copy");
        // The signatures are checked (the policy applies to the source), not kept: an OCI
        // layout cannot hold them.
        c.arg("--retry-times").arg("2").arg("--remove-signatures");
        self.source_options(&mut c, image, true);
        c.arg(reference)
            .arg(format!("oci:{}:{tag}", layout.display()));
        debug!(?c, "copying");
        let (mut child, stderr) = spawn(c, image)?;
        let stdout = child.stdout.take().map(|out| {
            let image = image.to_string();
            std::thread::spawn(move || log_lines(out, &image))
        });
        let status = loop {
            match child.try_wait().map_err(|e| spawn_error(image, e))? {
                Some(status) => break status,
                None => {
                    watch();
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
            }
        };
        watch();
        if let Some(t) = stdout {
            let _ = t.join();
        }
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            return Err(failure(self, image, &stderr));
        }
        Ok(())
    }
}

/// Logs skopeo's output lines: lines of at most 4 KiB (skopeo's are short; a longer one is
/// cut), at most 10,000 of them; the rest is read and dropped, so skopeo never blocks on a full
/// pipe.
fn log_lines(out: std::process::ChildStdout, image: &str) {
    let mut lines = BufReader::new(out);
    let mut line = Vec::new();
    let mut logged = 0;
    loop {
        line.clear();
        match lines.by_ref().take(4096).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if logged >= 10_000 => {}
            Ok(_) => {
                logged += 1;
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if !text.is_empty() {
                    info!(image, "skopeo: {text}");
                }
            }
        }
    }
}

/// Starts `c` with its output piped; its standard error is read (the end kept) on a thread.
fn spawn(
    mut c: Command,
    image: &ContainerImage,
) -> Result<(std::process::Child, std::thread::JoinHandle<String>), OsError> {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(image, e))?;
    let err = child
        .stderr
        .take()
        .ok_or_else(|| spawn_error(image, std::io::Error::other("no standard error pipe")))?;
    Ok((child, read_stderr(err)))
}

fn read_stderr(err: std::process::ChildStderr) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        let mut err = err;
        // Keep the end: the reason is in skopeo's last lines.
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > 2 * MAX_STDERR_BYTES {
                kept.drain(..kept.len() - MAX_STDERR_BYTES);
            }
        }
        if kept.len() > MAX_STDERR_BYTES {
            kept.drain(..kept.len() - MAX_STDERR_BYTES);
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

fn spawn_error(image: &ContainerImage, e: std::io::Error) -> OsError {
    OsError::ImagePull {
        image: image.to_string(),
        cause: format!(
            "running skopeo: {e} (nodes that pull container images need skopeo and setpriv: \
             Debian packages skopeo, util-linux)"
        ),
    }
}

/// skopeo's failure as an error: a refusal by the policy, or a failed pull.
fn failure(skopeo: &Skopeo, image: &ContainerImage, stderr: &str) -> OsError {
    let cause = last_message(stderr);
    if cause.contains("Source image rejected") || cause.contains("rejected by policy") {
        let cause = cause
            .split_once("Source image rejected: ")
            .map_or(cause.as_str(), |(_, why)| why)
            .to_string();
        return OsError::ImageRefused {
            image: image.to_string(),
            policy: skopeo.policy(),
            cause,
        };
    }
    OsError::ImagePull {
        image: image.to_string(),
        cause,
    }
}

/// skopeo's message without its log decoration (`time="…" level=fatal msg="…"`).
fn last_message(stderr: &str) -> String {
    let line = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("skopeo failed without a message")
        .trim();
    let msg = match line.split_once("msg=\"") {
        Some((_, rest)) => rest.strip_suffix('"').unwrap_or(rest).replace("\\\"", "\""),
        None => line.to_string(),
    };
    let msg: String = msg.chars().filter(|c| !c.is_control()).take(2000).collect();
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skopeos_messages_are_read_without_decoration() {
        let refused = "time=\"2026-11-29T06:00:00Z\" level=fatal msg=\"copying system image \
                       from manifest list: Source image rejected: A signature was required, but \
                       no signature exists\"\n";
        let s = Skopeo::new(Path::new("/"), true);
        let image = ContainerImage::parse("registry.example/os:v1")
            .unwrap()
            .unwrap();
        match failure(&s, &image, refused) {
            OsError::ImageRefused { cause, policy, .. } => {
                assert_eq!(cause, "A signature was required, but no signature exists");
                assert_eq!(policy, CONTAINERS_POLICY);
            }
            other => panic!("{other:?}"),
        }
        let down = "time=\"x\" level=fatal msg=\"initializing source docker://r/os:v1: pinging \
                    container registry r: Get \\\"https://r/v2/\\\": connection refused\"";
        match failure(&s, &image, down) {
            OsError::ImagePull { cause, .. } => {
                assert!(
                    cause.ends_with("\"https://r/v2/\": connection refused"),
                    "{cause}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(last_message("").contains("without a message"));
    }
}
