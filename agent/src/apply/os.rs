//! OS-level changes (kernel arguments, kernel type, OS image, extensions): what a plan asks
//! of the OS backend, adopting what is already booted, staging one new deployment, and after
//! its boot checking that it is the booted one and healthy (or rolling it back).

use super::agent::{Agent, Units};
use super::error::AgentError;
use super::options::{Options, FORCE_FILE};
use super::outcome::Outcome;
use super::reboot::{boot_id, REBOOT_MARKER};
use super::step::{OnObject, StepError};
use crate::boot_verdict::{Verdict, BOOT_COMPLETE_UNIT};
use crate::journal::{Journal, NamedConfig, OsProgress};
use crate::state::Event;
use hearth_config::model::MachineConfigSpec;
use hearth_config::plan::Action;
use hearth_hostops::os::{bootcount, OsChange, OsConfig, OsExpectation};
use hearth_hostops::systemd::Systemd;

/// The step that judges the boot into a new deployment.
const BOOT_CHECK: &str = "check the boot into the new deployment";

/// The unit that finalizes a staged ostree deployment at shutdown.
pub const FINALIZE_UNIT: &str = "ostree-finalize-staged.service";

/// The unit that puts ostree's boot entries on the ESP at boot and at shutdown (boot counting;
/// `units/hearth-boot-entries.service`).
pub const BOOT_ENTRIES_UNIT: &str = "hearth-boot-entries.service";

pub(super) fn is_os_action(a: &Action) -> bool {
    matches!(
        a,
        Action::KernelArguments { .. }
            | Action::KernelType { .. }
            | Action::OsImage { .. }
            | Action::Extensions { .. }
    )
}

/// The OS fields of a spec (kernel arguments, kernel type, OS image, extensions), without files
/// and units: what OS changes are planned from.
pub(super) fn os_fields(spec: &MachineConfigSpec) -> MachineConfigSpec {
    MachineConfigSpec {
        kernel_arguments: spec.kernel_arguments.clone(),
        kernel_type: spec.kernel_type,
        os_image_url: spec.os_image_url.clone(),
        extensions: spec.extensions.clone(),
        ..MachineConfigSpec::default()
    }
}

/// What came of dropping a pending OS deployment.
enum Dropped {
    /// Dropped, and the ESP followed (or boot counting is off).
    Yes,
    /// There was none.
    NothingPending,
    /// Dropped, but the ESP's entries could not be updated: why.
    NotSynced(String),
    /// Not dropped: why.
    Failed(String),
}

/// The systemd unit this process runs in (`hearth-agent.service`), from `/proc/self/cgroup`.
fn own_unit() -> Option<String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // `0::/system.slice/x.service` (unified) or `1:name=systemd:/system.slice/x.service`
    // (hybrid): the unit is the last component that names one.
    cgroup.lines().find_map(|l| {
        l.splitn(3, ':')
            .nth(2)?
            .rsplit('/')
            .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
            .map(str::to_string)
    })
}

impl Agent {
    /// The OS change a plan's OS actions make, or why this host cannot make it (checked before
    /// anything is changed).
    pub(super) fn os_change(&self, actions: &[Action]) -> Result<Option<OsChange>, StepError> {
        const STEP: &str = "plan the OS change";
        if actions.is_empty() {
            return Ok(None);
        }
        if let Some(reason) = self.os.unsupported_reason() {
            let cause = if self.is_offline() {
                reason.to_string()
            } else {
                format!("this host has no OS backend that can make them ({reason})")
            };
            return Err(StepError::new(STEP, "the OS", cause));
        }
        // On an ostree host every OS operation runs in hearth-ostree-helper: without it, refuse
        // now, before any step, rather than at staging after the files and units.
        if let hearth_hostops::os::OsBackend::Ostree(o) = &self.os {
            o.helper()
                .map_err(|e| StepError::new(STEP, "hearth-ostree-helper", e))?;
        }
        let change = self
            .os
            .change_from_actions(actions)
            .on(self.os.kind())
            .map_err(|e| StepError {
                step: STEP.into(),
                ..e
            })?;
        Ok((!change.is_empty()).then_some(change))
    }

    /// The first config of a host (hearth takes it over, from the MCO or from an installer that
    /// set kernel arguments): what the booted deployment already has of the config's OS fields
    /// is taken as the starting point, so no argument the former manager appended is appended
    /// twice and an image already booted is not deployed again. Arguments adopted this way are recorded as hearth's (a later
    /// config may remove them, as the MCO would).
    pub(super) async fn adopt_booted_os(&self, desired: &MachineConfigSpec) -> MachineConfigSpec {
        let nothing = os_fields(&MachineConfigSpec::default());
        let wants_os = !desired.kernel_arguments.is_empty()
            || !desired.os_image_url.is_empty()
            || desired.kernel_type != hearth_config::model::KernelType::Default;
        if !wants_os || self.os.unsupported_reason().is_some() {
            return nothing;
        }
        let booted = match self.os.status().await {
            Ok(status) => status.booted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the booted deployment; planning the OS change from nothing");
                return nothing;
            }
        };
        // The arguments a former manager (the MCO, an installer) appended in the config's order
        // end the booted list: adopt the longest start of the config's list found there, so the
        // plan (order-sensitive) appends only the rest.
        // Entries are kept as written ("a=1 b=2"); the booted command line holds arguments.
        let wanted = hearth_config::kargs::split_kernel_arguments(&desired.kernel_arguments);
        let len = hearth_config::kargs::booted_prefix_len(&booted.kernel_args, &wanted);
        let mut adopted = wanted[..len].to_vec();
        if !adopted.is_empty() {
            match self.os.adopt_kernel_arguments(&adopted).await {
                Ok(_) => {
                    tracing::info!(kargs = %adopted.join(" "), "kernel arguments already booted adopted")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot record the adopted kernel arguments");
                    adopted.clear();
                }
            }
        }
        MachineConfigSpec {
            kernel_arguments: adopted,
            kernel_type: booted.kernel_type,
            os_image_url: if booted.image == desired.os_image_url.trim() {
                desired.os_image_url.clone()
            } else {
                String::new()
            },
            ..MachineConfigSpec::default()
        }
    }

    /// Records the booted OS deployment (its image and the image's digest) in the journal, once
    /// per agent process (a reboot starts a new one) unless `again` (after a boot into a new
    /// deployment). `true` when the journal changed. Hosts without an OS backend have none;
    /// a backend that cannot say keeps the last record and logs why.
    pub(super) async fn note_booted_os(&self, j: &mut Journal, again: bool) -> bool {
        use std::sync::atomic::Ordering;
        if self.os.unsupported_reason().is_some()
            || (!again && self.noted_os.swap(true, Ordering::SeqCst))
        {
            return false;
        }
        let booted = match self.os.status().await {
            Ok(status) => status.booted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the booted OS deployment");
                return false;
            }
        };
        let os = hearth_api::BootedOs {
            deployment: booted.id.to_string(),
            image: booted.image,
            image_digest: booted.image_digest,
            version: booted.version,
        };
        if j.os.as_ref() == Some(&os) {
            return false;
        }
        tracing::info!(deployment = %os.deployment, image = %os.image, digest = ?os.image_digest, "booted OS");
        j.os = Some(os);
        true
    }

    /// Stages the OS change as one new deployment; what the boot must show.
    pub(super) async fn stage_os(&self, change: &OsChange) -> Result<OsProgress, StepError> {
        tracing::info!(%change, backend = self.os.kind(), "staging the OS change");
        let failed = |object: &str, cause: &dyn std::fmt::Display| {
            StepError::new(format!("stage the OS change: {change}"), object, cause)
        };
        // Pulling an image can take long: the watchdog is fed meanwhile.
        let _busy = crate::watchdog::busy("staging the OS change", crate::watchdog::STAGE_MAX);
        // With boot counting the ESP follows ostree before a new deployment (libostree's
        // clean-up after the staging removes the boot version the ESP's entries name when it
        // lags behind). `os.json` is read once for the whole staging.
        let counting = self.boot_counting();
        if let Err(why) = self.sync_boot_entries_with(counting.as_ref()) {
            return Err(failed(
                BOOT_ENTRIES_UNIT,
                &format_args!(
                    "{why}; nothing was staged (with boot counting the ESP must follow ostree \
                     before a new deployment: see `journalctl -u {BOOT_ENTRIES_UNIT}`)"
                ),
            ));
        }
        // A container image's pull shows in the node's status while it runs (a pull a crash
        // interrupted does not).
        crate::os_pull::clear(&self.root);
        let progress = crate::os_pull::sink(&self.root_path);
        let staged = self.os.stage_with_progress(change, Some(progress)).await;
        crate::os_pull::clear(&self.root);
        let staged = staged.map_err(|e| failed(self.os.kind(), &e))?;
        if staged.finalization == hearth_hostops::os::Finalization::AtShutdown {
            // The staged deployment becomes bootable only when ostree-finalize-staged.service
            // runs its stop action at shutdown. Its path unit starts it when the staging file
            // appears, but a reboot asked for right after staging can cancel that start job:
            // the host then boots the old deployment. Start it now and wait (as newer
            // libostree does itself).
            if let Units::Online(sd) = &self.units {
                if let Err(e) = sd.start(FINALIZE_UNIT).await {
                    self.cancel_pending_os().await;
                    return Err(failed(
                        FINALIZE_UNIT,
                        &format_args!(
                            "the deployment was staged, but {FINALIZE_UNIT} (which finalizes \
                             it at shutdown) cannot be started, so it was dropped again: {e}"
                        ),
                    ));
                }
            }
        }
        if let Err(why) = self.prepare_boot_counting(&staged, counting.as_ref()).await {
            self.cancel_pending_os().await;
            return Err(failed(
                BOOT_ENTRIES_UNIT,
                &format_args!("the deployment was staged, but {why}, so it was dropped again"),
            ));
        }
        for skipped in &staged.skipped_deletes {
            tracing::warn!(
                karg = %skipped.argument,
                reason = %skipped.reason,
                "kernel argument not deleted"
            );
        }
        tracing::info!(
            deployment = %staged.deployment.id,
            from = %staged.from,
            kargs = %staged.deployment.kernel_args.join(" "),
            "OS deployment staged"
        );
        Ok(OsProgress {
            change: change.to_string(),
            expect: staged.expectation(),
            from: staged.from.clone(),
            rollback: None,
        })
    }

    /// On hosts with boot counting, after staging: the new deployment gets fresh tries (never
    /// the used-up counter of an earlier deployment of the same name); a deployment written
    /// now (external mode) reaches the ESP now; one finalized at shutdown reaches it through
    /// [`BOOT_ENTRIES_UNIT`]'s stop action, so that unit must be active (systemd runs the stop
    /// action of active units only). Why not, if it cannot be so.
    async fn prepare_boot_counting(
        &self,
        staged: &hearth_hostops::os::StagedDeployment,
        counting: Option<&bootcount::BootCounting>,
    ) -> Result<(), String> {
        let Some(counting) = counting else {
            return Ok(());
        };
        let removed = bootcount::forget(&self.root_path, counting, &staged.deployment.id)
            .map_err(|e| format!("its old boot entries cannot be removed from the ESP: {e}"))?;
        if !removed.is_empty() {
            tracing::info!(?removed, "old boot entries of the new deployment removed");
        }
        if staged.finalization != hearth_hostops::os::Finalization::AtShutdown {
            return self.sync_boot_entries_with(Some(counting));
        }
        // At shutdown ostree's finalization removes the boot version the ESP's entries name:
        // the sync right after it must not run out of room.
        let booted = self
            .os
            .status()
            .await
            .map_err(|e| format!("the OS deployments cannot be read: {e}"))?
            .booted
            .boot_checksum;
        let new = &staged.deployment.boot_checksum;
        bootcount::check_room(
            &self.root_path,
            counting,
            &staged.deployment.id,
            new,
            &[booted.as_str(), new.as_str()],
        )
        .map_err(|e| format!("its kernel would not fit on the ESP: {e}"))?;
        if let Units::Online(sd) = &self.units {
            sd.start(BOOT_ENTRIES_UNIT).await.map_err(|e| {
                format!(
                    "{BOOT_ENTRIES_UNIT} (which puts its boot entry on the ESP at shutdown) \
                     cannot be started: {e}"
                )
            })?;
        }
        Ok(())
    }

    /// Records the verdict on this boot for `hearth-boot-complete.service` (a host whose
    /// systemd the agent talks to; an offline root has no boot).
    pub(super) fn record_boot_verdict(&self, verdict: &Verdict) {
        if matches!(self.units, Units::Online(_)) {
            crate::boot_verdict::record(&self.root, verdict);
        }
    }

    /// Drops a staged (or pending) OS deployment, so that the next boot starts the booted one
    /// again. Failures are logged: the caller is already on a failure path.
    pub(super) async fn cancel_pending_os(&self) {
        match self.drop_pending_os(self.os.status().await).await {
            Dropped::Failed(e) => {
                tracing::warn!(error = %e, "cannot drop the pending OS deployment")
            }
            Dropped::NotSynced(e) => {
                tracing::warn!(error = %e, "pending OS deployment dropped, the ESP not updated")
            }
            Dropped::Yes | Dropped::NothingPending => {}
        }
    }

    /// [`Agent::cancel_pending_os`], saying what came of it.
    /// `status`: the OS status, read by the caller (which may need it too).
    async fn drop_pending_os(
        &self,
        status: Result<hearth_hostops::os::OsStatus, hearth_hostops::os::OsError>,
    ) -> Dropped {
        let status = match status {
            Ok(s) => s,
            Err(e) => return Dropped::Failed(format!("the OS deployments cannot be read: {e}")),
        };
        if status.pending.is_none() {
            return Dropped::NothingPending;
        }
        match self.os.rollback().await {
            Ok(outcome) => tracing::info!(?outcome, "pending OS deployment dropped"),
            Err(e) => return Dropped::Failed(e.to_string()),
        }
        match self.sync_boot_entries() {
            Ok(()) => Dropped::Yes,
            Err(e) => Dropped::NotSynced(e),
        }
    }

    /// Waits for systemd to finish booting and judges the boot (see
    /// [`hearth_hostops::os::HealthCheck`]): `Ok` when the system is `running`, or `degraded`
    /// only by ignored units; otherwise why not, naming each failed unit with its log.
    async fn boot_health(&self, check: &hearth_hostops::os::HealthCheck) -> Result<(), StepError> {
        let Units::Online(sd) = &self.units else {
            return Ok(());
        };
        let timeout = std::time::Duration::from_secs(check.timeout_seconds);
        let _busy = crate::watchdog::busy(
            "the boot health check",
            timeout + std::time::Duration::from_secs(60),
        );
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last;
        loop {
            match sd.system_state().await {
                Ok(state) => match state.as_str() {
                    "running" => return Ok(()),
                    "degraded" => return self.failed_units_verdict(sd, check).await,
                    "maintenance" | "stopping" | "offline" => {
                        return Err(StepError::new(
                            BOOT_CHECK,
                            "the system state",
                            format_args!("the system is in state {state} after the boot"),
                        ))
                    }
                    _ => {
                        if self.boot_waits_only_for_this_agent(sd).await {
                            // Run from a unit the boot waits for (a oneshot `apply`): the boot
                            // cannot finish before this check does, so judge it by what failed
                            // so far.
                            return self.failed_units_verdict(sd, check).await;
                        }
                        last = state;
                    }
                },
                Err(e) => last = format!("unreadable ({e})"),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(StepError::new(
                    BOOT_CHECK,
                    "the system state",
                    format_args!(
                        "the boot did not finish within {} s (system state: {last})",
                        check.timeout_seconds
                    ),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// `Ok` unless units other than the ignored ones failed; then each with its state and log.
    async fn failed_units_verdict(
        &self,
        sd: &Systemd,
        check: &hearth_hostops::os::HealthCheck,
    ) -> Result<(), StepError> {
        let failed: Vec<String> = sd
            .failed_units()
            .await
            .map_err(|e| {
                StepError::new(
                    BOOT_CHECK,
                    "systemd",
                    format_args!("cannot list the failed units: {e}"),
                )
            })?
            .into_iter()
            .filter(|u| !check.ignore_failed_units.contains(u))
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        let mut why = Vec::new();
        for unit in &failed {
            why.push(sd.describe_unit(unit).await);
        }
        Err(StepError::new(
            BOOT_CHECK,
            failed.join(", "),
            format_args!(
                "the boot ended degraded: {} failed: {}",
                failed.join(", "),
                why.join("; ")
            ),
        ))
    }

    /// Whether the only jobs systemd is still running are the start of the unit this agent
    /// runs in (`/proc/self/cgroup`) and of the unit that waits for its verdict
    /// ([`BOOT_COMPLETE_UNIT`], with boot counting): everything else left waits for them.
    async fn boot_waits_only_for_this_agent(&self, sd: &Systemd) -> bool {
        let own = own_unit();
        match sd.running_jobs().await {
            Ok(jobs) => {
                !jobs.is_empty()
                    && jobs
                        .iter()
                        .all(|u| Some(u) == own.as_ref() || u == BOOT_COMPLETE_UNIT)
            }
            Err(_) => false,
        }
    }

    /// The sentence that says the boot loader gave up on `expected`'s deployment (its boot
    /// counter on the ESP has no try left), when it did.
    fn boot_loader_fell_back(&self, expected: &OsExpectation) -> Option<String> {
        let deployment = expected.deployment.as_ref()?;
        let counting = OsConfig::load(&self.root_path).ok()?.boot_counting?;
        match bootcount::counter(&self.root_path, &counting, deployment) {
            Ok(Some(c)) if c.exhausted() => Some(format!(
                "the boot loader fell back: deployment {deployment} failed to boot {} times \
                 (its boot counter on the ESP has no try left)",
                c.done
            )),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the boot counters on the ESP");
                None
            }
        }
    }

    /// Boot counting, when `/etc/hearth/os.json` turns it on.
    fn boot_counting(&self) -> Option<bootcount::BootCounting> {
        OsConfig::load(&self.root_path)
            .ok()
            .and_then(|c| c.boot_counting)
    }

    /// Puts ostree's boot entries on the ESP again after the agent changed the deployments
    /// (hosts with boot counting; [`BOOT_ENTRIES_UNIT`] does it at every boot and shutdown
    /// too). Why not, if it failed (logged too).
    pub(super) fn sync_boot_entries(&self) -> Result<(), String> {
        self.sync_boot_entries_with(self.boot_counting().as_ref())
    }

    /// [`Agent::sync_boot_entries`] with `os.json`'s boot counting already read.
    fn sync_boot_entries_with(
        &self,
        counting: Option<&bootcount::BootCounting>,
    ) -> Result<(), String> {
        let Some(counting) = counting else {
            return Ok(());
        };
        match bootcount::sync(&self.root_path, counting) {
            Ok(report) => {
                tracing::info!(?report, "boot entries synced to the ESP");
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot sync the boot entries to the ESP");
                Err(format!("the ESP's boot entries cannot be updated: {e}"))
            }
        }
    }

    /// After the boot that should have started a new OS deployment: it must be the booted one,
    /// with its kernel arguments, and the boot must be healthy. `None` when it is (the caller
    /// goes on verifying files and units); otherwise how the sync ended: `Degraded`, or
    /// `Rebooting` back into the previous deployment.
    pub(super) async fn check_os_boot(
        &self,
        j: &mut Journal,
        desired: &NamedConfig,
        os: &OsProgress,
    ) -> Result<Option<Outcome>, AgentError> {
        let differences = match self.os.verify_booted(&os.expect).await {
            Ok(d) => d,
            Err(e) => vec![format!("cannot read the booted deployment: {e}")],
        };
        if !differences.is_empty() {
            // Not what was staged (the boot loader fell back, or the deployment was never
            // finalized): report it, and make sure the next boot does not surprise anyone.
            let fell_back = self.boot_loader_fell_back(&os.expect);
            let status = self.os.status().await;
            let booted_new = match (&status, &os.expect.deployment) {
                (Ok(s), Some(d)) => s.booted.id == *d,
                _ => false,
            };
            let dropped = self.drop_pending_os(status).await;
            let dropped_text = match &dropped {
                Dropped::Yes => "the deployment was dropped".to_string(),
                Dropped::NothingPending => "no deployment was left to drop".to_string(),
                Dropped::NotSynced(e) => {
                    format!("the deployment was dropped, but {e}")
                }
                Dropped::Failed(e) => format!(
                    "dropping the deployment failed ({e}); the boot loader does not try it \
                     again (no try left)"
                ),
            };
            let mut reason = match fell_back {
                Some(why) => format!(
                    "after the reboot the host does not run the OS change of {} ({}): {why}; \
                     {dropped_text}, and {} is not staged again until a new config or a forced \
                     retry (`hearth node force`, or {FORCE_FILE}) asks for it",
                    desired.name, os.change, desired.name
                ),
                None => format!(
                    "after the reboot the host does not run the OS change of {} ({}): {}",
                    desired.name,
                    os.change,
                    differences.join("; ")
                ),
            };
            // The new deployment booted, but not as staged (its kernel arguments): not good.
            // With boot counting it must not be marked good at a later boot either: the
            // previous deployment is made the default again.
            if booted_new {
                self.record_boot_verdict(&Verdict::Bad(reason.clone()));
                if self.boot_counting().is_some() {
                    match self.os.rollback().await {
                        Ok(_) => {
                            reason.push_str(
                                "; the previous deployment is the default again at the next boot \
                                 (this one is not marked good)",
                            );
                            if let Err(e) = self.sync_boot_entries() {
                                reason.push_str(&format!(" ({e})"));
                            }
                        }
                        Err(e) => reason.push_str(&format!(
                            "; the previous deployment cannot be made the default again: {e}"
                        )),
                    }
                }
            }
            tracing::error!(%reason, "OS verification failed");
            return self.end_failed_os(j, desired, reason).map(Some);
        }
        self.note_booted_os(j, true).await;
        let config = OsConfig::load(&self.root_path).unwrap_or_default();
        let Err(why) = self.boot_health(&config.health).await else {
            tracing::info!(deployment = ?os.expect.deployment, "the new OS deployment booted healthy");
            self.record_boot_verdict(&Verdict::Good);
            return Ok(None);
        };
        let deployment = os
            .expect
            .deployment
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_else(|| "the new deployment".into());
        let mut why = format!(
            "the new OS deployment {deployment} of {} booted unhealthy: {}",
            desired.name, why.cause
        );
        tracing::error!(reason = %why, "OS health check failed");
        self.record_boot_verdict(&Verdict::Bad(why.clone()));
        if !config.health.rollback {
            let reason = format!(
                "{why} (automatic rollback is off in {})",
                hearth_hostops::os::CONFIG_PATH
            );
            return self.end_failed_os(j, desired, reason).map(Some);
        }
        match self.os.rollback().await {
            Ok(outcome) => {
                tracing::warn!(?outcome, "rolled back to the previous deployment");
                // The rollback's reboot goes on either way: without the sync, systemd-boot may
                // start the new deployment once more, which then uses up a try (the boot loader
                // goes back to the previous one after the last). Said in the reason.
                if let Err(e) = self.sync_boot_entries() {
                    why.push_str(&format!(
                        " ({e}: the boot loader may try the new deployment again first)"
                    ));
                }
            }
            Err(e) => {
                let reason = format!("{why}; the automatic rollback failed: {e}");
                return self.end_failed_os(j, desired, reason).map(Some);
            }
        }
        // Journal the rollback before the reboot: after it, the previous deployment must be
        // booted and the files and units go back to the current config.
        j.failed_os = Some(desired.name.clone());
        if let Some(p) = j.progress.as_mut() {
            p.os = Some(OsProgress {
                change: os.change.clone(),
                expect: OsExpectation {
                    deployment: Some(os.from.clone()),
                    kernel_args: None,
                },
                from: os.from.clone(),
                rollback: Some(why.clone()),
            });
            p.boot_id = boot_id();
            p.reboot_requests = 0;
        }
        j.transition(
            Event::Resume,
            Some(format!("{why}; rolling back to deployment {}", os.from)),
        )?;
        j.save(&self.root)?;
        self.root
            .write_atomic(REBOOT_MARKER, desired.name.as_bytes(), 0o644, None)
            .map_err(AgentError::Fs)?;
        Ok(Some(self.request_reboot(j, &Options::default()).await?))
    }

    /// Ends an OS boot that did not go as staged: `Degraded`, and the config is not staged
    /// again (no reboot loop) until another one or the force file asks.
    fn end_failed_os(
        &self,
        j: &mut Journal,
        desired: &NamedConfig,
        reason: String,
    ) -> Result<Outcome, AgentError> {
        j.os_base = None;
        j.failed_os = Some(desired.name.clone());
        self.end_failed(j, Event::BootVerificationFailed, reason)
    }
}
