//! Staging one OS change with rpm-ostree: the booted deployment's packages and kernel
//! arguments, one `UpdateDeployment` ([`UpdatePlan`]: image, kernel type, extensions), then
//! `KernelArgs` with the whole list, and checking what was staged.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use hearth_config::model::KernelType;
use tracing::info;
use zbus::Variant as Value;

use super::dbus::{dict_str, dict_strv};
use super::image::{refspec_of, RpmOstreeImage};
use super::packages::{
    extension_packages, kernel_type_packages, DEFAULT_KERNEL_PACKAGES, EXTENSIONS,
};
use super::session::Session;
use crate::os::change::OsChange;
use crate::os::compare::compare_kernel_args;
use crate::os::error::OsError;
use crate::os::ledger::{plan_kernel_args, KargLedger, LEDGER_PATH};
use crate::os::status::{DeploymentInfo, Finalization, StagedDeployment};

impl Session {
    pub(super) async fn stage(
        &self,
        root: &Path,
        change: &OsChange,
    ) -> Result<StagedDeployment, OsError> {
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
                fetched_bytes: None,
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
            fetched_bytes: None,
            space: Vec::new(),
        })
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
// The round trip of `final-kernel-args` through libostree's KernelArgs (what rpm-ostree does
// with them) is tested in hearth-ostree-helper (src/kargs_roundtrip.rs), the crate that links
// libostree.
