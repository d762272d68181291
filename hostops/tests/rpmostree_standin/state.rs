//! What the stand-in keeps: deployments (and their D-Bus dicts and boot options), the
//! record of calls, failures to inject, and staging on the origin merge deployment.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use zbus::{OwnedVariant, Variant};

/// One deployment, as the stand-in keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    pub osname: String,
    /// The base commit (the image's).
    pub base_checksum: String,
    /// The deployed commit (the base, or a layered commit when packages are layered).
    pub checksum: String,
    pub serial: i32,
    /// The origin refspec: an ostree refspec, a checksum, or a container refspec
    /// (`ostree-unverified-registry:...`).
    pub origin: String,
    pub version: Option<String>,
    /// Kernel arguments, without `ostree=`.
    pub kargs: Vec<String>,
    pub requested_packages: Vec<String>,
    pub requested_base_removals: Vec<String>,
    pub booted: bool,
    pub staged: bool,
    pub pinned: bool,
    pub boot_csum: String,
}

pub(super) fn sha(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

impl Deployment {
    /// A booted deployment of `origin` with kernel arguments `kargs`.
    pub fn booted(osname: &str, origin: &str, version: &str, kargs: &[&str]) -> Deployment {
        let base = sha(&["commit", origin]);
        Deployment {
            osname: osname.into(),
            base_checksum: base.clone(),
            checksum: base.clone(),
            serial: 0,
            origin: origin.into(),
            version: Some(version.into()),
            kargs: kargs.iter().map(|s| s.to_string()).collect(),
            requested_packages: Vec::new(),
            requested_base_removals: Vec::new(),
            booted: true,
            staged: false,
            pinned: false,
            boot_csum: sha(&["boot", &base]),
        }
    }

    pub fn id(&self) -> String {
        format!("{}-{}.{}", self.osname, self.checksum, self.serial)
    }

    fn is_container(&self) -> bool {
        self.origin.starts_with("ostree-unverified-registry:")
            || self.origin.starts_with("ostree-remote-registry:")
            || self.origin.starts_with("ostree-image-signed:")
            || self.origin.starts_with("ostree-unverified-image:")
    }

    /// The deployment dict, with the keys the real daemon sets (rpm-ostree's
    /// `deployment_populate_variant` and `rpmostreed_deployment_generate_variant`).
    pub(super) fn to_dict(&self) -> HashMap<String, OwnedVariant> {
        let mut d: HashMap<String, OwnedVariant> = HashMap::new();
        let mut put = |k: &str, v: Variant<'_>| {
            d.insert(k.to_string(), v.try_to_owned().unwrap());
        };
        put("id", Variant::from(self.id()));
        put("osname", Variant::from(self.osname.clone()));
        put("serial", Variant::from(self.serial));
        put("checksum", Variant::from(self.checksum.clone()));
        put("timestamp", Variant::from(1_700_000_000u64));
        put("booted", Variant::from(self.booted));
        put("staged", Variant::from(self.staged));
        put("pinned", Variant::from(self.pinned));
        put("unlocked", Variant::from("none"));
        put("regenerate-initramfs", Variant::from(false));
        if let Some(v) = &self.version {
            put("version", Variant::from(v.clone()));
        }
        if self.is_container() {
            put(
                "container-image-reference",
                Variant::from(self.origin.clone()),
            );
            // rpm-ostree reports the digest of the manifest it pulled; the stand-in pulls
            // nothing and reports the one the reference pins.
            if let Some((_, digest)) = self.origin.split_once('@') {
                put(
                    "container-image-reference-digest",
                    Variant::from(digest.to_string()),
                );
            }
        } else {
            put("origin", Variant::from(self.origin.clone()));
        }
        put(
            "requested-packages",
            Variant::from(self.requested_packages.clone()),
        );
        put("packages", Variant::from(self.requested_packages.clone()));
        put(
            "requested-base-removals",
            Variant::from(self.requested_base_removals.clone()),
        );
        if self.checksum != self.base_checksum {
            put("base-checksum", Variant::from(self.base_checksum.clone()));
        }
        d
    }

    pub(super) fn options(&self) -> String {
        let mut v = vec![format!(
            "ostree=/ostree/boot.1/{}/{}/{}",
            self.osname, self.boot_csum, self.serial
        )];
        v.extend(self.kargs.iter().cloned());
        v.join(" ")
    }
}

/// One recorded method call.
#[derive(Debug, Clone)]
pub struct Call {
    /// `Sysroot`, `OS` or `Transaction`.
    pub interface: String,
    pub method: String,
    /// The arguments, converted to JSON (a{sv} → object).
    pub args: Json,
    /// For methods that start a transaction: its address.
    pub transaction: Option<String>,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) deployments: Vec<Deployment>,
    pub(super) calls: Vec<Call>,
    /// Method → message: the next transaction of that method fails with it.
    pub(super) fail: HashMap<String, String>,
    /// Methods whose next transaction "crashes": the connection closes without `Finished`.
    pub(super) crash: Vec<String>,
    /// Method → how many more calls are refused with "Transaction in progress".
    pub(super) busy: HashMap<String, u32>,
    pub(super) txn_counter: u32,
    pub(super) txn_dir: PathBuf,
    pub(super) clients: Vec<String>,
    pub(super) reboots: u32,
    /// Serve transactions with GLib's `GDBusServer` (as rpm-ostreed does) instead of zbus.
    pub(super) glib_transactions: bool,
}

impl State {
    pub(super) fn booted_index(&self) -> usize {
        self.deployments.iter().position(|d| d.booted).unwrap()
    }

    pub(super) fn osname(&self) -> String {
        self.deployments[self.booted_index()].osname.clone()
    }

    /// The pending deployment if any, else the booted one (rpm-ostree's origin merge
    /// deployment).
    pub(super) fn origin_merge(&self) -> Deployment {
        let os = self.osname();
        self.deployments
            .iter()
            .find(|d| d.osname == os)
            .cloned()
            .unwrap()
    }

    /// Stages `d` (replacing a staged deployment), at the top of the boot order.
    pub(super) fn stage(&mut self, mut d: Deployment) -> Deployment {
        self.deployments.retain(|x| !x.staged);
        d.serial = self
            .deployments
            .iter()
            .filter(|x| x.checksum == d.checksum)
            .map(|x| x.serial + 1)
            .max()
            .unwrap_or(0);
        d.booted = false;
        d.staged = true;
        d.pinned = false;
        if d.checksum != d.base_checksum || d.boot_csum.is_empty() {
            d.boot_csum = sha(&["boot", &d.checksum]);
        }
        self.deployments.insert(0, d.clone());
        d
    }
}

pub(super) fn record(state: &Arc<Mutex<State>>, interface: &str, method: &str, args: Json) {
    state.lock().unwrap().calls.push(Call {
        interface: interface.into(),
        method: method.into(),
        args,
        transaction: None,
    });
}

pub(super) fn failed(msg: impl Into<String>) -> zbus::fdo::Error {
    zbus::fdo::Error::Failed(msg.into())
}
