//! [`SigningKey`]: a GnuPG key made for a test, in a keyring of its own, that
//! `skopeo copy --sign-by` signs images with ("simple signing"); the signatures go to a
//! lookaside store (a directory), which a node reads through its `registries.d`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util;

/// A signing key and its lookaside signature store.
#[derive(Debug)]
pub struct SigningKey {
    dir: tempfile::TempDir,
    fingerprint: String,
}

impl SigningKey {
    /// Makes a key (RSA 2048, no passphrase) in a new keyring.
    pub fn create(name: &str) -> Result<SigningKey> {
        util::require_program("gpg", "gnupg")?;
        let dir = tempfile::Builder::new()
            .prefix("hearth-gpg-")
            .tempdir()
            .context("creating the keyring's directory")?;
        let home = dir.path().join("gnupg");
        fs::create_dir(&home)?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700))?;
        let gpg = |args: &[&str]| -> Result<Vec<u8>> {
            let out = Command::new("gpg")
                .arg("--homedir")
                .arg(&home)
                .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
                .args(args)
                .output()
                .context("running gpg")?;
            if !out.status.success() {
                bail!(
                    "gpg {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Ok(out.stdout)
        };
        let uid = format!("{name} <{name}@hearth.invalid>");
        gpg(&["--quick-gen-key", &uid, "rsa2048", "sign", "never"])?;
        let listing = String::from_utf8(gpg(&["--with-colons", "--list-secret-keys"])?)?;
        let fingerprint = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .and_then(|rest| rest.split(':').find(|f| f.len() == 40))
            .context("gpg listed no fingerprint for the new key")?
            .to_string();
        let public = gpg(&["--export", &fingerprint])?;
        fs::write(dir.path().join("public.gpg"), public)?;
        fs::create_dir(dir.path().join("sigstore"))?;
        Ok(SigningKey { dir, fingerprint })
    }

    /// The GnuPG home directory (`GNUPGHOME`).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("gnupg")
    }

    /// The key's fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The public key (a binary keyring), what a policy's `signedBy` `keyPath` names.
    pub fn public_key(&self) -> PathBuf {
        self.dir.path().join("public.gpg")
    }

    /// The lookaside store the signatures are written to.
    pub fn sigstore(&self) -> PathBuf {
        self.dir.path().join("sigstore")
    }

    /// A `registries.d` directory that sends signatures of images pushed to `registry` into
    /// [`SigningKey::sigstore`].
    pub fn registries_d_for(&self, registry: &str) -> Result<PathBuf> {
        let d = self.dir.path().join("registries.d");
        fs::create_dir_all(&d)?;
        fs::write(
            d.join("hearth-test.yaml"),
            lookaside_config(registry, &self.sigstore(), true),
        )?;
        Ok(d)
    }
}

/// A `registries.d` file naming a lookaside store for `registry` (`sigstore-staging` is where
/// signing writes; `sigstore` where verification reads).
pub fn lookaside_config(registry: &str, store: &Path, staging: bool) -> String {
    let key = if staging {
        "sigstore-staging"
    } else {
        "sigstore"
    };
    format!(
        "docker:\n  {registry}:\n    {key}: file://{}\n",
        store.display()
    )
}
