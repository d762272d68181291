//! Staging one OS change with libostree: the commit (fetched), kernel arguments under the
//! ledger, the space checks, the ledger written first, the origin, then `stage_tree` (native)
//! or `deploy_tree` + `write_deployments` (external).

use std::time::Instant;

use ::ostree as lo;
use lo::glib;
use tracing::info;

use crate::session::{none, Session, ORIGIN_CONTAINER, ORIGIN_GROUP, ORIGIN_IMAGE_DIGEST};
use hearth_hostops::os::ledger::{plan_kernel_args, KargLedger, LEDGER_PATH};
use hearth_hostops::os::ImageRef;
use hearth_hostops::os::OsChange;
use hearth_hostops::os::OsConfig;
use hearth_hostops::os::OsError;
use hearth_hostops::os::{Finalization, StagedDeployment};

impl Session {
    pub(crate) fn stage(
        &self,
        config: &OsConfig,
        change: &OsChange,
    ) -> Result<StagedDeployment, OsError> {
        let booted = self.info(&self.booted, config);
        let osname = booted.id.osname.clone();
        let current_image = ImageRef::parse(&booted.image)
            .unwrap_or_else(|_| ImageRef::Commit(booted.id.checksum.clone()));
        let image = match &change.os_image {
            Some(i) => ImageRef::parse(i)?,
            None => current_image.clone(),
        };
        let kernel_type = change
            .kernel_type
            .map(|(_, to)| to)
            .unwrap_or(booted.kernel_type);
        let moves = image != current_image || kernel_type != booted.kernel_type;
        info!(
            booted = %booted.describe(),
            change = %change,
            image = %image,
            kernel_type = %kernel_type,
            native = self.native,
            "staging an OS change"
        );

        // 1. The commit to deploy.
        let t0 = Instant::now();
        let (revision, refspec, pulled, mut space, target, digest, fetched) = if moves {
            let target = config.ref_for(&image, kernel_type)?;
            let f = self.fetch(config, &target)?;
            let target = target.to_string();
            (
                f.commit,
                f.refspec,
                f.pulled,
                f.space,
                target,
                f.image_digest,
                f.fetched_bytes,
            )
        } else {
            (
                booted.id.checksum.clone(),
                booted.refspec.clone(),
                None,
                Vec::new(),
                format!("commit {} (the booted commit)", booted.id.checksum),
                booted.image_digest.clone(),
                None,
            )
        };

        let t_fetch = t0.elapsed();
        // 2. Kernel arguments, under the ledger.
        let ledger = KargLedger::new(&self.root);
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

        // 3. Space for the deployment and its kernel.
        let t1 = Instant::now();
        space.extend(self.deploy_space(config, &revision, &target)?);

        let t_space = t1.elapsed();
        // 4. The ledger, before the deployment exists (see ledger.rs).
        let t2 = Instant::now();
        ledger_file.record(&booted.kernel_args, &owned);
        ledger_file.record(&plan.kernel_args, &plan.hearth_added);
        ledger.store(&ledger_file)?;

        let t_ledger = t2.elapsed();
        // 5. The origin: a copy of the booted one when the commit stays, else a new one.
        let origin = if let (true, ImageRef::Container(c)) = (moves, &image) {
            // As ostree-ext and rpm-ostree write it, pinned to the digest deployed.
            let pinned = digest
                .as_deref()
                .map_or_else(|| c.clone(), |d| c.with_digest(d));
            let origin = glib::KeyFile::new();
            origin.set_string("origin", ORIGIN_CONTAINER, &pinned.ostree_ext());
            origin
        } else if moves {
            let spec = refspec.clone().unwrap_or_else(|| revision.clone());
            self.sysroot.origin_new_from_refspec(&spec)
        } else {
            let copy = glib::KeyFile::new();
            if let Some(o) = self.booted.origin() {
                copy.load_from_data(&o.to_data(), glib::KeyFileFlags::KEEP_COMMENTS)
                    .map_err(|e| {
                        OsError::ostree(format!("copying the origin of {}", booted.id), e)
                    })?;
                lo::Deployment::origin_remove_transient_state(&copy);
            } else {
                copy.set_string("origin", "refspec", &revision);
            }
            copy
        };
        origin.set_string(ORIGIN_GROUP, "image", &image.image());
        origin.set_string(ORIGIN_GROUP, "kernel-type", kernel_type.as_str());
        if let Some(d) = &digest {
            origin.set_string(ORIGIN_GROUP, ORIGIN_IMAGE_DIGEST, d);
        }

        // 6. Stage (native) or write (external).
        let t3 = Instant::now();
        let kargs: Vec<&str> = plan.kernel_args.iter().map(String::as_str).collect();
        let opts = lo::SysrootDeployTreeOpts {
            override_kernel_argv: Some(&kargs),
            ..Default::default()
        };
        let what = format!("deploying {target} in stateroot {osname}");
        let (new_id, finalization) = if self.native {
            let new = self
                .sysroot
                .stage_tree_with_options(
                    Some(&osname),
                    &revision,
                    Some(&origin),
                    Some(&self.booted),
                    &opts,
                    none(),
                )
                .map_err(|e| OsError::ostree(format!("staging: {what}"), e))?;
            (Self::id(&new), Finalization::AtShutdown)
        } else {
            let new = self
                .sysroot
                .deploy_tree_with_options(
                    Some(&osname),
                    &revision,
                    Some(&origin),
                    Some(&self.booted),
                    Some(&opts),
                    none(),
                )
                .map_err(|e| OsError::ostree(what.clone(), e))?;
            let mut list = vec![new.clone()];
            for d in self.sysroot.deployments() {
                if d.equal(&self.booted) || d.is_pinned() || d.osname() != osname {
                    list.push(d);
                }
            }
            self.sysroot
                .write_deployments_with_options(
                    &list,
                    &crate::session::keep_old_boot_version(),
                    none(),
                )
                .map_err(|e| OsError::ostree(format!("writing the deployments after {what}"), e))?;
            (Self::id(&new), Finalization::Written)
        };
        let t_deploy = t3.elapsed();
        self.reload()?;
        let new = self
            .sysroot
            .deployments()
            .into_iter()
            .find(|d| Self::id(d) == new_id)
            .ok_or_else(|| {
                OsError::ostree(
                    what,
                    format!("deployment {new_id} is not in the sysroot after it was written"),
                )
            })?;
        let deployment = self.info(&new, config);
        let t4 = Instant::now();
        if self.has_container_images() {
            // Images no deployment uses any more go now; a failure here is not the change's.
            if let Err(e) = self.prune_images() {
                tracing::warn!("pruning container images after staging: {e}");
            }
        }
        info!(
            deployment = %deployment.describe(),
            ?finalization,
            fetch_ms = t_fetch.as_millis() as u64,
            space_check_ms = t_space.as_millis() as u64,
            ledger_ms = t_ledger.as_millis() as u64,
            libostree_deploy_ms = t_deploy.as_millis() as u64,
            prune_ms = t4.elapsed().as_millis() as u64,
            total_ms = t0.elapsed().as_millis() as u64,
            "OS change staged"
        );
        Ok(StagedDeployment {
            deployment,
            from: booted.id,
            finalization,
            skipped_deletes: plan.skipped,
            pulled,
            fetched_bytes: fetched,
            space,
        })
    }
}
