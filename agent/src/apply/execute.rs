//! Executing one step of a plan: file, unit and drop-in writes (keeping originals), unit
//! enablement online (D-Bus) or offline (symlinks), masks, SSH keys, password hashes, and the
//! service steps (reload, restart) a plan's disruption asks for.

use super::agent::{Agent, Units};
use super::step::{OnObject, StepError};
use hearth_config::disruption::{Outcome as DisruptionOutcome, ServiceStep};
use hearth_config::model::DisruptionPolicies;
use hearth_config::paths::{dropin_path, unit_path};
use hearth_config::plan::{Action, Plan, SYSTEMD_UNIT_DIR};
use hearth_hostops::files::{self, FileError};
use hearth_hostops::offline;
use hearth_hostops::passwd;
use hearth_hostops::users;

use std::collections::BTreeSet;

/// `Ok` for a result that failed only because the unit does not exist.
fn missing_is_fine(
    unit: &str,
    op: &str,
    result: Result<(), hearth_hostops::systemd::SystemdError>,
) -> Result<(), StepError> {
    match result {
        Err(e) if e.is_no_such_unit() => {
            tracing::info!(unit, "{op}: no such unit; nothing to do");
            Ok(())
        }
        other => other.on(unit),
    }
}

/// The service steps a plan's disruption asks for (none for `None` and `Reboot`).
pub fn service_steps(p: &Plan) -> Vec<ServiceStep> {
    match &p.disruption.outcome {
        DisruptionOutcome::Services { steps } => steps.clone(),
        _ => Vec::new(),
    }
}

/// The units the admin's node-disruption policies reload or restart (`serviceName`).
fn policy_units(policies: &DisruptionPolicies) -> BTreeSet<&str> {
    use hearth_config::model::PolicyAction;
    policies
        .files
        .iter()
        .flat_map(|f| f.actions.iter())
        .chain(policies.units.iter().flat_map(|u| u.actions.iter()))
        .chain(policies.ssh_key.iter().flatten())
        .filter_map(|a| match a {
            PolicyAction::Reload { service } | PolicyAction::Restart { service } => {
                Some(service.as_str())
            }
            _ => None,
        })
        .collect()
}

impl Agent {
    /// Writes a managed path: keeps its original first when hearth takes it over.
    fn take_over(
        &self,
        path: &str,
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), FileError> {
        if !managed_before.contains(path) && preexisting.contains(path) {
            files::save_original_once(&self.root, path)?;
        }
        Ok(())
    }

    fn write(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        owner: (u32, u32),
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), StepError> {
        if files::is_current(&self.root, path, content, mode, owner).on(path)? {
            return Ok(());
        }
        self.take_over(path, managed_before, preexisting).on(path)?;
        // The directory's fsync waits for the end of the steps: see `sync_written_dirs`.
        self.root
            .write_atomic_batched(path, content, mode, Some(owner), &self.written_dirs)
            .on(path)
    }

    /// Makes the steps' renames durable: one fsync per directory the steps wrote into (not one
    /// per file). Called once every step of a plan ran and before the journal records anything
    /// past them (`Done`, `Rebooting`, `RollingBack`, `Degraded`): until then the journal says
    /// the phase is still to run, and a crash re-runs it from its start, so a rename lost in a
    /// crash is written again. Returns how many directories were synced.
    pub(super) fn sync_written_dirs(&self) -> Result<usize, hearth_hostops::fs::FsError> {
        let n = self.written_dirs.sync(&self.root)?;
        tracing::debug!(directories = n, "directories fsynced");
        Ok(n)
    }

    fn release(&self, path: &str) -> Result<(), StepError> {
        files::restore_original(&self.root, path)
            .map(|_| ())
            .on(path)
    }

    /// Executes one action of a plan; a failure names the action, its object and the cause.
    pub(super) async fn execute(
        &self,
        action: &Action,
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), StepError> {
        self.execute_action(action, managed_before, preexisting)
            .await
            .map_err(|e| e.in_action(action))
    }

    async fn execute_action(
        &self,
        action: &Action,
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), StepError> {
        match action {
            Action::WriteFile { file } => {
                let content = files::file_content(file).on(&file.path)?;
                let owner =
                    passwd::resolve_owner(&self.root, &file.user, &file.group).on(&file.path)?;
                self.write(
                    &file.path,
                    &content,
                    files::file_mode(file),
                    owner,
                    managed_before,
                    preexisting,
                )
            }
            Action::DeleteFile { path } => self.release(path),
            Action::WriteUnit { name, contents } => self.write(
                &unit_path(name),
                contents.as_bytes(),
                0o644,
                (0, 0),
                managed_before,
                preexisting,
            ),
            Action::DeleteUnit { name } => self.release(&unit_path(name)),
            Action::WriteDropin {
                unit,
                name,
                contents,
            } => self.write(
                &dropin_path(unit, name),
                contents.as_bytes(),
                0o644,
                (0, 0),
                managed_before,
                preexisting,
            ),
            Action::DeleteDropin { unit, name } => {
                self.release(&dropin_path(unit, name))?;
                let _ = self
                    .root
                    .remove_empty_dir(&format!("{SYSTEMD_UNIT_DIR}/{unit}.d"));
                Ok(())
            }
            Action::DaemonReload => match &self.units {
                Units::Online(sd) => sd.daemon_reload().await.on("systemd"),
                Units::Offline => Ok(()),
            },
            Action::EnableUnit { name } => match &self.units {
                Units::Online(sd) => sd.enable(std::slice::from_ref(name)).await.on(name),
                Units::Offline => offline::enable(&self.root, name).on(name),
            },
            // Disabling a unit that does not exist leaves it not enabled, and a unit that does
            // not exist has no preset to go back to (as the MCO): nothing to do.
            Action::DisableUnit { name } => match &self.units {
                Units::Online(sd) => missing_is_fine(
                    name,
                    "disable",
                    sd.disable(std::slice::from_ref(name)).await,
                ),
                Units::Offline => offline::disable(&self.root, name).on(name),
            },
            Action::PresetUnit { name } => match &self.units {
                Units::Online(sd) => {
                    missing_is_fine(name, "preset", sd.preset(std::slice::from_ref(name)).await)
                }
                Units::Offline => match offline::preset(&self.root, name) {
                    Err(hearth_hostops::offline::OfflineError::NoSuchUnit { .. }) => Ok(()),
                    other => other.on(name),
                },
            },
            Action::MaskUnit { name } => {
                let path = unit_path(name);
                if self.root.read_link(&path).on(&path)?.as_deref() != Some("/dev/null") {
                    self.take_over(&path, managed_before, preexisting)
                        .on(&path)?;
                    self.root.symlink_atomic(&path, "/dev/null").on(&path)?;
                }
                match &self.units {
                    Units::Online(sd) => sd.daemon_reload().await.on("systemd"),
                    Units::Offline => Ok(()),
                }
            }
            Action::UnmaskUnit { name } => {
                let path = unit_path(name);
                if self.root.read_link(&path).on(&path)?.as_deref() == Some("/dev/null") {
                    self.release(&path)?;
                }
                Ok(())
            }
            Action::WriteSshKeys { user, keys } => {
                users::write_ssh_keys(&self.root, user, keys, self.ssh_layout)
                    .map(|_| ())
                    .on(user)
            }
            Action::SetPasswordHash { user, hash } => {
                users::set_password_hash(&self.root, user, hash.as_deref())
                    .map(|_| ())
                    .on(user)
            }
            Action::KernelArguments { .. }
            | Action::KernelType { .. }
            | Action::OsImage { .. }
            | Action::Extensions { .. } => Err(StepError::new(
                "",
                "the OS",
                "OS-level changes need an OS backend (ostree or rpm-ostree)",
            )),
        }
    }

    /// Runs one service step of plan `p`. `Ok(Some(warning))` when it was skipped and the
    /// admin must hear of it: a unit that does not exist on this host, named by the built-in
    /// policies (crio on a host without it). A unit named by the admin's own policies
    /// (`policies`) that does not exist is an error: the change would not take effect (a typo
    /// in a `serviceName`). A unit the plan itself removes is skipped quietly.
    pub(super) async fn service_step(
        &self,
        step: &ServiceStep,
        p: &Plan,
        policies: &DisruptionPolicies,
    ) -> Result<Option<String>, StepError> {
        let failed = |unit: &str, cause: &dyn std::fmt::Display| {
            StepError::new(step.to_string(), unit, cause)
        };
        let Units::Online(sd) = &self.units else {
            return Ok(None);
        };
        // Waiting for a unit's job can take long (a slow start): the watchdog is fed meanwhile.
        let _busy = crate::watchdog::busy("waiting for a unit job", crate::watchdog::UNIT_JOB_MAX);
        match step {
            ServiceStep::Drain => {
                tracing::info!(
                    "drain requested: no workload scheduler is attached; nothing to drain"
                );
                Ok(None)
            }
            ServiceStep::DaemonReload => sd
                .daemon_reload()
                .await
                .map(|()| None)
                .map_err(|e| failed("systemd", &e)),
            ServiceStep::Reload { unit } | ServiceStep::Restart { unit } => {
                if sd
                    .unit_file_state(unit)
                    .await
                    .map_err(|e| failed(unit, &e))?
                    .is_none()
                {
                    let removed = p
                        .actions
                        .iter()
                        .any(|a| matches!(a, Action::DeleteUnit { name } if name == unit));
                    if removed {
                        // A unit the plan removed has nothing to reload or restart.
                        tracing::info!(unit = %unit, "{step}: the unit no longer exists; skipped");
                        return Ok(None);
                    }
                    if policy_units(policies).contains(unit.as_str()) {
                        return Err(failed(
                            unit,
                            &format_args!(
                                "unit {unit} does not exist on this host, and the \
                                 node-disruption policy names it (serviceName): the change \
                                 would not take effect; fix the policy or install the unit"
                            ),
                        ));
                    }
                    let warning = format!(
                        "{step} skipped: unit {unit} does not exist on this host (the built-in \
                         node-disruption policy names it)"
                    );
                    tracing::warn!(unit = %unit, "{warning}");
                    return Ok(Some(warning));
                }
                match step {
                    ServiceStep::Reload { .. } => sd.reload(unit).await,
                    _ => sd.restart(unit).await,
                }
                .map(|()| None)
                .map_err(|e| failed(unit, &e))
            }
        }
    }
}
