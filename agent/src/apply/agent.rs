//! The agent's handle on one host ([`Agent`]): its root, how it reaches systemd ([`Units`]),
//! its OS backend, opening it ([`Agent::new`]), and checking the host against a config
//! ([`Agent::verify`]). The phases of an apply add their methods to it in the other files of
//! `apply`.

use super::error::AgentError;
use crate::journal::Journal;
use hearth_config::ignition::Config;
use hearth_config::model::MachineConfigSpec;
use hearth_hostops::fs::{DirSyncs, Root};
use hearth_hostops::os::{NoneBackend, OsBackend};
use hearth_hostops::systemd::Systemd;
use hearth_hostops::users::SshKeyLayout;
use hearth_hostops::verify::{self, Mismatch, OfflineUnitStates, VerifyOptions};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The default system bus.
pub const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

/// How the agent reaches systemd.
#[derive(Debug)]
pub enum Units {
    /// A running systemd over D-Bus.
    Online(Systemd),
    /// An offline image root: enablement through symlinks, no daemon to reload or restart.
    Offline,
}

/// The agent's handle on one host.
#[derive(Debug)]
pub struct Agent {
    pub(super) root: Root,
    pub(super) root_path: PathBuf,
    pub(super) units: Units,
    pub(super) bus: Option<String>,
    pub(super) ssh_layout: SshKeyLayout,
    pub(super) os: OsBackend,
    /// Whether this process cleaned the temporaries of its own state yet (see
    /// [`Agent::lock`]).
    pub(super) cleaned_state: std::sync::atomic::AtomicBool,
    /// Whether this process recorded the booted OS in the journal yet (see
    /// [`Agent::note_booted_os`]).
    pub(super) noted_os: std::sync::atomic::AtomicBool,
    /// Directories the steps wrote into, fsynced once each before the journal records the
    /// steps (see `execute.rs`).
    pub(super) written_dirs: DirSyncs,
}

/// Why an offline image root has no OS backend.
pub const OFFLINE_OS_REASON: &str = "an offline image root cannot take OS-level changes";

/// Every path a config manages (files, unit files, drop-ins, masks).
pub fn managed_paths(config: &Config) -> BTreeSet<String> {
    hearth_config::paths::written(config)
        .into_iter()
        .map(|w| w.path)
        .collect()
}

impl Agent {
    /// A handle on the host whose root is `root`, with systemd on `bus` (`None`: an offline
    /// image root).
    pub async fn new(root: &Path, bus: Option<&str>) -> Result<Agent, AgentError> {
        let root_handle = Root::open(root)?;
        let units = match bus {
            Some(address) => Units::Online(Systemd::connect_with_root(address, root).await?),
            None => Units::Offline,
        };
        let ssh_layout = SshKeyLayout::detect(&root_handle).unwrap_or_default();
        let os = match &units {
            Units::Offline => OsBackend::None(NoneBackend::new(OFFLINE_OS_REASON)),
            Units::Online(_) => {
                match OsBackend::detect_on_bus(root, bus.unwrap_or(SYSTEM_BUS)).await {
                    Ok(backend) => backend,
                    Err(e) => OsBackend::None(NoneBackend::new(e.to_string())),
                }
            }
        };
        tracing::debug!(backend = os.kind(), "OS backend");
        Ok(Agent {
            root: root_handle,
            root_path: root.to_path_buf(),
            units,
            bus: bus.map(str::to_string),
            ssh_layout,
            os,
            cleaned_state: std::sync::atomic::AtomicBool::new(false),
            noted_os: std::sync::atomic::AtomicBool::new(false),
            written_dirs: DirSyncs::new(),
        })
    }

    /// The OS backend (kernel arguments, kernel type, OS images) this host has.
    pub fn os(&self) -> &OsBackend {
        &self.os
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Whether this is an offline image root.
    pub fn is_offline(&self) -> bool {
        matches!(self.units, Units::Offline)
    }
    /// The current config's spec from the journal (the default spec when there is none).
    pub(super) fn current_spec(j: &Journal) -> MachineConfigSpec {
        j.current
            .as_ref()
            .map(|c| c.spec.clone())
            .unwrap_or_default()
    }

    /// Checks the host against `config`.
    pub async fn verify(&self, config: &Config) -> Vec<Mismatch> {
        let opts = VerifyOptions {
            ssh_layout: self.ssh_layout,
        };
        match &self.units {
            Units::Offline => {
                verify::verify_with(
                    &self.root,
                    &OfflineUnitStates::new(&self.root),
                    config,
                    &opts,
                )
                .mismatches
            }
            Units::Online(sd) => {
                let names = verify::units_to_query(config);
                let states: HashMap<String, String> =
                    match verify::unit_file_states(sd.connection(), &names).await {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot read unit states");
                            HashMap::new()
                        }
                    };
                verify::verify_with(&self.root, &states, config, &opts).mismatches
            }
        }
    }
}
