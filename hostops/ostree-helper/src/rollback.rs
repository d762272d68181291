//! Rolling back with libostree: dropping a staged or pending deployment, or making the
//! previous deployment of the stateroot the default.

use ::ostree as lo;
use tracing::info;

use crate::session::{none, Session};
use hearth_hostops::os::OsConfig;
use hearth_hostops::os::OsError;
use hearth_hostops::os::RollbackOutcome;

impl Session {
    pub(crate) fn rollback(&self, config: &OsConfig) -> Result<RollbackOutcome, OsError> {
        let all = self.sysroot.deployments();
        let booted_id = Self::id(&self.booted);
        let osname = self.booted.osname();
        let write = |list: Vec<lo::Deployment>, what: &str| -> Result<(), OsError> {
            self.sysroot
                .write_deployments_with_options(
                    &list,
                    &crate::session::keep_old_boot_version(),
                    none(),
                )
                .map_err(|e| OsError::ostree(what.to_string(), e))?;
            self.reload()
        };
        if let Some(staged) = self.sysroot.staged_deployment() {
            let dropped = Self::id(&staged);
            let list: Vec<lo::Deployment> = all.into_iter().filter(|d| !d.is_staged()).collect();
            write(list, &format!("dropping the staged deployment {dropped}"))?;
            info!(%dropped, "staged deployment dropped");
            return Ok(RollbackOutcome::CancelledPending { dropped });
        }
        let booted_pos = all
            .iter()
            .position(|d| d.equal(&self.booted))
            .ok_or_else(|| {
                OsError::NoRollback(format!(
                    "booted deployment {booted_id} is not in the deployment list"
                ))
            })?;
        if let Some(pending) = all[..booted_pos].iter().find(|d| d.osname() == osname) {
            let dropped = Self::id(pending);
            let list: Vec<lo::Deployment> = all
                .iter()
                .filter(|d| !(d.osname() == osname && d.index() < booted_pos as i32))
                .cloned()
                .collect();
            write(list, &format!("dropping the pending deployment {dropped}"))?;
            info!(%dropped, "pending deployment dropped");
            return Ok(RollbackOutcome::CancelledPending { dropped });
        }
        let Some(previous) = all[booted_pos + 1..]
            .iter()
            .find(|d| d.osname() == osname)
            .cloned()
        else {
            return Err(OsError::NoRollback(format!(
                "the booted deployment {} is the only deployment of stateroot {osname}",
                self.info(&self.booted, config).describe()
            )));
        };
        let to = Self::id(&previous);
        let mut list = vec![previous.clone()];
        list.extend(all.iter().filter(|d| !d.equal(&previous)).cloned());
        write(list, &format!("making {to} the default deployment"))?;
        info!(from = %booted_id, %to, "rolled back");
        Ok(RollbackOutcome::RolledBack {
            from: booted_id,
            to,
        })
    }
}
