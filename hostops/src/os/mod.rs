//! The OS layer: kernel arguments, kernel type and OS image pivots, behind one interface.
//!
//! [`OsBackend`] is an enum over the backends (async functions in traits are not
//! dyn-compatible, and the set is closed):
//!
//! | backend | when | what |
//! | --- | --- | --- |
//! | [`OsBackend::Ostree`] | `/run/ostree-booted` exists under the root | libostree directly (the `ostree` crate, Debian's libostree 2022.7) |
//! | [`OsBackend::RpmOstree`] | an rpm-ostree host (`/usr/bin/rpm-ostree`) whose daemon answers on the bus given to [`OsBackend::detect_on_bus`] | rpm-ostree's D-Bus API (`org.projectatomic.rpmostree1`), see [`rpmostree`] |
//! | [`OsBackend::None`] | a plain systemd host, or an rpm-ostree host without a reachable rpm-ostree daemon | every operation fails with the reason; files, units and keys still work |
//!
//! ## One change, one deployment
//!
//! The agent collects the OS actions of a plan into an [`OsChange`]
//! ([`OsChange::from_actions`]) and calls [`OsBackend::stage`] once: it stages **one** new
//! deployment that carries the OS image, the kernel type and the kernel arguments together.
//! The new deployment becomes the default at the next boot. After that boot,
//! [`OsBackend::verify_booted`] with the [`OsExpectation`] of the [`StagedDeployment`] lists
//! every difference (booted another deployment, kernel arguments missing or extra) as a
//! sentence; [`OsBackend::rollback`] makes the previous deployment the default again.
//!
//! ## Kernel arguments and the ledger
//!
//! Kernel arguments are a real diff on the booted deployment's arguments: the `delete` entries
//! of the plan are applied, then the `append` entries, with the semantics of
//! [`hearth_config::plan::apply_kernel_argument_ops`] within hearth's own arguments (order and duplicates are kept; of several identical arguments, hearth's are the last ones and the image's are never touched). hearth
//! only removes arguments that it added itself: [`ledger::KargLedger`]
//! (`/var/lib/hearth/kargs.json`) records them. A `delete` of an argument the ledger does not
//! cover (the image, the installer or an admin set it) is **skipped**, not refused: the rest of
//! the change is staged and the skipped deletion is reported with its reason in
//! [`StagedDeployment::skipped_deletes`]; the expectation that the agent verifies after the
//! boot contains what was really staged.
//!
//! ## Kernel types and OS images (libostree)
//!
//! On plain ostree a kernel type names an OS ref: [`OsConfig::kernel_types`] maps `realtime`
//! and `64k-pages` to a template such as `{ref}-rt`, applied to the image's ref
//! (`hearth/debian/v1` → `hearth/debian/v1-rt`). The default kernel is the image ref itself.
//! Every new deployment records its image and kernel type in its origin file (group
//! `[hearth]`), so that a pivot keeps the kernel type: moving a realtime host to
//! `hearth/debian/v2` deploys `hearth/debian/v2-rt`. An OS image (`osImageURL`) is an ostree
//! ref or a commit checksum, pulled from the configured remote ([`OsConfig::remote`]) into the
//! sysroot's repository.

pub mod ledger;
pub mod none;
pub mod ostree;
pub mod rpmostree;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use hearth_config::model::KernelType;
use hearth_config::plan::Action;
use serde::{Deserialize, Serialize};

pub use self::ledger::KargLedger;
pub use self::none::NoneBackend;
pub use self::ostree::OstreeBackend;
pub use self::rpmostree::RpmOstreeBackend;

/// Where the OS configuration is read from, inside the root.
pub const CONFIG_PATH: &str = "/etc/hearth/os.json";

/// The reason given on hosts that are not ostree hosts.
pub const NOT_OSTREE_REASON: &str = "not an ostree host: kernel arguments, kernel type and OS \
     images can only be managed on ostree or rpm-ostree hosts";

/// The reason [`OsBackend::detect`] gives on rpm-ostree hosts: the rpm-ostree backend talks to
/// rpm-ostree's daemon over D-Bus, and `detect` has no bus ([`OsBackend::detect_on_bus`] has).
pub const RPM_OSTREE_REASON: &str = "rpm-ostree manages this host (/usr/bin/rpm-ostree is \
     present): hearth drives it only through rpm-ostree's D-Bus service, and no bus was given \
     (OsBackend::detect_on_bus); hearth does not write deployments behind rpm-ostree's back";

/// Why an extension change is refused on backends without package layering.
pub(crate) fn extensions_refused(from: &[String], to: &[String]) -> OsError {
    OsError::InvalidChange(format!(
        "extensions cannot be changed on this host ({from:?} -> {to:?}): extensions are \
         rpm-ostree package layers"
    ))
}

/// The marker file that says the host booted an ostree deployment (created by
/// ostree-prepare-root in the initramfs).
pub const OSTREE_BOOTED: &str = "run/ostree-booted";

/// What went wrong in the OS layer; every message names the deployment, ref, kernel argument or
/// path concerned, and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum OsError {
    /// This host has no OS backend.
    #[error("OS changes are not possible on this host: {reason}")]
    Unsupported {
        /// Why.
        reason: String,
    },
    /// The OS configuration (`/etc/hearth/os.json` or the one passed in) is invalid.
    #[error("OS configuration {source_name}: {message}")]
    Config {
        /// Where it came from (a path, or "passed in").
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// The change cannot be expressed on this backend.
    #[error("{0}")]
    InvalidChange(String),
    /// No deployment of the sysroot is the booted one.
    #[error("no booted deployment in the sysroot at {sysroot}: {reason}")]
    NotBooted {
        /// The sysroot.
        sysroot: String,
        /// Details.
        reason: String,
    },
    /// A libostree call failed.
    #[error("{op}: {cause}")]
    Ostree {
        /// What hearth was doing, naming the deployment or ref.
        op: String,
        /// libostree's message.
        cause: String,
    },
    /// Pulling from the remote failed.
    #[error("pulling {reference} from remote {remote} ({url}): {cause}")]
    Pull {
        /// The remote name.
        remote: String,
        /// Its URL.
        url: String,
        /// The ref or commit.
        reference: String,
        /// libostree's message.
        cause: String,
    },
    /// A ref or commit is neither in the sysroot's repository nor available from a remote.
    #[error("{reference} is not in the sysroot's repository ({repo}) and {why}")]
    NotFound {
        /// The ref or commit.
        reference: String,
        /// The repository.
        repo: String,
        /// Why it could not be fetched.
        why: String,
    },
    /// Not enough free space to stage.
    #[error(
        "not enough free space on {what} ({path}) to stage {target}: need {}, {} available ({detail})",
        human_bytes(*needed), human_bytes(*available)
    )]
    InsufficientSpace {
        /// `/boot` or `/sysroot`.
        what: String,
        /// The path checked on this machine.
        path: String,
        /// What was being staged.
        target: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        available: u64,
        /// How `needed` is made up.
        detail: String,
    },
    /// Not enough free inodes to stage.
    #[error(
        "not enough free inodes on {what} ({path}) to stage {target}: the new deployment's \
         directories and /etc files need {needed}, {available} are free"
    )]
    InsufficientInodes {
        /// `/sysroot`.
        what: String,
        /// The path checked on this machine.
        path: String,
        /// What was being staged.
        target: String,
        /// Inodes needed.
        needed: u64,
        /// Inodes free.
        available: u64,
    },
    /// There is no deployment to roll back to.
    #[error("cannot roll back: {0}")]
    NoRollback(String),
    /// The kernel argument ledger could not be read or written.
    #[error("kernel argument ledger {path}: {cause}")]
    Ledger {
        /// Its path inside the root.
        path: String,
        /// The cause.
        cause: String,
    },
    /// A file or system call outside libostree failed.
    #[error("{path}: {cause}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        cause: String,
    },
    /// The thread that ran libostree died.
    #[error("the libostree worker thread failed: {0}")]
    Worker(String),
    /// An rpm-ostree D-Bus call or transaction failed (rpm-ostree backend).
    #[error(
        "rpm-ostree {method}{}: {message}",
        transaction.as_ref().map(|t| format!(" (transaction {t})")).unwrap_or_default()
    )]
    RpmOstree {
        /// The D-Bus method (`UpdateDeployment`, `KernelArgs`, ...) or what hearth was doing.
        method: String,
        /// The transaction's peer-to-peer address, when the method started one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transaction: Option<String>,
        /// The daemon's (or the bus's) message.
        message: String,
    },
}

impl OsError {
    pub(crate) fn ostree(op: impl Into<String>, e: impl fmt::Display) -> OsError {
        OsError::Ostree {
            op: op.into(),
            cause: e.to_string(),
        }
    }

    pub(crate) fn io(path: impl AsRef<Path>, e: impl fmt::Display) -> OsError {
        OsError::Io {
            path: path.as_ref().display().to_string(),
            cause: e.to_string(),
        }
    }
}

/// `1536` → `1.5 KiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration.
// ---------------------------------------------------------------------------------------------

/// The OS configuration of a host (`/etc/hearth/os.json`; all fields optional):
///
/// ```json
/// {
///   "remote": {"name": "hearth", "url": "https://hearth.example/ostree/repo", "gpgVerify": false},
///   "kernelTypes": {"realtime": "{ref}-rt", "64k-pages": "{ref}-64k"},
///   "minFreeBytes": {"boot": 1048576, "sysroot": 0}
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

// ---------------------------------------------------------------------------------------------
// OS images.
// ---------------------------------------------------------------------------------------------

/// An OS image on the libostree backend: an ostree ref or a commit checksum.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImageRef {
    /// A ref (`hearth/debian/v2`), pulled from the configured remote.
    Ref(String),
    /// A commit checksum (64 hex digits).
    Commit(String),
}

impl ImageRef {
    /// Parses an `osImageURL` for the libostree backend.
    pub fn parse(image: &str) -> Result<ImageRef, OsError> {
        let image = image.trim();
        if image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(ImageRef::Commit(image.to_ascii_lowercase()));
        }
        if is_valid_ref(image) {
            return Ok(ImageRef::Ref(image.to_string()));
        }
        let looks_like_container = image.contains('@')
            || image.contains("://")
            || image
                .split_once(':')
                .is_some_and(|(host, _)| host.contains('/') || host.contains('.'));
        let why = if looks_like_container {
            "it looks like a container image reference; those need the rpm-ostree backend"
        } else if image.contains(':') {
            "name the remote in /etc/hearth/os.json (\"remote\"), not in the image"
        } else {
            "expected an ostree ref (like hearth/debian/v2) or a 64-digit commit checksum"
        };
        Err(OsError::InvalidChange(format!(
            "OS image {image:?} cannot be deployed on an ostree host: {why}"
        )))
    }

    /// The ref or checksum.
    pub fn as_str(&self) -> &str {
        match self {
            ImageRef::Ref(r) | ImageRef::Commit(r) => r,
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRef::Ref(r) => write!(f, "ref {r}"),
            ImageRef::Commit(c) => write!(f, "commit {c}"),
        }
    }
}

/// Whether `r` is a valid ostree ref: `[\w][-._\w]*(/[\w][-._\w]*)*`.
pub fn is_valid_ref(r: &str) -> bool {
    !r.is_empty()
        && r.split('/').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
}

// ---------------------------------------------------------------------------------------------
// Changes, status, expectations.
// ---------------------------------------------------------------------------------------------

/// The OS part of a plan: everything one new deployment must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsChange {
    /// Kernel arguments to delete (one entry per occurrence), applied first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kargs_delete: Vec<String>,
    /// Kernel arguments to append, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kargs_append: Vec<String>,
    /// Kernel type change (from, to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_type: Option<(KernelType, KernelType)>,
    /// The new OS image (an ostree ref or commit checksum on the libostree backend; also a
    /// container image reference on the rpm-ostree backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image: Option<String>,
    /// Extensions change (from, to): rpm-ostree package layering, only on the rpm-ostree backend
    /// ([`OsBackend::change_from_actions`]); absent in journals written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<(Vec<String>, Vec<String>)>,
}

impl OsChange {
    /// Collects the OS actions of a plan (`OsImage`, `KernelArguments`, `KernelType`) into one
    /// change. `Extensions` is refused: extensions are rpm-ostree package layering, which the
    /// libostree backend cannot do.
    pub fn from_actions(actions: &[Action]) -> Result<OsChange, OsError> {
        Self::collect(actions, false)
    }

    /// Like [`OsChange::from_actions`], with `Extensions` accepted into
    /// [`OsChange::extensions`] when `extensions_supported` (the rpm-ostree backend; see
    /// [`OsBackend::change_from_actions`]).
    pub fn from_actions_for(
        actions: &[Action],
        extensions_supported: bool,
    ) -> Result<OsChange, OsError> {
        Self::collect(actions, extensions_supported)
    }

    fn collect(actions: &[Action], extensions_supported: bool) -> Result<OsChange, OsError> {
        let mut change = OsChange::default();
        for action in actions {
            match action {
                Action::OsImage { to, .. } => change.os_image = Some(to.clone()),
                Action::KernelArguments { delete, append } => {
                    change.kargs_delete.extend(delete.iter().cloned());
                    change.kargs_append.extend(append.iter().cloned());
                }
                Action::KernelType { from, to } => change.kernel_type = Some((*from, *to)),
                Action::Extensions { from, to } if extensions_supported => {
                    change.extensions = Some((from.clone(), to.clone()));
                }
                Action::Extensions { from, to } => return Err(extensions_refused(from, to)),
                _ => {}
            }
        }
        Ok(change)
    }

    /// Whether the change has nothing in it.
    pub fn is_empty(&self) -> bool {
        self.kargs_delete.is_empty()
            && self.kargs_append.is_empty()
            && self.kernel_type.is_none()
            && self.os_image.is_none()
            && self.extensions.is_none()
    }
}

impl fmt::Display for OsChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(image) = &self.os_image {
            parts.push(format!("OS image {image}"));
        }
        if !self.kargs_delete.is_empty() || !self.kargs_append.is_empty() {
            let mut k: Vec<String> = self.kargs_delete.iter().map(|a| format!("-{a}")).collect();
            k.extend(self.kargs_append.iter().map(|a| format!("+{a}")));
            parts.push(format!("kernel arguments {}", k.join(" ")));
        }
        if let Some((from, to)) = &self.kernel_type {
            parts.push(format!("kernel type {from} -> {to}"));
        }
        if let Some((from, to)) = &self.extensions {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(" ")
                }
            };
            parts.push(format!("extensions {} -> {}", list(from), list(to)));
        }
        if parts.is_empty() {
            write!(f, "no OS change")
        } else {
            write!(f, "{}", parts.join(", "))
        }
    }
}

/// Which deployment: stateroot, commit and serial (`debian/3f2a….0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentId {
    /// The stateroot (`osname`).
    pub osname: String,
    /// The commit checksum.
    pub checksum: String,
    /// The deployment serial (deployments of the same commit count up from 0).
    pub serial: i32,
}

impl fmt::Display for DeploymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}.{}", self.osname, self.checksum, self.serial)
    }
}

/// One deployment, as [`OsBackend::status`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentInfo {
    /// Stateroot, commit, serial.
    pub id: DeploymentId,
    /// Position in the boot order (0 is the default at the next boot).
    pub index: i32,
    /// The checksum of its kernel and initramfs (`/boot/ostree/<osname>-<bootcsum>`).
    pub boot_checksum: String,
    /// The origin's refspec (`hearth:hearth/debian/v2`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refspec: Option<String>,
    /// The commit's `version` metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The OS image (ref without the kernel-type variant, or the commit checksum).
    pub image: String,
    /// The kernel type.
    pub kernel_type: KernelType,
    /// Kernel arguments from its boot configuration (`options`), without libostree's own
    /// `ostree=` argument.
    pub kernel_args: Vec<String>,
    /// The booted deployment.
    pub booted: bool,
    /// Staged: finalized at shutdown (ostree-finalize-staged.service).
    pub staged: bool,
    /// Pinned (never garbage-collected).
    pub pinned: bool,
}

impl DeploymentInfo {
    /// `debian/<checksum>.<serial> (ref hearth:hearth/debian/v1, version v1)`.
    pub fn describe(&self) -> String {
        let mut extra = Vec::new();
        if let Some(r) = &self.refspec {
            extra.push(format!("ref {r}"));
        }
        if let Some(v) = &self.version {
            extra.push(format!("version {v}"));
        }
        if extra.is_empty() {
            self.id.to_string()
        } else {
            format!("{} ({})", self.id, extra.join(", "))
        }
    }
}

/// What [`OsBackend::status`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsStatus {
    /// `ostree`.
    pub backend: String,
    /// The sysroot (the root on this machine).
    pub sysroot: String,
    /// Whether hearth runs on the booted system itself (libostree sees it booted; staging is
    /// available) or drives a root from outside (new deployments are written directly).
    pub native: bool,
    /// The booted deployment.
    pub booted: DeploymentInfo,
    /// The deployment the next boot will start when it is not the booted one: staged
    /// (finalized at shutdown) or already written as the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<DeploymentInfo>,
    /// The deployment [`OsBackend::rollback`] would make the default: the one after the booted
    /// one in the boot order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<DeploymentInfo>,
    /// All deployments, in boot order (a staged deployment first).
    pub deployments: Vec<DeploymentInfo>,
}

/// How a staged deployment becomes the booted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Finalization {
    /// Staged (libostree `stage_tree`): ostree-finalize-staged.service writes the bootloader
    /// entries at shutdown, merging `/etc` as it is then. Used when hearth runs on the booted
    /// host.
    AtShutdown,
    /// Written as the new default deployment right away (libostree `deploy_tree` +
    /// `write_deployments`): used when hearth drives a root from outside, where libostree cannot
    /// stage (it stages only for the system it runs on).
    Written,
}

/// A kernel argument deletion that was not done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedKarg {
    /// The argument.
    pub argument: String,
    /// Why.
    pub reason: String,
}

/// Free space needed and available on one filesystem, as checked before staging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpaceCheck {
    /// `/boot` or `/sysroot`.
    pub what: String,
    /// The path that was checked.
    pub path: String,
    /// Bytes needed (including the reserve).
    pub needed: u64,
    /// Bytes available.
    pub available: u64,
    /// How `needed` is made up.
    pub detail: String,
}

/// What [`OsBackend::stage`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StagedDeployment {
    /// The new deployment.
    pub deployment: DeploymentInfo,
    /// The deployment it was made from (the booted one).
    pub from: DeploymentId,
    /// How it becomes the booted one.
    pub finalization: Finalization,
    /// Deletions that were not done, with the reason (hearth did not add the argument).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_deletes: Vec<SkippedKarg>,
    /// The refspec pulled from the remote, if a pull was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulled: Option<String>,
    /// The space checks that passed.
    pub space: Vec<SpaceCheck>,
}

impl StagedDeployment {
    /// What the host must show after the reboot: the agent journals this before rebooting and
    /// passes it to [`OsBackend::verify_booted`] after the boot.
    pub fn expectation(&self) -> OsExpectation {
        OsExpectation {
            deployment: Some(self.deployment.id.clone()),
            kernel_args: Some(self.deployment.kernel_args.clone()),
        }
    }
}

/// What the booted deployment must be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsExpectation {
    /// This deployment must be the booted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentId>,
    /// The booted deployment's kernel arguments (without `ostree=`) must be exactly these, in
    /// this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_args: Option<Vec<String>>,
}

/// What [`OsBackend::rollback`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum RollbackOutcome {
    /// A staged or pending deployment was dropped: the booted one stays the default.
    CancelledPending {
        /// The dropped deployment.
        dropped: DeploymentId,
    },
    /// The previous deployment is the default at the next boot.
    RolledBack {
        /// The booted deployment (now second).
        from: DeploymentId,
        /// The new default.
        to: DeploymentId,
    },
}

/// Compares a booted deployment with an expectation: one sentence per difference.
pub fn compare_booted(booted: &DeploymentInfo, expected: &OsExpectation) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(want) = &expected.deployment {
        if *want != booted.id {
            let what = if want.checksum == booted.id.checksum {
                "a deployment of the same commit with other boot settings"
            } else {
                "another commit"
            };
            out.push(format!(
                "the booted deployment is {}, not the staged deployment {want} ({what})",
                booted.describe()
            ));
        }
    }
    if let Some(want) = &expected.kernel_args {
        out.extend(compare_kernel_args(
            want,
            &booted.kernel_args,
            "the booted deployment",
        ));
    }
    out
}

/// The expected kernel arguments missing from `<root>/proc/cmdline`, one sentence each. Only on a
/// real boot (the command line carries `ostree=`); under systemd-nspawn it is the machine's own,
/// and only the boot entry counts. The boot loader may add arguments of its own
/// (`BOOT_IMAGE=...`): only missing ones count.
pub(crate) fn cmdline_differences(root: &Path, expected: &OsExpectation) -> Vec<String> {
    let (Some(want), Ok(cmdline)) = (
        &expected.kernel_args,
        std::fs::read_to_string(inside(root, "/proc/cmdline")),
    ) else {
        return Vec::new();
    };
    let args = hearth_config::plan::split_kernel_arguments(&[cmdline]);
    if !args.iter().any(|a| a.starts_with("ostree=")) {
        return Vec::new();
    }
    compare_kernel_args(want, &args, "/proc/cmdline")
        .into_iter()
        .filter(|d| d.contains(" is missing "))
        .collect()
}

/// Differences between an expected and an actual kernel argument list (multisets first, then
/// the order).
///
/// Linear in the lists' lengths (counts in a hash map, not a search per argument), and bounded
/// in what it says: at most [`MAX_KARG_DIFFERENCES`] sentences, each quoting the expected list
/// cut to [`MAX_KARG_LIST_SHOWN`] bytes, so a config with 100,000 arguments gives a short reason,
/// not one sentence per argument with the whole list in each.
pub fn compare_kernel_args(expected: &[String], actual: &[String], whose: &str) -> Vec<String> {
    use std::collections::HashMap;
    let mut available: HashMap<&str, usize> = HashMap::with_capacity(actual.len());
    for a in actual {
        *available.entry(a.as_str()).or_default() += 1;
    }
    // Each expected argument takes one occurrence from the actual list; what is left over in
    // the actual list was not expected (of identical arguments, the last ones are left over).
    let mut matched: HashMap<&str, usize> = HashMap::new();
    let mut missing = Vec::new();
    for arg in expected {
        match available.get_mut(arg.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                *matched.entry(arg.as_str()).or_default() += 1;
            }
            _ => missing.push(arg.as_str()),
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut remaining = Vec::new();
    for a in actual {
        let n = seen.entry(a.as_str()).or_default();
        *n += 1;
        if *n > matched.get(a.as_str()).copied().unwrap_or(0) {
            remaining.push(a.as_str());
        }
    }
    let expected_shown = shown_list(expected);
    let mut out = Vec::new();
    for arg in &missing {
        out.push(format!(
            "kernel argument {arg} is missing from {whose} (expected: {expected_shown})"
        ));
    }
    for arg in &remaining {
        out.push(format!(
            "kernel argument {arg} is present in {whose} but was not expected (expected: \
             {expected_shown})"
        ));
    }
    if missing.is_empty() && remaining.is_empty() && expected != actual {
        out.push(format!(
            "the kernel arguments of {whose} are in another order: expected `{expected_shown}`, \
             found `{}`",
            shown_list(actual)
        ));
    }
    if out.len() > MAX_KARG_DIFFERENCES {
        let more = out.len() - MAX_KARG_DIFFERENCES;
        out.truncate(MAX_KARG_DIFFERENCES);
        out.push(format!(
            "and {more} more kernel argument differences in {whose}"
        ));
    }
    out
}

/// At most this many kernel-argument differences are listed (then a count of the rest).
pub const MAX_KARG_DIFFERENCES: usize = 20;
/// A kernel argument list quoted in a difference is cut to this many bytes.
pub const MAX_KARG_LIST_SHOWN: usize = 1024;

/// `list` joined with spaces, cut (at a character boundary) to [`MAX_KARG_LIST_SHOWN`] bytes.
fn shown_list(list: &[String]) -> String {
    let mut out = String::new();
    for (i, a) in list.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(a);
        if out.len() > MAX_KARG_LIST_SHOWN {
            let mut cut = MAX_KARG_LIST_SHOWN;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str(&format!(" … ({} arguments in all)", list.len()));
            break;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The backend enum.
// ---------------------------------------------------------------------------------------------

/// The host's OS backend.
#[derive(Debug, Clone)]
pub enum OsBackend {
    /// libostree directly.
    Ostree(OstreeBackend),
    /// rpm-ostree's daemon over D-Bus.
    RpmOstree(RpmOstreeBackend),
    /// No OS backend: every operation fails with the reason.
    None(NoneBackend),
}

impl OsBackend {
    /// Picks the backend for the host whose root is `root` (`/` in production; in tests the live
    /// root of a container, `/proc/<pid>/root`: the marker lives in its `/run`), with the
    /// configuration in `<root>/etc/hearth/os.json` (defaults when absent).
    ///
    /// - `<root>/run/ostree-booted` absent: [`OsBackend::None`] with [`NOT_OSTREE_REASON`];
    /// - rpm-ostree present: [`OsBackend::None`] with [`RPM_OSTREE_REASON`] (the rpm-ostree
    ///   backend needs a bus: [`OsBackend::detect_on_bus`]);
    /// - else [`OsBackend::Ostree`] on the sysroot at `root`.
    ///
    /// Fails only when the configuration file is unreadable or invalid.
    pub fn detect(root: &Path) -> Result<OsBackend, OsError> {
        if !root.join(OSTREE_BOOTED).exists() {
            return Ok(OsBackend::None(NoneBackend::new(NOT_OSTREE_REASON)));
        }
        let config = OsConfig::load(root)?;
        Ok(Self::detect_with_config(root, config))
    }

    /// Like [`OsBackend::detect`] with a configuration passed in (not read from the root).
    pub fn detect_with_config(root: &Path, config: OsConfig) -> OsBackend {
        if !root.join(OSTREE_BOOTED).exists() {
            return OsBackend::None(NoneBackend::new(NOT_OSTREE_REASON));
        }
        if root.join("usr/bin/rpm-ostree").exists() {
            return OsBackend::None(NoneBackend::new(RPM_OSTREE_REASON));
        }
        OsBackend::Ostree(OstreeBackend::new(root, config))
    }

    /// Like [`OsBackend::detect`], and on an rpm-ostree host (`/usr/bin/rpm-ostree` under the
    /// root) the rpm-ostree backend talking to the daemon on the bus at `bus_address` (the
    /// system bus, [`crate::systemd::SYSTEM_BUS_ADDRESS`], in production): it connects, and
    /// reads the Sysroot's `Booted` property (which starts the D-Bus-activated daemon). When
    /// that fails the host gets [`OsBackend::None`] with a reason that says the rpm-ostree
    /// service could not be reached, on which bus, and why.
    ///
    /// Fails only when the configuration file of a libostree host is unreadable or invalid.
    pub async fn detect_on_bus(root: &Path, bus_address: &str) -> Result<OsBackend, OsError> {
        if !root.join(OSTREE_BOOTED).exists() || !root.join("usr/bin/rpm-ostree").exists() {
            return Self::detect(root);
        }
        let backend = RpmOstreeBackend::new(root, bus_address);
        match backend.probe().await {
            Ok(()) => Ok(OsBackend::RpmOstree(backend)),
            Err(e) => Ok(OsBackend::None(NoneBackend::new(format!(
                "rpm-ostree manages this host (/usr/bin/rpm-ostree is present) but its D-Bus \
                 service {} cannot be reached on the bus {bus_address}: {e}; hearth does not \
                 write deployments behind rpm-ostree's back",
                rpmostree::BUS_NAME
            )))),
        }
    }

    /// `ostree`, `rpm-ostree` or `none`.
    pub fn kind(&self) -> &'static str {
        match self {
            OsBackend::Ostree(_) => "ostree",
            OsBackend::RpmOstree(_) => "rpm-ostree",
            OsBackend::None(_) => "none",
        }
    }

    /// Why OS changes are impossible here, for [`OsBackend::None`].
    pub fn unsupported_reason(&self) -> Option<&str> {
        match self {
            OsBackend::Ostree(_) | OsBackend::RpmOstree(_) => None,
            OsBackend::None(n) => Some(n.reason()),
        }
    }

    /// The root this backend works on.
    pub fn root(&self) -> Option<&Path> {
        match self {
            OsBackend::Ostree(o) => Some(o.root()),
            OsBackend::RpmOstree(r) => Some(r.root()),
            OsBackend::None(_) => None,
        }
    }

    /// Collects the OS actions of a plan into one change for this backend: like
    /// [`OsChange::from_actions`], and `Extensions` is accepted on the rpm-ostree backend (package
    /// layering) and refused on the others.
    pub fn change_from_actions(&self, actions: &[Action]) -> Result<OsChange, OsError> {
        OsChange::from_actions_for(actions, matches!(self, OsBackend::RpmOstree(_)))
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        match self {
            OsBackend::Ostree(o) => o.status().await,
            OsBackend::RpmOstree(r) => r.status().await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// Stages one new deployment carrying the whole change (see the module documentation).
    /// Staging again before the reboot replaces the pending deployment: the change is always
    /// computed from the booted deployment.
    pub async fn stage(&self, change: &OsChange) -> Result<StagedDeployment, OsError> {
        match self {
            OsBackend::Ostree(o) => match &change.extensions {
                Some((from, to)) => Err(extensions_refused(from, to)),
                None => o.stage(change).await,
            },
            OsBackend::RpmOstree(r) => r.stage(change).await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// The differences between the booted deployment and `expected`, one sentence each; empty
    /// when the host booted what was staged.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        match self {
            OsBackend::Ostree(o) => o.verify_booted(expected).await,
            OsBackend::RpmOstree(r) => r.verify_booted(expected).await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// Makes the previous deployment the default at the next boot (or drops a pending one).
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        match self {
            OsBackend::Ostree(o) => o.rollback().await,
            OsBackend::RpmOstree(r) => r.rollback().await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// Records `kargs` (those present in the booted deployment) as added by hearth, so that
    /// later configs may remove them: for a host that hearth takes over from the MCO, whose
    /// current config already has kernel arguments. Returns hearth's arguments after.
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        match self {
            OsBackend::Ostree(o) => o.adopt_kernel_arguments(kargs).await,
            OsBackend::RpmOstree(r) => r.adopt_kernel_arguments(kargs).await,
            OsBackend::None(n) => Err(n.error()),
        }
    }
}

/// The root as a display string.
pub(crate) fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `root` joined with an absolute path inside it.
pub(crate) fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn config() -> OsConfig {
        serde_json::from_str(
            r#"{"kernelTypes": {"realtime": "{ref}-rt", "64k-pages": "{ref}-64k"},
                "remote": {"name": "hearth", "url": "file:///srv/repo"}}"#,
        )
        .unwrap()
    }

    #[test]
    fn images_parse() {
        assert_eq!(
            ImageRef::parse("hearth/debian/v2").unwrap(),
            ImageRef::Ref("hearth/debian/v2".into())
        );
        let csum = "a".repeat(64);
        assert_eq!(ImageRef::parse(&csum).unwrap(), ImageRef::Commit(csum));
        let e = ImageRef::parse("quay.io/openshift/rhcos@sha256:0123").unwrap_err();
        assert!(e.to_string().contains("rpm-ostree"), "{e}");
        let e = ImageRef::parse("hearth:hearth/debian/v2").unwrap_err();
        assert!(e.to_string().contains("remote"), "{e}");
        assert!(ImageRef::parse("").is_err());
        assert!(ImageRef::parse("a//b").is_err());
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
        ] {
            let c: OsConfig = serde_json::from_str(json).unwrap();
            let e = c.validate("x").unwrap_err().to_string();
            assert!(e.contains(needle), "{json}: {e}");
        }
        assert!(serde_json::from_str::<OsConfig>(r#"{"kernelType": {}}"#).is_err());
        assert!(serde_json::from_str::<OsConfig>(r#"{"kernelTypes": {"rt": "{ref}"}}"#).is_err());
    }

    #[test]
    fn changes_come_from_plan_actions() {
        let actions = vec![
            Action::OsImage {
                from: String::new(),
                to: "hearth/debian/v2".into(),
            },
            Action::KernelArguments {
                delete: s(&["nosmt"]),
                append: s(&["hugepages=32"]),
            },
            Action::KernelType {
                from: KernelType::Default,
                to: KernelType::Realtime,
            },
            Action::DaemonReload,
        ];
        let c = OsChange::from_actions(&actions).unwrap();
        assert_eq!(c.os_image.as_deref(), Some("hearth/debian/v2"));
        assert_eq!(c.kargs_delete, s(&["nosmt"]));
        assert_eq!(c.kargs_append, s(&["hugepages=32"]));
        assert_eq!(
            c.kernel_type,
            Some((KernelType::Default, KernelType::Realtime))
        );
        assert_eq!(
            c.to_string(),
            "OS image hearth/debian/v2, kernel arguments -nosmt +hugepages=32, kernel type default -> realtime"
        );
        let e = OsChange::from_actions(&[Action::Extensions {
            from: vec![],
            to: s(&["usbguard"]),
        }])
        .unwrap_err();
        assert!(e.to_string().contains("rpm-ostree"), "{e}");
        assert!(OsChange::from_actions(&[]).unwrap().is_empty());

        // Extensions: only where package layering exists.
        let ext = [Action::Extensions {
            from: vec![],
            to: s(&["usbguard"]),
        }];
        let c = OsChange::from_actions_for(&ext, true).unwrap();
        assert_eq!(c.extensions, Some((vec![], s(&["usbguard"]))));
        assert!(!c.is_empty());
        assert_eq!(c.to_string(), "extensions none -> usbguard");
        assert!(OsChange::from_actions_for(&ext, false).is_err());
        // A change journaled before `extensions` existed still reads.
        let old: OsChange =
            serde_json::from_str(r#"{"kargsAppend": ["nosmt"], "osImage": "hearth/debian/v2"}"#)
                .unwrap();
        assert_eq!(old.extensions, None);
        assert_eq!(old.kargs_append, s(&["nosmt"]));
    }

    #[test]
    fn kernel_arg_differences_are_sentences() {
        let want = s(&["rw", "hugepages=32", "selinux=0"]);
        assert!(compare_kernel_args(&want, &want, "x").is_empty());
        let d = compare_kernel_args(
            &want,
            &s(&["rw", "selinux=0", "quiet"]),
            "the booted deployment",
        );
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].starts_with("kernel argument hugepages=32 is missing from the booted deployment")
        );
        assert!(d[1].starts_with(
            "kernel argument quiet is present in the booted deployment but was not expected"
        ));
        let d = compare_kernel_args(&want, &s(&["rw", "selinux=0", "hugepages=32"]), "x");
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("another order"), "{d:?}");
        // Duplicates count.
        let d = compare_kernel_args(&s(&["a", "a"]), &s(&["a"]), "x");
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("a is missing"));
        // Of identical arguments the last ones are the extra ones; the order is still compared.
        let d = compare_kernel_args(&s(&["a", "b"]), &s(&["a", "b", "a"]), "x");
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("kernel argument a is present in x"),
            "{d:?}"
        );
    }

    #[test]
    fn kernel_arg_differences_are_bounded_and_linear() {
        // 100,000 arguments, none booted: a bounded reason, not 100,000 sentences quoting the
        // whole list (which was 100,000 × 1.1 MB), and no quadratic search.
        let want: Vec<String> = (0..100_000).map(|i| format!("arg{i}=value")).collect();
        let d = compare_kernel_args(&want, &s(&["rw"]), "the booted deployment");
        assert_eq!(d.len(), MAX_KARG_DIFFERENCES + 1);
        assert!(
            d.last().unwrap().starts_with("and 99981 more"),
            "{:?}",
            d.last()
        );
        assert!(
            d.iter().all(|x| x.len() < MAX_KARG_LIST_SHOWN + 200),
            "{}",
            d[0].len()
        );
        assert!(d[0].contains("(100000 arguments in all)"), "{}", d[0]);
        // Reversed: every argument present, another order; one sentence.
        let mut rev = want.clone();
        rev.reverse();
        let d = compare_kernel_args(&want, &rev, "x");
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("another order"));
    }

    #[test]
    fn the_backend_and_its_futures_are_send() {
        fn send<T: Send + Sync>(_: &T) {}
        fn send_future<T: Send>(_: &T) {}
        let backends = [
            OsBackend::None(NoneBackend::new("x")),
            OsBackend::Ostree(OstreeBackend::new(Path::new("/"), OsConfig::default())),
            OsBackend::RpmOstree(RpmOstreeBackend::new(
                Path::new("/"),
                "unix:path=/nonexistent",
            )),
        ];
        let change = OsChange::default();
        let expected = OsExpectation::default();
        for b in &backends {
            send(b);
            send_future(&b.status());
            send_future(&b.stage(&change));
            send_future(&b.verify_booted(&expected));
            send_future(&b.rollback());
            send_future(&b.adopt_kernel_arguments(&[]));
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(4 << 20), "4.0 MiB");
    }
}
