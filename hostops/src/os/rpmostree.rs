//! The rpm-ostree backend: rpm-ostree's daemon (`rpm-ostreed`) over D-Bus, on RHCOS and Fedora
//! CoreOS, where hearth must not write deployments behind rpm-ostree's back.
//!
//! ## The D-Bus API used
//!
//! Bus name [`BUS_NAME`] on the system bus (D-Bus-activated on real hosts):
//!
//! - the Sysroot object [`SYSROOT_PATH`] (`org.projectatomic.rpmostree1.Sysroot`):
//!   `RegisterClient`/`UnregisterClient` around every operation (the daemon exits when idle
//!   without clients), `Reload` after each transaction (to sync the properties), the properties
//!   `Booted` (the booted OS object), `Path` and `Deployments` (`aa{sv}`, boot order);
//! - the booted OS object (`org.projectatomic.rpmostree1.OS`): `GetDeploymentBootConfig` (the
//!   kernel arguments: the `Deployments` dicts do not carry them on any version),
//!   `UpdateDeployment`, `KernelArgs`, `Cleanup`, `Rollback`;
//! - transactions: each mutating method returns a peer-to-peer D-Bus address
//!   (`unix:path=/run/rpm-ostree/transaction.sock` on real hosts). hearth connects to it
//!   directly (no bus), subscribes to everything on that connection, calls
//!   `org.projectatomic.rpmostree1.Transaction.Start` on `/`, logs `Message`, `TaskBegin`,
//!   `TaskEnd` and `PercentProgress`, and waits for `Finished(success, error_message)`.
//!
//! ## One change, up to three transactions
//!
//! [`RpmOstreeBackend::stage`] computes everything from the **booted** deployment, as the
//! libostree backend does:
//!
//! 1. `Cleanup(["pending-deploy"])` when a deployment is pending (rpm-ostree builds new
//!    deployments on the pending one; dropping it first makes the result independent of it).
//! 2. `UpdateDeployment(modifiers, options)` for the OS image (`set-refspec`, or
//!    `set-revision` for a commit checksum), the kernel type (the MCO's override swap:
//!    `override-remove-packages` / `override-reset-packages` of the default kernel packages,
//!    `install-packages` / `uninstall-packages` of the realtime or 64k ones) and extensions
//!    (`install-packages` / `uninstall-packages`), all in **one** transaction.
//! 3. `KernelArgs` with the option `final-kernel-args`: the whole list that the ledger diff
//!    computed ([`super::ledger::plan_kernel_args`], the same code as the libostree backend),
//!    so order and duplicates follow hearth's rules, not rpm-ostree's key-grouped patching.
//!    rpm-ostree has no way to carry kernel arguments in `UpdateDeployment`; its `KernelArgs`
//!    transaction deploys from the pending deployment (no pull, package cache only), so the
//!    result is one staged deployment carrying image, kernel, packages and arguments.
//!
//! `UpdateDeployment` goes first because it is the step that can fail for reasons outside the
//! host (pulls, package resolution); `KernelArgs` is local. If `KernelArgs` fails after
//! `UpdateDeployment` staged a deployment, that deployment lacks the kernel arguments: hearth
//! removes it (`Cleanup(["pending-deploy"])`) and returns the `KernelArgs` error, saying whether
//! the removal worked (if it did not, the error says not to reboot).
//!
//! The new deployment is *staged* (finalized at shutdown by `ostree-finalize-staged.service`):
//! [`Finalization::AtShutdown`]. hearth does not use `lock-finalization`/`FinalizeDeployment`.
//!
//! ## Errors
//!
//! Every failure of the daemon is [`OsError::RpmOstree`] with the method, the transaction's
//! address when there is one, and the daemon's message (`Finished`'s `error_message`, or the
//! D-Bus error as `detail (name)`). A method refused with "Transaction in progress" (another
//! client's transaction) is retried for up to [`BUSY_WAIT`]
//! ([`RpmOstreeBackend::with_busy_wait`]). A transaction connection that closes before
//! `Finished` is an error too.
//!
//! Tested against a stand-in D-Bus service only (rpm-ostree does not run on Debian): see
//! `hostops/tests/os_rpmostree_standin.rs` and docs/os-layer.md for what that does and does not
//! prove.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_core::Stream;
use hearth_config::model::KernelType;
use tracing::{debug, info, warn};
use zbus::{Connection, DBusError as _, MessageStream};
use zbus::{OwnedObjectPath, OwnedVariant as OwnedValue, Variant as Value};

use super::ledger::{plan_kernel_args, KargLedger, LEDGER_PATH};
use super::{
    compare_booted, compare_kernel_args, DeploymentId, DeploymentInfo, Finalization, OsChange,
    OsError, OsExpectation, OsStatus, RollbackOutcome, StagedDeployment,
};

/// rpm-ostree's well-known bus name.
pub const BUS_NAME: &str = "org.projectatomic.rpmostree1";
/// The Sysroot object.
pub const SYSROOT_PATH: &str = "/org/projectatomic/rpmostree1/Sysroot";
/// The Sysroot interface.
pub const SYSROOT_IFACE: &str = "org.projectatomic.rpmostree1.Sysroot";
/// The OS interface.
pub const OS_IFACE: &str = "org.projectatomic.rpmostree1.OS";
/// The Transaction interface (on `/` of the transaction's peer-to-peer connection).
pub const TRANSACTION_IFACE: &str = "org.projectatomic.rpmostree1.Transaction";
/// The client id hearth registers with.
pub const CLIENT_ID: &str = "hearth";
/// The transport prefix hearth gives a container image reference (as the MCO does).
pub const CONTAINER_TRANSPORT: &str = "ostree-unverified-registry:";

/// The default kernel's packages, removed (overridden) for another kernel type (MCO
/// `pkg/daemon/update.go`, `getKernelPackagesForTargetRelease`).
pub const DEFAULT_KERNEL_PACKAGES: [&str; 5] = [
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
];
/// The realtime kernel's packages (the MCO's list in `update.go`: not the `kernel-rt`
/// meta-package, and without `kernel-rt-kvm`, which only its controller's table lists).
pub const REALTIME_KERNEL_PACKAGES: [&str; 3] = [
    "kernel-rt-core",
    "kernel-rt-modules",
    "kernel-rt-modules-extra",
];
/// The 64k-pages kernel's packages (aarch64 only).
pub const KERNEL_64K_PACKAGES: [&str; 4] = [
    "kernel-64k-core",
    "kernel-64k-modules",
    "kernel-64k-modules-core",
    "kernel-64k-modules-extra",
];

/// The extensions the MCO supports on RHCOS and their packages
/// (`pkg/controller/common/helpers.go`, `SupportedExtensions`).
pub const EXTENSIONS: [(&str, &[&str]); 7] = [
    ("two-node-ha", &["pacemaker", "pcs", "fence-agents-all"]),
    (
        "ipsec",
        &[
            "NetworkManager-libreswan",
            "libreswan",
            "openvswitch3.5-ipsec",
        ],
    ),
    ("usbguard", &["usbguard"]),
    ("kerberos", &["krb5-workstation", "libkadm5"]),
    ("kernel-devel", &["kernel-devel", "kernel-headers"]),
    ("sandboxed-containers", &["kata-containers"]),
    ("sysstat", &["sysstat"]),
];

/// How long one D-Bus method call may take (transactions are awaited separately).
const METHOD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one transaction may take (pulling an OS image and layering packages).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a method waits by default while another client's transaction runs.
pub const BUSY_WAIT: Duration = Duration::from_secs(300);

/// The packages of an extension.
pub fn extension_packages(name: &str) -> Option<&'static [&'static str]> {
    EXTENSIONS.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}

/// The packages a kernel type installs on top of (or instead of) the default kernel.
pub fn kernel_type_packages(kernel_type: KernelType) -> &'static [&'static str] {
    match kernel_type {
        KernelType::Default => &[],
        KernelType::Realtime => &REALTIME_KERNEL_PACKAGES,
        KernelType::Pages64k => &KERNEL_64K_PACKAGES,
    }
}

/// An OS image as rpm-ostree takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpmOstreeImage {
    /// A container image: the refspec with its transport (`ostree-unverified-registry:...`).
    Container(String),
    /// An ostree refspec (`fedora:fedora/x86_64/coreos/stable`).
    Refspec(String),
    /// A commit checksum (`set-revision`).
    Commit(String),
}

impl RpmOstreeImage {
    /// Parses an `osImageURL`: a container image reference (`quay.io/...@sha256:...`, or one
    /// that already names its transport, `ostree-unverified-registry:...`), a 64-digit commit
    /// checksum, or an ostree refspec.
    pub fn parse(image: &str) -> Result<RpmOstreeImage, OsError> {
        let image = image.trim();
        if image.is_empty() {
            return Err(OsError::InvalidChange(
                "OS image \"\": expected a container image reference, an ostree refspec or a \
                 commit checksum"
                    .into(),
            ));
        }
        if image.starts_with("ostree-") && container_image(image).is_some() {
            return Ok(RpmOstreeImage::Container(image.to_string()));
        }
        if image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(RpmOstreeImage::Commit(image.to_ascii_lowercase()));
        }
        let (remote, reference) = match image.split_once(':') {
            Some((r, rest)) if !r.contains('/') && !r.contains('.') => (Some(r), rest),
            _ => (None, image),
        };
        if super::is_valid_ref(reference)
            && remote.is_none_or(|r| !r.is_empty() && super::is_valid_ref(r))
        {
            return Ok(RpmOstreeImage::Refspec(image.to_string()));
        }
        let first = image.split('/').next().unwrap_or_default();
        let registry = first.contains('.') || first.contains(':') || first == "localhost";
        let tagged = image
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'));
        let looks_like_container = image.contains('/')
            && (registry || tagged || image.contains("@sha256:"))
            && image
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "./:@_-".contains(c));
        if looks_like_container {
            return Ok(RpmOstreeImage::Container(format!(
                "{CONTAINER_TRANSPORT}{image}"
            )));
        }
        Err(OsError::InvalidChange(format!(
            "OS image {image:?} cannot be deployed by rpm-ostree: expected a container image \
             reference (registry/name@sha256:...), an ostree refspec (remote:ref) or a 64-digit \
             commit checksum"
        )))
    }

    /// The `osImageURL` form (without a container transport).
    pub fn image(&self) -> String {
        match self {
            RpmOstreeImage::Container(r) => container_image(r).unwrap_or(r).to_string(),
            RpmOstreeImage::Refspec(r) | RpmOstreeImage::Commit(r) => r.clone(),
        }
    }
}

/// The image reference inside a container refspec (`ostree-unverified-registry:IMG`,
/// `ostree-remote-registry:REMOTE:IMG`, `ostree-unverified-image:docker://IMG`, ...).
pub fn container_image(refspec: &str) -> Option<&str> {
    for prefix in [
        "ostree-unverified-registry:",
        "ostree-unverified-image:docker://",
        "ostree-image-signed:docker://",
    ] {
        if let Some(rest) = refspec.strip_prefix(prefix) {
            return Some(rest);
        }
    }
    for prefix in ["ostree-remote-registry:", "ostree-remote-image:"] {
        if let Some(rest) = refspec.strip_prefix(prefix) {
            let (_, img) = rest.split_once(':')?;
            return Some(img.strip_prefix("docker://").unwrap_or(img));
        }
    }
    None
}

/// The rpm-ostree backend for the host at a root, talking to the daemon on a bus.
#[derive(Debug, Clone)]
pub struct RpmOstreeBackend {
    root: PathBuf,
    bus_address: String,
    busy_wait: Duration,
}

impl RpmOstreeBackend {
    /// The backend for the host at `root` (where the ledger lives and `/proc/cmdline` is read),
    /// whose rpm-ostree daemon is on the bus at `bus_address`. Nothing is connected yet.
    pub fn new(root: &Path, bus_address: &str) -> RpmOstreeBackend {
        RpmOstreeBackend {
            root: root.to_path_buf(),
            bus_address: bus_address.to_string(),
            busy_wait: BUSY_WAIT,
        }
    }

    /// How long a method waits while the daemon answers "Transaction in progress" (another
    /// client's transaction, e.g. zincati's or an admin's); [`BUSY_WAIT`] by default.
    pub fn with_busy_wait(mut self, limit: Duration) -> RpmOstreeBackend {
        self.busy_wait = limit;
        self
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bus address.
    pub fn bus_address(&self) -> &str {
        &self.bus_address
    }

    /// Connects and reads the Sysroot's `Booted` property: whether the daemon answers.
    pub async fn probe(&self) -> Result<(), OsError> {
        let conn = connect_bus(&self.bus_address).await?;
        let booted: OwnedObjectPath =
            get_property(&conn, SYSROOT_PATH, SYSROOT_IFACE, "Booted").await?;
        if booted.as_str() == "/" {
            return Err(OsError::RpmOstree {
                method: "reading Sysroot.Booted".into(),
                transaction: None,
                message: "the daemon reports no booted OS".into(),
            });
        }
        Ok(())
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.status().await;
        s.close().await;
        r
    }

    /// Stages one new deployment carrying the whole change (see the module documentation).
    pub async fn stage(&self, change: &OsChange) -> Result<StagedDeployment, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.stage(&self.root, change).await;
        s.close().await;
        r
    }

    /// The differences between the booted deployment and `expected`.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.status().await;
        s.close().await;
        let status = r?;
        let mut out = compare_booted(&status.booted, expected);
        if let Some(want) = &expected.deployment {
            if *want != status.booted.id
                && status.deployments.iter().any(|d| d.staged && d.id == *want)
            {
                out.push(format!(
                    "the deployment {want} is still staged: the host has not rebooted since it \
                     was staged (or ostree-finalize-staged.service did not run at shutdown)"
                ));
            }
        }
        out.extend(super::cmdline_differences(&self.root, expected));
        Ok(out)
    }

    /// Drops a pending deployment (`Cleanup(["pending-deploy"])`), or makes the rollback
    /// deployment the default (`Rollback`).
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.rollback().await;
        s.close().await;
        r
    }

    /// Records kernel arguments of the booted deployment as hearth's (see
    /// [`OsBackend::adopt_kernel_arguments`](super::OsBackend::adopt_kernel_arguments)).
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        let booted = self.status().await?.booted;
        let ledger = KargLedger::new(&self.root);
        let mut file = ledger.load()?;
        let mut owned = file.hearth_added(&booted.kernel_args);
        for arg in kargs {
            let have = owned.iter().filter(|a| *a == arg).count();
            let present = booted.kernel_args.iter().filter(|a| *a == arg).count();
            if have < present {
                owned.push(arg.clone());
            }
        }
        file.record(&booted.kernel_args, &owned);
        ledger.store(&file)?;
        Ok(file.hearth_added(&booted.kernel_args))
    }
}

// ---------------------------------------------------------------------------------------------
// D-Bus plumbing.
// ---------------------------------------------------------------------------------------------

fn bus_error(method: impl Into<String>, transaction: Option<&str>, e: zbus::Error) -> OsError {
    let message = match &e {
        zbus::Error::MethodError(name, detail, _) => match detail {
            Some(d) => format!("{d} ({name})"),
            None => name.to_string(),
        },
        zbus::Error::FDO(f) => match f.description() {
            Some(d) => format!("{d} ({})", f.name()),
            None => f.name().to_string(),
        },
        other => other.to_string(),
    };
    let hint = if message.contains("ServiceUnknown") || message.contains("NameHasNoOwner") {
        format!(
            "; {BUS_NAME} is not on this bus (is rpm-ostree installed, and is this the host's \
             system bus?)"
        )
    } else {
        String::new()
    };
    OsError::RpmOstree {
        method: method.into(),
        transaction: transaction.map(str::to_string),
        message: format!("{message}{hint}"),
    }
}

async fn connect_bus(address: &str) -> Result<Connection, OsError> {
    zbus::connection::Builder::address(address)
        .method_timeout(METHOD_TIMEOUT)
        .build()
        .await
        .map_err(|e| bus_error(format!("connecting to the bus at {address}"), None, e))
}

async fn get_property<T>(
    conn: &Connection,
    path: &str,
    iface: &str,
    name: &str,
) -> Result<T, OsError>
where
    T: TryFrom<OwnedValue>,
    T::Error: Into<zbus::Error>,
{
    let op = || format!("reading {}.{name} of {path}", short(iface));
    let reply = conn
        .call_method(
            Some(BUS_NAME),
            path,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(iface, name),
        )
        .await
        .map_err(|e| bus_error(op(), None, e))?;
    let value: OwnedValue = reply
        .body()
        .deserialize()
        .map_err(|e| bus_error(op(), None, e))?;
    T::try_from(value).map_err(|e| bus_error(op(), None, e.into()))
}

/// `org.projectatomic.rpmostree1.OS` → `OS`.
fn short(iface: &str) -> &str {
    iface.rsplit('.').next().unwrap_or(iface)
}

type Dict = HashMap<String, OwnedValue>;

fn dict_str(d: &Dict, key: &str) -> Option<String> {
    match d.get(key).map(|v| &**v) {
        Some(Value::Str(s)) => Some(s.to_string()),
        Some(Value::ObjectPath(p)) => Some(p.to_string()),
        _ => None,
    }
}

fn dict_bool(d: &Dict, key: &str) -> bool {
    matches!(d.get(key).map(|v| &**v), Some(Value::Bool(true)))
}

fn dict_i32(d: &Dict, key: &str) -> Option<i32> {
    match d.get(key).map(|v| &**v) {
        Some(Value::I32(i)) => Some(*i),
        Some(Value::U32(u)) => i32::try_from(*u).ok(),
        _ => None,
    }
}

fn dict_strv(d: &Dict, key: &str) -> Vec<String> {
    match d.get(key).map(|v| &**v) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| match v {
                Value::Str(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// One connection to the daemon, registered as a client.
struct Session {
    conn: Connection,
    os_path: OwnedObjectPath,
    busy_wait: Duration,
}

impl Session {
    async fn open(bus: &str, busy_wait: Duration) -> Result<Session, OsError> {
        let conn = connect_bus(bus).await?;
        let mut options: HashMap<&str, Value<'_>> = HashMap::new();
        options.insert("id", Value::from(CLIENT_ID));
        conn.call_method(
            Some(BUS_NAME),
            SYSROOT_PATH,
            Some(SYSROOT_IFACE),
            "RegisterClient",
            &(options,),
        )
        .await
        .map_err(|e| bus_error("Sysroot.RegisterClient", None, e))?;
        let os_path: OwnedObjectPath =
            get_property(&conn, SYSROOT_PATH, SYSROOT_IFACE, "Booted").await?;
        if os_path.as_str() == "/" {
            return Err(OsError::RpmOstree {
                method: "reading Sysroot.Booted".into(),
                transaction: None,
                message: "the daemon reports no booted OS (is this host booted from an ostree \
                          deployment?)"
                    .into(),
            });
        }
        Ok(Session {
            conn,
            os_path,
            busy_wait,
        })
    }

    async fn close(self) {
        let options: HashMap<&str, Value<'_>> = HashMap::new();
        if let Err(e) = self
            .conn
            .call_method(
                Some(BUS_NAME),
                SYSROOT_PATH,
                Some(SYSROOT_IFACE),
                "UnregisterClient",
                &(options,),
            )
            .await
        {
            debug!("rpm-ostree UnregisterClient: {e}");
        }
    }

    async fn call_os<B, R>(&self, method: &str, body: &B) -> Result<R, OsError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: serde::de::DeserializeOwned + zbus::zvariant::Type,
    {
        let reply = self
            .conn
            .call_method(
                Some(BUS_NAME),
                self.os_path.as_str(),
                Some(OS_IFACE),
                method,
                body,
            )
            .await
            .map_err(|e| bus_error(method, None, e))?;
        reply
            .body()
            .deserialize::<R>()
            .map_err(|e| bus_error(format!("{method}: reading the reply"), None, e))
    }

    /// Calls a method that starts a transaction, and runs the transaction to its end.
    async fn transaction<B>(&self, method: &str, body: &B) -> Result<(), OsError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        // The daemon runs one transaction at a time and refuses others ("Transaction in
        // progress: <title>"): wait for it, as the libostree backend waits for the sysroot lock.
        let start = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(500);
        let address: String = loop {
            match self.call_os(method, body).await {
                Ok(a) => break a,
                Err(OsError::RpmOstree {
                    method: m,
                    transaction,
                    message,
                }) if message.contains("Transaction in progress") => {
                    let waited = start.elapsed();
                    if waited >= self.busy_wait {
                        return Err(OsError::RpmOstree {
                            method: m,
                            transaction,
                            message: format!(
                                "{message} (waited {} s for it to end)",
                                waited.as_secs()
                            ),
                        });
                    }
                    info!(
                        method,
                        "rpm-ostree is busy, waiting: {}",
                        message.lines().next().unwrap_or("")
                    );
                    tokio::time::sleep(pause.min(self.busy_wait.saturating_sub(waited))).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        };
        info!(method, transaction = %address, "rpm-ostree transaction started");
        run_transaction(method, &address).await?;
        // Sync with the daemon so that the properties show the transaction's result.
        self.conn
            .call_method(
                Some(BUS_NAME),
                SYSROOT_PATH,
                Some(SYSROOT_IFACE),
                "Reload",
                &(),
            )
            .await
            .map_err(|e| bus_error(format!("Sysroot.Reload after {method}"), None, e))?;
        Ok(())
    }

    async fn deployments(&self) -> Result<Vec<Dict>, OsError> {
        let op = "reading Sysroot.Deployments";
        let reply = self
            .conn
            .call_method(
                Some(BUS_NAME),
                SYSROOT_PATH,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(SYSROOT_IFACE, "Deployments"),
            )
            .await
            .map_err(|e| bus_error(op, None, e))?;
        let value: OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| bus_error(op, None, e))?;
        let Value::Array(list) = &*value else {
            return Err(OsError::RpmOstree {
                method: op.into(),
                transaction: None,
                message: format!("expected aa{{sv}}, got {}", value.value_signature()),
            });
        };
        let mut out = Vec::new();
        for item in list.iter() {
            let Value::Dict(d) = item else {
                return Err(OsError::RpmOstree {
                    method: op.into(),
                    transaction: None,
                    message: format!("expected a{{sv}} entries, got {}", item.value_signature()),
                });
            };
            let mut map = Dict::new();
            for (k, v) in d.iter() {
                let Value::Str(k) = k else { continue };
                // a{sv}: the value is a variant.
                let inner = match v {
                    Value::Variant(inner) => &**inner,
                    other => other,
                };
                if let Ok(owned) = inner.try_to_owned() {
                    map.insert(k.to_string(), owned);
                }
            }
            out.push(map);
        }
        Ok(out)
    }

    /// The kernel arguments of the deployment at `index` (without `ostree=`), and the boot
    /// checksum from its `linux` path when the daemon gives one (not for staged deployments).
    async fn boot_config(&self, index: usize) -> Result<(Vec<String>, String), OsError> {
        let config: Dict = self
            .call_os("GetDeploymentBootConfig", &(index.to_string(), false))
            .await?;
        let options = dict_str(&config, "options").unwrap_or_default();
        let kernel_args = hearth_config::plan::split_kernel_arguments(&[options])
            .into_iter()
            .filter(|a| !a.starts_with("ostree="))
            .collect();
        // `/ostree/<osname>-<bootcsum>/vmlinuz-...`
        let boot_checksum = dict_str(&config, "linux")
            .and_then(|l| {
                l.trim_start_matches('/')
                    .strip_prefix("ostree/")
                    .and_then(|r| r.split('/').next())
                    .and_then(|dir| dir.rsplit('-').next())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        Ok((kernel_args, boot_checksum))
    }

    async fn status(&self) -> Result<OsStatus, OsError> {
        Ok(self.status_and_dicts().await?.0)
    }

    /// The status, and the `Deployments` dicts it was read from (same order).
    async fn status_and_dicts(&self) -> Result<(OsStatus, Vec<Dict>), OsError> {
        let dicts = self.deployments().await?;
        let sysroot: String = get_property(&self.conn, SYSROOT_PATH, SYSROOT_IFACE, "Path")
            .await
            .unwrap_or_else(|_| "/".into());
        let mut infos = Vec::new();
        for (index, d) in dicts.iter().enumerate() {
            infos.push(self.info(index, d).await?);
        }
        let Some(booted_pos) = infos.iter().position(|d| d.booted) else {
            return Err(OsError::NotBooted {
                sysroot,
                reason: format!(
                    "none of the {} deployments rpm-ostree lists has booted=true",
                    infos.len()
                ),
            });
        };
        let osname = infos[booted_pos].id.osname.clone();
        let pending = infos[..booted_pos]
            .iter()
            .find(|d| d.id.osname == osname)
            .cloned();
        let rollback = infos[booted_pos + 1..]
            .iter()
            .find(|d| d.id.osname == osname)
            .cloned();
        let status = OsStatus {
            backend: "rpm-ostree".into(),
            sysroot,
            native: true,
            booted: infos[booted_pos].clone(),
            pending,
            rollback,
            deployments: infos,
        };
        Ok((status, dicts))
    }

    async fn info(&self, index: usize, d: &Dict) -> Result<DeploymentInfo, OsError> {
        let osname = dict_str(d, "osname").unwrap_or_default();
        let checksum = dict_str(d, "checksum").unwrap_or_default();
        let serial = dict_i32(d, "serial").unwrap_or(0);
        let container = dict_str(d, "container-image-reference");
        let origin = dict_str(d, "origin");
        let refspec = container.clone().or(origin);
        let image = match (&container, &refspec) {
            (Some(c), _) => container_image(c).unwrap_or(c).to_string(),
            (None, Some(r)) => r.clone(),
            (None, None) => checksum.clone(),
        };
        let mut packages = dict_strv(d, "requested-packages");
        packages.extend(dict_strv(d, "packages"));
        let kernel_type = kernel_type_of(&packages);
        let (kernel_args, boot_checksum) = self.boot_config(index).await?;
        Ok(DeploymentInfo {
            id: DeploymentId {
                osname,
                checksum,
                serial,
            },
            index: index as i32,
            boot_checksum,
            refspec,
            version: dict_str(d, "version"),
            image,
            kernel_type,
            kernel_args,
            booted: dict_bool(d, "booted"),
            staged: dict_bool(d, "staged"),
            pinned: dict_bool(d, "pinned"),
        })
    }

    async fn cleanup_pending(&self) -> Result<(), OsError> {
        self.transaction("Cleanup", &(vec!["pending-deploy"],))
            .await
    }

    async fn stage(&self, root: &Path, change: &OsChange) -> Result<StagedDeployment, OsError> {
        let (status, dicts) = self.status_and_dicts().await?;
        let booted = status.booted.clone();
        info!(booted = %booted.describe(), change = %change, "staging an OS change with rpm-ostree");

        // What UpdateDeployment must do (everything but kernel arguments).
        let booted_dict = &dicts[booted.index as usize];
        let requested: BTreeSet<String> = dict_strv(booted_dict, "requested-packages")
            .into_iter()
            .collect();
        let removals: BTreeSet<String> = dict_strv(booted_dict, "requested-base-removals")
            .into_iter()
            .collect();
        let update = UpdatePlan::new(change, &booted, &requested, &removals)?;

        // Kernel arguments under the ledger, from the booted deployment.
        let ledger = KargLedger::new(root);
        let mut ledger_file = ledger.load()?;
        let owned = ledger_file.hearth_added(&booted.kernel_args);
        let plan = plan_kernel_args(
            &booted.kernel_args,
            &owned,
            &change.kargs_delete,
            &change.kargs_append,
            LEDGER_PATH,
        );
        for s in &plan.skipped {
            info!(argument = %s.argument, "kernel argument not deleted: {}", s.reason);
        }
        let kargs_change = plan.kernel_args != booted.kernel_args;
        if kargs_change {
            if let Some(bad) = plan
                .kernel_args
                .iter()
                .find(|a| a.chars().any(char::is_whitespace))
            {
                return Err(OsError::InvalidChange(format!(
                    "kernel argument {bad} contains a space (inside quotes): rpm-ostree's \
                     KernelArgs takes the list as one string that libostree splits at every \
                     space (ostree_kernel_args_from_string), so it would become several \
                     arguments; hearth changes no kernel arguments on this host while the list \
                     has such an argument (write it without spaces, or change the arguments \
                     with `rpm-ostree kargs` by hand)"
                )));
            }
        }
        if update.is_empty() && !kargs_change {
            info!("nothing to stage: the booted deployment already is what the change asks for");
            if status.pending.is_some() {
                self.cleanup_pending().await?;
            }
            return Ok(StagedDeployment {
                deployment: booted.clone(),
                from: booted.id,
                finalization: Finalization::AtShutdown,
                skipped_deletes: plan.skipped,
                pulled: None,
                space: Vec::new(),
            });
        }

        // 1. From the booted deployment, not from a pending one.
        if status.pending.is_some() {
            self.cleanup_pending().await?;
        }
        // The ledger, before any deployment carries the new list (see ledger.rs).
        ledger_file.record(&booted.kernel_args, &owned);
        ledger_file.record(&plan.kernel_args, &plan.hearth_added);
        ledger.store(&ledger_file)?;

        // 2. One UpdateDeployment for image, kernel type and extensions.
        if !update.is_empty() {
            let (modifiers, options) = update.to_dbus();
            self.transaction("UpdateDeployment", &(modifiers, options))
                .await?;
        }

        // 3. KernelArgs with the whole list.
        if kargs_change {
            let existing = if update.is_empty() {
                booted.kernel_args.clone()
            } else {
                // The deployment UpdateDeployment staged carries the booted arguments.
                let s = self.status().await?;
                s.pending
                    .map(|p| p.kernel_args)
                    .unwrap_or(booted.kernel_args.clone())
            };
            let existing = existing.join(" ");
            let final_args = plan.kernel_args.join(" ");
            let mut options: HashMap<&str, Value<'_>> = HashMap::new();
            options.insert("final-kernel-args", Value::from(final_args.as_str()));
            options.insert("initiating-command-line", Value::from("hearth-agent"));
            let none: Vec<&str> = Vec::new();
            let result = self
                .transaction(
                    "KernelArgs",
                    &(
                        existing.as_str(),
                        none.clone(),
                        none.clone(),
                        none.clone(),
                        options,
                    ),
                )
                .await;
            if let Err(e) = result {
                if update.is_empty() {
                    return Err(e);
                }
                let cleanup = match self.cleanup_pending().await {
                    Ok(()) => "the deployment UpdateDeployment staged (without the new kernel \
                               arguments) was removed with Cleanup(pending-deploy)"
                        .to_string(),
                    Err(c) => format!(
                        "removing the deployment UpdateDeployment staged without the new kernel \
                         arguments failed too ({c}): do not reboot; run `rpm-ostree cleanup \
                         --pending`"
                    ),
                };
                return Err(match e {
                    OsError::RpmOstree {
                        method,
                        transaction,
                        message,
                    } => OsError::RpmOstree {
                        method,
                        transaction,
                        message: format!("{message}; {cleanup}"),
                    },
                    other => other,
                });
            }
        }

        // The result.
        let (after, after_dicts) = self.status_and_dicts().await?;
        let Some(new) = after.pending.clone() else {
            return Err(OsError::RpmOstree {
                method: "reading Sysroot.Deployments after staging".into(),
                transaction: None,
                message: format!(
                    "the transactions succeeded but no deployment is pending (booted: {})",
                    after.booted.describe()
                ),
            });
        };
        let mut wrong =
            compare_kernel_args(&plan.kernel_args, &new.kernel_args, "the staged deployment");
        if let Some(RpmOstreeImage::Commit(c)) = &update.image {
            // The base commit: `base-checksum` when packages are layered on it.
            let d = &after_dicts[new.index as usize];
            let base = dict_str(d, "base-checksum").unwrap_or(new.id.checksum.clone());
            if base != *c {
                wrong.push(format!(
                    "the staged deployment's base commit is {base}, not {c}"
                ));
            }
        }
        // A commit (`set-revision`) keeps the origin's refspec: its image stays the refspec.
        if let Some(img) = update
            .image
            .as_ref()
            .filter(|i| !matches!(i, RpmOstreeImage::Commit(_)))
        {
            if new.image != img.image() {
                wrong.push(format!(
                    "the staged deployment has image {}, not {}",
                    new.image,
                    img.image()
                ));
            }
        }
        if new.kernel_type != update.kernel_type {
            wrong.push(format!(
                "the staged deployment has kernel type {}, not {}",
                new.kernel_type, update.kernel_type
            ));
        }
        if !wrong.is_empty() {
            return Err(OsError::RpmOstree {
                method: "checking the staged deployment".into(),
                transaction: None,
                message: wrong.join("; "),
            });
        }
        info!(deployment = %new.describe(), "OS change staged by rpm-ostree");
        let finalization = if new.staged {
            Finalization::AtShutdown
        } else {
            Finalization::Written
        };
        Ok(StagedDeployment {
            deployment: new,
            from: booted.id,
            finalization,
            skipped_deletes: plan.skipped,
            pulled: update.refspec(),
            space: Vec::new(),
        })
    }

    async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        let status = self.status().await?;
        if let Some(pending) = &status.pending {
            self.cleanup_pending().await?;
            info!(dropped = %pending.id, "pending deployment dropped");
            return Ok(RollbackOutcome::CancelledPending {
                dropped: pending.id.clone(),
            });
        }
        let Some(previous) = &status.rollback else {
            return Err(OsError::NoRollback(format!(
                "the booted deployment {} is the only deployment of stateroot {}",
                status.booted.describe(),
                status.booted.id.osname
            )));
        };
        let options: HashMap<&str, Value<'_>> = HashMap::new();
        self.transaction("Rollback", &(options,)).await?;
        let after = self.status().await?;
        match after.deployments.first() {
            Some(first) if first.id == previous.id => {}
            other => {
                return Err(OsError::RpmOstree {
                    method: "Rollback".into(),
                    transaction: None,
                    message: format!(
                        "the transaction succeeded but the default deployment is {}, not {}",
                        other.map(|d| d.describe()).unwrap_or_else(|| "none".into()),
                        previous.describe()
                    ),
                })
            }
        }
        info!(from = %status.booted.id, to = %previous.id, "rolled back");
        Ok(RollbackOutcome::RolledBack {
            from: status.booted.id,
            to: previous.id.clone(),
        })
    }
}

/// The kernel type a deployment's requested (layered) packages say.
fn kernel_type_of(packages: &[String]) -> KernelType {
    if packages.iter().any(|p| p.starts_with("kernel-rt-")) {
        KernelType::Realtime
    } else if packages.iter().any(|p| p.starts_with("kernel-64k-")) {
        KernelType::Pages64k
    } else {
        KernelType::Default
    }
}

/// What one `UpdateDeployment` carries.
#[derive(Debug, Default)]
struct UpdatePlan {
    image: Option<RpmOstreeImage>,
    kernel_type: KernelType,
    install: Vec<String>,
    uninstall: Vec<String>,
    override_remove: Vec<String>,
    override_reset: Vec<String>,
}

impl UpdatePlan {
    fn new(
        change: &OsChange,
        booted: &DeploymentInfo,
        requested: &BTreeSet<String>,
        removals: &BTreeSet<String>,
    ) -> Result<UpdatePlan, OsError> {
        let mut p = UpdatePlan {
            kernel_type: booted.kernel_type,
            ..Default::default()
        };
        if let Some(image) = &change.os_image {
            let img = RpmOstreeImage::parse(image)?;
            let same = match &img {
                RpmOstreeImage::Commit(c) => *c == booted.id.checksum,
                other => booted.refspec.as_deref() == Some(refspec_of(other)),
            };
            if !same {
                p.image = Some(img);
            }
        }
        // Kernel type: the MCO's override swap.
        let to = change
            .kernel_type
            .map(|(_, to)| to)
            .unwrap_or(booted.kernel_type);
        if to == KernelType::Pages64k && std::env::consts::ARCH != "aarch64" {
            return Err(OsError::InvalidChange(format!(
                "kernel type 64k-pages is only supported on aarch64 (this host is {}), as in \
                 the MCO",
                std::env::consts::ARCH
            )));
        }
        if to != booted.kernel_type {
            let from = booted.kernel_type;
            let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            p.uninstall.extend(
                strs(kernel_type_packages(from))
                    .into_iter()
                    .filter(|pkg| requested.contains(pkg)),
            );
            p.install.extend(strs(kernel_type_packages(to)));
            if to == KernelType::Default {
                p.override_reset.extend(
                    strs(&DEFAULT_KERNEL_PACKAGES)
                        .into_iter()
                        .filter(|pkg| removals.contains(pkg)),
                );
            } else if from == KernelType::Default {
                // An override an admin already made stays as it is.
                p.override_remove.extend(
                    strs(&DEFAULT_KERNEL_PACKAGES)
                        .into_iter()
                        .filter(|pkg| !removals.contains(pkg)),
                );
            }
            p.kernel_type = to;
        }
        // Extensions: package layering.
        if let Some((from, to)) = &change.extensions {
            let packages = |names: &[String]| -> Result<BTreeSet<String>, OsError> {
                let mut out = BTreeSet::new();
                for n in names {
                    let pkgs = extension_packages(n).ok_or_else(|| {
                        OsError::InvalidChange(format!(
                            "extension {n:?} is not supported; supported extensions: {}",
                            EXTENSIONS
                                .iter()
                                .map(|(n, _)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })?;
                    out.extend(pkgs.iter().map(|s| s.to_string()));
                }
                Ok(out)
            };
            let (old, new) = (packages(from)?, packages(to)?);
            for pkg in &new {
                if !requested.contains(pkg) && !p.install.contains(pkg) {
                    p.install.push(pkg.clone());
                }
            }
            for pkg in old.difference(&new) {
                if requested.contains(pkg) && !p.uninstall.contains(pkg) {
                    p.uninstall.push(pkg.clone());
                }
            }
        }
        Ok(p)
    }

    fn is_empty(&self) -> bool {
        self.image.is_none()
            && self.install.is_empty()
            && self.uninstall.is_empty()
            && self.override_remove.is_empty()
            && self.override_reset.is_empty()
    }

    fn refspec(&self) -> Option<String> {
        self.image.as_ref().map(|i| refspec_of(i).to_string())
    }

    /// `(modifiers, options)` for `UpdateDeployment`.
    fn to_dbus(
        &self,
    ) -> (
        HashMap<&'static str, Value<'static>>,
        HashMap<&'static str, Value<'static>>,
    ) {
        let mut m: HashMap<&'static str, Value<'static>> = HashMap::new();
        let mut o: HashMap<&'static str, Value<'static>> = HashMap::new();
        match &self.image {
            Some(RpmOstreeImage::Commit(c)) => {
                m.insert("set-revision", Value::from(c.clone()));
            }
            Some(other) => {
                m.insert("set-refspec", Value::from(refspec_of(other).to_string()));
            }
            None => {}
        }
        for (key, list) in [
            ("install-packages", &self.install),
            ("uninstall-packages", &self.uninstall),
            ("override-remove-packages", &self.override_remove),
            ("override-reset-packages", &self.override_reset),
        ] {
            if !list.is_empty() {
                m.insert(key, Value::from(list.clone()));
            }
        }
        if !self.install.is_empty() || !self.uninstall.is_empty() {
            o.insert("idempotent-layering", Value::from(true));
        }
        o.insert("initiating-command-line", Value::from("hearth-agent"));
        (m, o)
    }
}

fn refspec_of(image: &RpmOstreeImage) -> &str {
    match image {
        RpmOstreeImage::Container(r) | RpmOstreeImage::Refspec(r) | RpmOstreeImage::Commit(r) => r,
    }
}

/// Connects to a transaction's peer-to-peer address, starts it and waits for `Finished`.
async fn run_transaction(method: &str, address: &str) -> Result<(), OsError> {
    let err = |message: String| OsError::RpmOstree {
        method: method.to_string(),
        transaction: Some(address.to_string()),
        message,
    };
    let conn = zbus::connection::Builder::address(address)
        .p2p()
        .method_timeout(METHOD_TIMEOUT)
        .build()
        .await
        .map_err(|e| err(format!("connecting to the transaction: {e}")))?;
    // Everything the peer sends, from before Start on (no signal can be missed).
    let mut stream = MessageStream::from(&conn);
    let reply = conn
        .call_method(None::<&str>, "/", Some(TRANSACTION_IFACE), "Start", &())
        .await
        .map_err(|e| match e {
            // The daemon went away before it answered.
            zbus::Error::InputOutput(_) => err(format!(
                "the daemon closed the transaction's connection before Finished (calling \
                 Start: {e})"
            )),
            e => bus_error(method, Some(address), e),
        })?;
    let started: bool = reply.body().deserialize().unwrap_or(true);
    if !started {
        info!(
            method,
            transaction = address,
            "attached to a transaction another client started"
        );
    }
    let wait = async {
        let mut log: Vec<String> = Vec::new();
        while let Some(msg) = next(&mut stream).await {
            let msg = msg.map_err(|e| {
                err(format!(
                    "the daemon closed the transaction's connection before Finished ({e})"
                ))
            })?;
            if msg.message_type() != zbus::message::Type::Signal {
                continue;
            }
            let header = msg.header();
            if header.interface().map(|i| i.as_str()) != Some(TRANSACTION_IFACE) {
                continue;
            }
            let member = header.member().map(|m| m.to_string()).unwrap_or_default();
            let body = msg.body();
            match member.as_str() {
                "Finished" => {
                    let (success, message): (bool, String) = body
                        .deserialize()
                        .map_err(|e| err(format!("reading Finished: {e}")))?;
                    return if success {
                        info!(
                            method,
                            transaction = address,
                            "rpm-ostree transaction finished"
                        );
                        Ok(())
                    } else {
                        let mut m = message;
                        if m.is_empty() {
                            m = "the transaction failed without a message".into();
                        }
                        if let Some(last) = log.last().filter(|l| !l.contains(m.as_str())) {
                            m = format!("{m} (last message: {last})");
                        }
                        Err(err(m))
                    };
                }
                "Message" | "TaskBegin" | "TaskEnd" => {
                    if let Ok(text) = body.deserialize::<String>() {
                        info!(target: "rpm-ostree", method, "{}", text.trim_end());
                        if member == "Message" {
                            log.push(text.trim_end().to_string());
                        }
                    }
                }
                "PercentProgress" => {
                    if let Ok((text, pct)) = body.deserialize::<(String, u32)>() {
                        debug!(target: "rpm-ostree", method, "{text} {pct}%");
                    }
                }
                other => debug!(target: "rpm-ostree", method, "transaction signal {other}"),
            }
        }
        Err(err(
            "the daemon closed the transaction's connection before Finished".into(),
        ))
    };
    match tokio::time::timeout(TRANSACTION_TIMEOUT, wait).await {
        Ok(r) => r,
        Err(_) => {
            warn!(
                method,
                transaction = address,
                "rpm-ostree transaction timed out"
            );
            Err(err(format!(
                "no Finished signal within {} s",
                TRANSACTION_TIMEOUT.as_secs()
            )))
        }
    }
}

/// The next item of a stream (without pulling in futures-util).
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_parse() {
        let c = RpmOstreeImage::parse("quay.io/openshift/rhcos@sha256:0123abcd").unwrap();
        assert_eq!(
            c,
            RpmOstreeImage::Container(
                "ostree-unverified-registry:quay.io/openshift/rhcos@sha256:0123abcd".into()
            )
        );
        assert_eq!(c.image(), "quay.io/openshift/rhcos@sha256:0123abcd");
        assert_eq!(
            RpmOstreeImage::parse("registry.example:5000/os/rhcos:4.16").unwrap(),
            RpmOstreeImage::Container(
                "ostree-unverified-registry:registry.example:5000/os/rhcos:4.16".into()
            )
        );
        assert_eq!(
            RpmOstreeImage::parse("ostree-remote-registry:fedora:quay.io/fedora/fcos:stable")
                .unwrap()
                .image(),
            "quay.io/fedora/fcos:stable"
        );
        assert_eq!(
            RpmOstreeImage::parse("fedora:fedora/x86_64/coreos/stable").unwrap(),
            RpmOstreeImage::Refspec("fedora:fedora/x86_64/coreos/stable".into())
        );
        let csum = "A".repeat(64);
        assert_eq!(
            RpmOstreeImage::parse(&csum).unwrap(),
            RpmOstreeImage::Commit("a".repeat(64))
        );
        for bad in ["", "not an image", "a:b:c d"] {
            let e = RpmOstreeImage::parse(bad).unwrap_err().to_string();
            assert!(e.contains("OS image"), "{bad}: {e}");
        }
    }

    /// rpm-ostree applies `final-kernel-args` as `ostree_kernel_args_from_string(final)` then
    /// `ostree_kernel_args_to_strv` (rpmostreed-transaction-types.cxx,
    /// `kernel_arg_apply_final_str`): this is that round trip through the real libostree
    /// (Debian 12's 2022.7; RHCOS ships newer ones).
    #[test]
    fn libostree_keeps_order_and_duplicates_of_final_kernel_args() {
        for list in [
            &["rw", "quiet", "hugepages=32", "selinux=0"][..],
            &["a=1", "rw", "a=2", "b", "a=1"][..],
            &[
                "default_hugepagesz=1G",
                "hugepagesz=1G",
                "hugepages=32",
                "hugepagesz=2M",
                "hugepages=512",
            ][..],
            &["console=tty0", "console=ttyS0,115200n8", "quiet"][..],
        ] {
            let k = ::ostree::KernelArgs::from_string(&list.join(" "));
            let out: Vec<String> = k.to_strv().iter().map(|s| s.to_string()).collect();
            assert_eq!(out, list, "libostree changed {list:?}");
        }
        // But a quoted argument with spaces is split: why stage() refuses those.
        let k = ::ostree::KernelArgs::from_string("rw dyndbg=\"file x.c +p\" quiet");
        let out: Vec<String> = k.to_strv().iter().map(|s| s.to_string()).collect();
        assert_eq!(out, ["rw", "dyndbg=\"file", "x.c", "+p\"", "quiet"]);
    }

    #[test]
    fn kernel_types_come_from_requested_packages() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(kernel_type_of(&s(&["usbguard"])), KernelType::Default);
        assert_eq!(
            kernel_type_of(&s(&["kernel-rt-core", "kernel-rt-modules"])),
            KernelType::Realtime
        );
        assert_eq!(
            kernel_type_of(&s(&["kernel-64k-core"])),
            KernelType::Pages64k
        );
        assert_eq!(
            extension_packages("kerberos"),
            Some(&["krb5-workstation", "libkadm5"][..])
        );
        assert_eq!(extension_packages("nope"), None);
    }
}
