//! The OS configuration of a host (`/etc/hearth/os.json`): the ostree remote, kernel-type
//! templates, free-space reserves and the health check of a new deployment; loading,
//! validation, and mapping an image and a kernel type to a ref and back.

use std::collections::BTreeMap;
use std::path::Path;

use hearth_config::model::KernelType;
use serde::{Deserialize, Serialize};

use super::bootcount::BootCounting;
use super::error::OsError;
use super::image_ref::{is_valid_ref, ImageRef};

/// Where the OS configuration is read from, inside the root.
pub const CONFIG_PATH: &str = "/etc/hearth/os.json";

/// The OS configuration of a host (`/etc/hearth/os.json`; all fields optional):
///
/// ```json
/// {
///   "remote": {"name": "hearth", "url": "https://hearth.example/ostree/repo", "gpgVerify": false},
///   "kernelTypes": {"realtime": "{ref}-rt", "64k-pages": "{ref}-64k"},
///   "minFreeBytes": {"boot": 1048576, "sysroot": 0},
///   "health": {"timeoutSeconds": 600},
///   "bootCounting": {"esp": "/efi", "tries": 3}
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OsConfig {
    /// The ostree remote OS images are pulled from. Without one, refs and commits must already
    /// be in the sysroot's repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteConfig>,
    /// Kernel type → ref template; `{ref}` stands for the image's ref (the ref of the default
    /// kernel). `default` is not configurable: it is the image ref itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_types: BTreeMap<KernelType, String>,
    /// Free space to keep on top of what staging needs.
    #[serde(default)]
    pub min_free_bytes: MinFree,
    /// What a new deployment must show after its first boot, or be rolled back.
    #[serde(default)]
    pub health: HealthCheck,
    /// Boot counting with systemd-boot: ostree's entries put on the ESP, a new deployment's
    /// with a boot counter (see [`super::bootcount`]). Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_counting: Option<BootCounting>,
}

/// The health check of a new deployment after its first boot (`"health"` in
/// `/etc/hearth/os.json`). The agent waits for systemd to finish booting; the deployment is
/// healthy when the system state is `running`, or `degraded` with only failed units listed in
/// `ignoreFailedUnits`. Otherwise (units failed, or still booting after `timeoutSeconds`) the
/// agent makes the previous deployment the default again, reboots into it and reports why; the
/// failed config is not staged again until a new config or the force file asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheck {
    /// How long the boot may take to finish (default 600 s).
    #[serde(default = "HealthCheck::default_timeout")]
    pub timeout_seconds: u64,
    /// Roll back automatically when the check fails (default true); when false, the node is
    /// `Degraded` with the reason and stays on the new deployment.
    #[serde(default = "HealthCheck::default_rollback")]
    pub rollback: bool,
    /// Failed units that do not make a deployment unhealthy (known-flaky units of the site).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_failed_units: Vec<String>,
}

impl HealthCheck {
    fn default_timeout() -> u64 {
        600
    }

    fn default_rollback() -> bool {
        true
    }
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            timeout_seconds: Self::default_timeout(),
            rollback: Self::default_rollback(),
            ignore_failed_units: Vec::new(),
        }
    }
}

/// An ostree remote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteConfig {
    /// The remote's name in the sysroot's repository (`hearth`).
    pub name: String,
    /// Its URL (`file:///...`, `http://...`, `https://...`). When given, hearth adds the remote
    /// (or changes its URL) before pulling; when absent, the remote must exist already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether commits must carry a valid GPG signature (libostree's `gpg-verify`). Off by
    /// default: hearth-server serves its repository over authenticated TLS, and a commit
    /// checksum in `osImageURL` pins the content.
    #[serde(default)]
    pub gpg_verify: bool,
    /// The CA certificate(s) (PEM) an `https://` remote's certificate must chain to
    /// (libostree's `tls-ca-path`): `/etc/hearth/ca.crt` for hearth-server's repository.
    /// Without it, the system's trust store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca_path: Option<String>,
    /// A file holding a bearer token sent with every request of a pull
    /// (`Authorization: Bearer …`): `/var/lib/hearth/node-token`, where the agent keeps its node
    /// credential, for hearth-server's repository. Read at every pull (a node that enrolls again
    /// gets a new credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_file: Option<String>,
}

/// Free space (bytes) to keep on `/boot` and on the sysroot, on top of what staging needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MinFree {
    /// On `/boot` (default 1 MiB: bootloader entries are rewritten at every deployment).
    #[serde(default = "MinFree::default_boot")]
    pub boot: u64,
    /// On the sysroot (default 0: libostree's own `min-free-space-percent` of the repository,
    /// 3% unless configured, is always added).
    #[serde(default)]
    pub sysroot: u64,
}

impl MinFree {
    fn default_boot() -> u64 {
        1 << 20
    }
}

impl Default for MinFree {
    fn default() -> Self {
        MinFree {
            boot: Self::default_boot(),
            sysroot: 0,
        }
    }
}

impl OsConfig {
    /// Reads `<root>/etc/hearth/os.json`; the default configuration when it does not exist.
    pub fn load(root: &Path) -> Result<OsConfig, OsError> {
        let path = root.join(CONFIG_PATH.trim_start_matches('/'));
        match std::fs::read(&path) {
            Ok(bytes) => {
                let config: OsConfig =
                    serde_json::from_slice(&bytes).map_err(|e| OsError::Config {
                        source_name: path.display().to_string(),
                        message: e.to_string(),
                    })?;
                config.validate(&path.display().to_string())?;
                Ok(config)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(OsConfig::default()),
            Err(e) => Err(OsError::io(&path, e)),
        }
    }

    /// Checks the kernel type templates and the remote.
    pub fn validate(&self, source_name: &str) -> Result<(), OsError> {
        let err = |message: String| OsError::Config {
            source_name: source_name.to_string(),
            message,
        };
        for (kt, template) in &self.kernel_types {
            if *kt == KernelType::Default {
                return Err(err(
                    "kernelTypes.default: the default kernel is the image ref itself; map only \
                     realtime and 64k-pages"
                        .into(),
                ));
            }
            if template.matches("{ref}").count() != 1 {
                return Err(err(format!(
                    "kernelTypes.{kt}: template {template:?} must contain {{ref}} exactly once \
                     (e.g. \"{{ref}}-rt\")"
                )));
            }
            let probe = template.replace("{ref}", "a/b");
            if !is_valid_ref(&probe) {
                return Err(err(format!(
                    "kernelTypes.{kt}: template {template:?} does not make a valid ostree ref"
                )));
            }
        }
        if let Some(problem) = self.boot_counting.as_ref().and_then(BootCounting::problem) {
            return Err(err(problem));
        }
        if let Some(remote) = &self.remote {
            let ok = !remote.name.is_empty()
                && remote
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return Err(err(format!(
                    "remote.name {:?} is not a valid remote name",
                    remote.name
                )));
            }
            if let Some(url) = &remote.url {
                if !["file://", "http://", "https://"]
                    .iter()
                    .any(|p| url.starts_with(p))
                {
                    return Err(err(format!(
                        "remote.url {url:?}: only file://, http:// and https:// are supported"
                    )));
                }
                if remote.bearer_token_file.is_some() && url.starts_with("http://") {
                    return Err(err(format!(
                        "remote.bearerTokenFile: the token would travel in clear text to {url}; \
                         use an https:// URL"
                    )));
                }
            }
            for (field, path) in [
                ("tlsCaPath", &remote.tls_ca_path),
                ("bearerTokenFile", &remote.bearer_token_file),
            ] {
                if let Some(path) = path {
                    if !path.starts_with('/') {
                        return Err(err(format!(
                            "remote.{field} {path:?} must be an absolute path"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The ref of `image` with kernel type `kernel_type`.
    pub fn ref_for(&self, image: &ImageRef, kernel_type: KernelType) -> Result<ImageRef, OsError> {
        if kernel_type == KernelType::Default {
            return Ok(image.clone());
        }
        if let ImageRef::Container(c) = image {
            return Err(OsError::InvalidChange(format!(
                "kernel type {kernel_type} cannot be applied to container image {c}: an image \
                 carries its kernel (deploy an image built with that kernel)"
            )));
        }
        let ImageRef::Ref(base) = image else {
            return Err(OsError::InvalidChange(format!(
                "kernel type {kernel_type} cannot be applied to OS image {image}: it is a commit \
                 checksum, and a kernel type names a variant of a ref (use an ostree ref as \
                 osImageURL)"
            )));
        };
        let Some(template) = self.kernel_types.get(&kernel_type) else {
            return Err(OsError::InvalidChange(format!(
                "kernel type {kernel_type} is not mapped to an OS ref: add \"kernelTypes\": \
                 {{\"{kernel_type}\": \"{{ref}}-...\"}} to {CONFIG_PATH} (image {base})"
            )));
        };
        Ok(ImageRef::Ref(template.replace("{ref}", base)))
    }

    /// Splits a deployed ref into the image ref and the kernel type, by the templates:
    /// `hearth/debian/v1-rt` → (`hearth/debian/v1`, realtime). A ref no template matches has the
    /// default kernel.
    pub fn split_ref(&self, reference: &str) -> (String, KernelType) {
        for (kt, template) in &self.kernel_types {
            if let Some((prefix, suffix)) = template.split_once("{ref}") {
                if reference.len() > prefix.len() + suffix.len()
                    && reference.starts_with(prefix)
                    && reference.ends_with(suffix)
                {
                    let base = &reference[prefix.len()..reference.len() - suffix.len()];
                    return (base.to_string(), *kt);
                }
            }
        }
        (reference.to_string(), KernelType::Default)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> OsConfig {
        serde_json::from_str(
            r#"{"kernelTypes": {"realtime": "{ref}-rt", "64k-pages": "{ref}-64k"},
                "remote": {"name": "hearth", "url": "file:///srv/repo"}}"#,
        )
        .unwrap()
    }

    #[test]
    fn kernel_types_map_to_refs_and_back() {
        let c = config();
        c.validate("test").unwrap();
        let v1 = ImageRef::Ref("hearth/debian/v1".into());
        assert_eq!(c.ref_for(&v1, KernelType::Default).unwrap(), v1);
        assert_eq!(
            c.ref_for(&v1, KernelType::Realtime).unwrap(),
            ImageRef::Ref("hearth/debian/v1-rt".into())
        );
        assert_eq!(
            c.split_ref("hearth/debian/v2-rt"),
            ("hearth/debian/v2".to_string(), KernelType::Realtime)
        );
        assert_eq!(
            c.split_ref("hearth/debian/v2"),
            ("hearth/debian/v2".to_string(), KernelType::Default)
        );
        assert_eq!(
            c.split_ref("-rt"),
            ("-rt".to_string(), KernelType::Default),
            "an empty base is not a match"
        );
        let commit = ImageRef::Commit("b".repeat(64));
        let e = c.ref_for(&commit, KernelType::Realtime).unwrap_err();
        assert!(e.to_string().contains("commit checksum"), "{e}");
        let e = OsConfig::default()
            .ref_for(&v1, KernelType::Realtime)
            .unwrap_err();
        assert!(e.to_string().contains("not mapped"), "{e}");
    }

    #[test]
    fn bad_configs_are_refused() {
        for (json, needle) in [
            (r#"{"kernelTypes": {"realtime": "rt"}}"#, "exactly once"),
            (r#"{"kernelTypes": {"default": "{ref}"}}"#, "default kernel"),
            (
                r#"{"kernelTypes": {"realtime": "{ref} rt"}}"#,
                "valid ostree ref",
            ),
            (r#"{"remote": {"name": "a/b"}}"#, "remote name"),
            (
                r#"{"remote": {"name": "a", "url": "ftp://x"}}"#,
                "only file://",
            ),
            (r#"{"bootCounting": {"tries": 0}}"#, "between 1 and 9"),
            (r#"{"bootCounting": {"esp": "efi"}}"#, "absolute path"),
        ] {
            let c: OsConfig = serde_json::from_str(json).unwrap();
            let e = c.validate("x").unwrap_err().to_string();
            assert!(e.contains(needle), "{json}: {e}");
        }
        assert!(serde_json::from_str::<OsConfig>(r#"{"kernelType": {}}"#).is_err());
        assert!(serde_json::from_str::<OsConfig>(r#"{"kernelTypes": {"rt": "{ref}"}}"#).is_err());
    }
}
