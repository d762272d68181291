//! systemd over D-Bus: unit files (enable, disable, mask, preset), unit jobs (start, restart,
//! reload, stop) whose result is checked, and states.
//!
//! [`Systemd`] holds a [`zbus::Connection`] to a system bus and the root directory of the same
//! host: `unix:path=/run/dbus/system_bus_socket` and `/` in production, a test container's bus
//! and root in tests. The root is only used to read the journal of a unit that failed
//! (`journalctl --root=ROOT`).
//!
//! # Jobs
//!
//! [`Systemd::start`], [`Systemd::restart`], [`Systemd::reload`] and [`Systemd::stop`] queue a
//! real job (mode `replace`) and wait for it to finish: the match rule for the Manager's
//! `JobRemoved` signal is installed *before* `StartUnit`/`RestartUnit`/... is called, so the
//! signal of a job that finishes before the method reply arrives is not lost; the signal whose
//! job path is the one returned by the call carries the job result. `done` is success; anything
//! else (`failed`, `dependency`, `timeout`, `canceled`, `skipped`, ...) is
//! [`SystemdError::UnitFailed`], with the unit's `ActiveState`, `SubState`, `Result` and
//! `ExecMainStatus` and the last lines of its journal. A job that does not finish within the
//! job timeout ([`DEFAULT_JOB_TIMEOUT`], see [`Systemd::with_job_timeout`]) is
//! [`SystemdError::Timeout`]; the job itself is left to systemd.
//!
//! A `Type=simple` service's start job is `done` as soon as the process is forked: a service
//! that exits with an error a moment later is not a failed *job*. Use `Type=oneshot`,
//! `Type=notify` or `Type=exec` where the start itself must be checked, or look at
//! [`Systemd::active_state`] afterwards.
//!
//! # Unit files
//!
//! [`Systemd::enable`], [`Systemd::disable`], [`Systemd::mask`], [`Systemd::unmask`] and
//! [`Systemd::preset`] call the Manager's `*UnitFiles` methods (persistent, not runtime; `force`
//! where the method has it), which edit the symlinks in `/etc/systemd/system` exactly as
//! `systemctl` does. Like the D-Bus methods (and unlike `systemctl`), they do not reload the
//! manager: call [`Systemd::daemon_reload`] after changing unit files or their enablement and
//! before starting units. Enabling a unit without `[Install]` rules is not an error (systemd
//! answers `carries_install_info = false`); it is logged.

use std::fmt;
use std::future::poll_fn;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use zbus::message::Type as MessageType;
use zbus::{Connection, DBusError as _, MatchRule, Message, MessageStream};
use zbus::{OwnedObjectPath, OwnedVariant};

/// The system bus of the machine hearth runs on.
pub const SYSTEM_BUS_ADDRESS: &str = "unix:path=/run/dbus/system_bus_socket";
/// How long a unit job may take before [`SystemdError::Timeout`] (`systemctl`'s default job
/// timeout is 90 s too).
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(90);
/// How many journal lines a [`SystemdError::UnitFailed`] carries.
pub const JOURNAL_LINES: usize = 20;
/// Timeout of single method calls (`Reload` can take a while on a big host).
const METHOD_TIMEOUT: Duration = Duration::from_secs(180);

const DEST: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const UNIT: &str = "org.freedesktop.systemd1.Unit";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// A unit job kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOp {
    /// `StartUnit`.
    Start,
    /// `RestartUnit`.
    Restart,
    /// `ReloadUnit`.
    Reload,
    /// `StopUnit`.
    Stop,
}

impl JobOp {
    fn method(self) -> &'static str {
        match self {
            JobOp::Start => "StartUnit",
            JobOp::Restart => "RestartUnit",
            JobOp::Reload => "ReloadUnit",
            JobOp::Stop => "StopUnit",
        }
    }
}

impl fmt::Display for JobOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobOp::Start => "start",
            JobOp::Restart => "restart",
            JobOp::Reload => "reload",
            JobOp::Stop => "stop",
        })
    }
}

/// A unit's state as systemd reports it on D-Bus, read after a job failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitStatus {
    /// `ActiveState`: `active`, `failed`, `inactive`, ...
    pub active_state: String,
    /// `SubState`: `running`, `exited`, `failed`, `dead`, ...
    pub sub_state: String,
    /// `Result` of the unit type's interface (`success`, `exit-code`, `signal`, `timeout`, ...),
    /// when the type has one.
    pub result: Option<String>,
    /// `ExecMainCode` of services: how the main process ended (`CLD_EXITED` = 1, `CLD_KILLED`
    /// = 2, `CLD_DUMPED` = 3; 0 when it has not ended, or never ran).
    pub exec_main_code: Option<i32>,
    /// `ExecMainStatus` of services: the exit status, or the signal number when killed.
    pub exec_main_status: Option<i32>,
}

impl fmt::Display for UnitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "state: {}/{}", self.active_state, self.sub_state)?;
        if let Some(result) = &self.result {
            write!(f, ", result: {result}")?;
        }
        match (self.exec_main_code, self.exec_main_status) {
            (Some(1), Some(status)) => write!(f, ", exit status {status}")?,
            (Some(2), Some(signal)) => write!(f, ", killed by signal {signal}")?,
            (Some(3), Some(signal)) => write!(f, ", dumped core on signal {signal}")?,
            _ => {}
        }
        Ok(())
    }
}

/// What went wrong talking to systemd.
#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    /// A unit job finished with a result other than `done`.
    #[error(
        "unit {unit} failed to {op} (job result: {job_result}; {state}){}",
        journal_suffix(.journal)
    )]
    UnitFailed {
        /// The unit.
        unit: String,
        /// What was asked of it.
        op: JobOp,
        /// The job result from `JobRemoved`: `failed`, `dependency`, `timeout`, `canceled`, ...
        job_result: String,
        /// The unit's state after the job.
        state: Box<UnitStatus>,
        /// The last [`JOURNAL_LINES`] lines of the unit's journal (`journalctl -o short`).
        journal: Vec<String>,
    },
    /// A D-Bus call failed (connecting, a method call, a signal subscription).
    #[error("{op}: {source}")]
    Bus {
        /// The operation (method and arguments).
        op: String,
        /// The error.
        source: zbus::Error,
    },
    /// A unit job did not finish in time.
    #[error("timed out after {after:?} waiting for the {op} job of {unit} to finish")]
    Timeout {
        /// The unit.
        unit: String,
        /// What was asked of it.
        op: JobOp,
        /// The job timeout.
        after: Duration,
    },
    /// There is no such unit (or unit file).
    #[error("no such unit: {unit} ({detail})")]
    NoSuchUnit {
        /// The unit name(s) asked for.
        unit: String,
        /// systemd's message.
        detail: String,
    },
    /// The unit is masked, so it cannot be started or enabled.
    #[error("unit {unit} is masked ({detail})")]
    Masked {
        /// The unit name(s) asked for.
        unit: String,
        /// systemd's message.
        detail: String,
    },
}

fn journal_suffix(journal: &[String]) -> String {
    if journal.is_empty() {
        return "; no log lines found".to_string();
    }
    let mut s = String::from("; last log lines:");
    for line in journal {
        s.push_str("\n  ");
        s.push_str(line);
    }
    s
}

impl SystemdError {
    fn from_bus(op: String, unit: &str, source: zbus::Error) -> SystemdError {
        let (name, detail) = match &source {
            zbus::Error::MethodError(name, detail, _) => (
                name.as_str().to_string(),
                detail.clone().unwrap_or_default(),
            ),
            zbus::Error::FDO(e) => (
                e.name().as_str().to_string(),
                e.description().unwrap_or_default().to_string(),
            ),
            _ => (String::new(), String::new()),
        };
        match name.as_str() {
            "org.freedesktop.systemd1.NoSuchUnit" | "org.freedesktop.DBus.Error.FileNotFound" => {
                SystemdError::NoSuchUnit {
                    unit: unit.to_string(),
                    detail,
                }
            }
            "org.freedesktop.systemd1.UnitMasked" => SystemdError::Masked {
                unit: unit.to_string(),
                detail,
            },
            _ => SystemdError::Bus { op, source },
        }
    }

    /// True for [`SystemdError::NoSuchUnit`].
    pub fn is_no_such_unit(&self) -> bool {
        matches!(self, SystemdError::NoSuchUnit { .. })
    }
}

/// A change systemd made to unit file symlinks: `(type, file, destination)` as in the
/// `*UnitFiles` replies (`symlink`, `unlink`, ...).
type Changes = Vec<(String, String, String)>;

/// The `JobRemoved` signal's body: id, job path, unit, result.
type JobRemoved = (u32, OwnedObjectPath, String, String);

/// One entry of a `ListUnits*` reply: name, description, load state, active state, sub state,
/// followed unit, unit path, job id, job type, job path.
type ListedUnit = (
    String,
    String,
    String,
    String,
    String,
    String,
    OwnedObjectPath,
    u32,
    String,
    OwnedObjectPath,
);

/// A handle on one host's systemd, over its system bus.
#[derive(Debug, Clone)]
pub struct Systemd {
    manager: Manager,
    root: PathBuf,
    job_timeout: Duration,
}

impl Systemd {
    /// Connects to a system bus ([`SYSTEM_BUS_ADDRESS`] in production; a container's bus in
    /// tests); the host's root directory is `/`.
    pub async fn connect(address: &str) -> Result<Systemd, SystemdError> {
        Systemd::connect_with_root(address, Path::new("/")).await
    }

    /// Connects to the system bus of the host whose root directory is `root` (used to read the
    /// journal of failed units with `journalctl --root`).
    pub async fn connect_with_root(address: &str, root: &Path) -> Result<Systemd, SystemdError> {
        let conn = zbus::connection::Builder::address(address)
            .method_timeout(METHOD_TIMEOUT)
            .build()
            .await
            .map_err(|source| SystemdError::Bus {
                op: format!("connect to {address}"),
                source,
            })?;
        let manager = Manager { conn };
        // Without a subscriber, systemd may not emit JobRemoved for our jobs.
        manager.call("Subscribe", "", &()).await?;
        Ok(Systemd {
            manager,
            root: root.to_path_buf(),
            job_timeout: DEFAULT_JOB_TIMEOUT,
        })
    }

    /// Sets how long a unit job may take (default [`DEFAULT_JOB_TIMEOUT`]).
    pub fn with_job_timeout(mut self, timeout: Duration) -> Systemd {
        self.job_timeout = timeout;
        self
    }

    /// Sets how long a unit job may take.
    pub fn set_job_timeout(&mut self, timeout: Duration) {
        self.job_timeout = timeout;
    }

    /// The job timeout.
    pub fn job_timeout(&self) -> Duration {
        self.job_timeout
    }

    /// The host's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bus connection (for other systemd1/login1 calls).
    pub fn connection(&self) -> &Connection {
        &self.manager.conn
    }

    /// `Manager.Reload`: `systemctl daemon-reload`. Returns once the manager has reloaded.
    pub async fn daemon_reload(&self) -> Result<(), SystemdError> {
        self.manager.call("Reload", "", &()).await?;
        Ok(())
    }

    /// `EnableUnitFiles(units, runtime=false, force=true)`: `systemctl enable --force`.
    /// Units without `[Install]` rules are not an error (logged).
    pub async fn enable(&self, units: &[String]) -> Result<(), SystemdError> {
        let joined = units.join(" ");
        let reply = self
            .manager
            .call("EnableUnitFiles", &joined, &(units, false, true))
            .await?;
        let (carries_install_info, changes): (bool, Changes) =
            deserialize(&reply, "EnableUnitFiles", &joined)?;
        log_changes("enable", &changes);
        if !carries_install_info {
            tracing::info!(
                units = %joined,
                "enabled units without [Install] rules: nothing to link (static units are \
                 started by dependencies, not by enablement)"
            );
        }
        Ok(())
    }

    /// `DisableUnitFiles(units, runtime=false)`: `systemctl disable`.
    pub async fn disable(&self, units: &[String]) -> Result<(), SystemdError> {
        let joined = units.join(" ");
        let reply = self
            .manager
            .call("DisableUnitFiles", &joined, &(units, false))
            .await?;
        let changes: Changes = deserialize(&reply, "DisableUnitFiles", &joined)?;
        log_changes("disable", &changes);
        Ok(())
    }

    /// `MaskUnitFiles(units, runtime=false, force=true)`: `systemctl mask --force`
    /// (`/etc/systemd/system/UNIT -> /dev/null`). systemd refuses to replace a regular unit file
    /// in `/etc/systemd/system`.
    pub async fn mask(&self, units: &[String]) -> Result<(), SystemdError> {
        let joined = units.join(" ");
        let reply = self
            .manager
            .call("MaskUnitFiles", &joined, &(units, false, true))
            .await?;
        let changes: Changes = deserialize(&reply, "MaskUnitFiles", &joined)?;
        log_changes("mask", &changes);
        Ok(())
    }

    /// `UnmaskUnitFiles(units, runtime=false)`: `systemctl unmask`.
    pub async fn unmask(&self, units: &[String]) -> Result<(), SystemdError> {
        let joined = units.join(" ");
        let reply = self
            .manager
            .call("UnmaskUnitFiles", &joined, &(units, false))
            .await?;
        let changes: Changes = deserialize(&reply, "UnmaskUnitFiles", &joined)?;
        log_changes("unmask", &changes);
        Ok(())
    }

    /// `PresetUnitFiles(units, runtime=false, force=true)`: `systemctl preset --force`
    /// (enable or disable as the host's `*.preset` files say; enable when none matches).
    pub async fn preset(&self, units: &[String]) -> Result<(), SystemdError> {
        let joined = units.join(" ");
        let reply = self
            .manager
            .call("PresetUnitFiles", &joined, &(units, false, true))
            .await?;
        let (_carries_install_info, changes): (bool, Changes) =
            deserialize(&reply, "PresetUnitFiles", &joined)?;
        log_changes("preset", &changes);
        Ok(())
    }

    /// `GetUnitFileState`: `enabled`, `disabled`, `masked`, `static`, `indirect`, `linked`,
    /// `alias`, `generated`, ...; `None` when there is no such unit file.
    pub async fn unit_file_state(&self, unit: &str) -> Result<Option<String>, SystemdError> {
        match self.manager.call("GetUnitFileState", unit, &(unit,)).await {
            Ok(reply) => Ok(Some(deserialize(&reply, "GetUnitFileState", unit)?)),
            Err(e) if e.is_no_such_unit() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Starts a unit and waits for its job (`StartUnit`, mode `replace`).
    pub async fn start(&self, unit: &str) -> Result<(), SystemdError> {
        self.job(JobOp::Start, unit).await
    }

    /// Restarts a unit and waits for its job (`RestartUnit`, mode `replace`).
    pub async fn restart(&self, unit: &str) -> Result<(), SystemdError> {
        self.job(JobOp::Restart, unit).await
    }

    /// Reloads a unit and waits for its job (`ReloadUnit`, mode `replace`).
    pub async fn reload(&self, unit: &str) -> Result<(), SystemdError> {
        self.job(JobOp::Reload, unit).await
    }

    /// Stops a unit and waits for its job (`StopUnit`, mode `replace`).
    pub async fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        self.job(JobOp::Stop, unit).await
    }

    /// The unit's `ActiveState` (`LoadUnit`, then the property): `active`, `inactive`, `failed`,
    /// `activating`, `deactivating`, `reloading`.
    pub async fn active_state(&self, unit: &str) -> Result<String, SystemdError> {
        let path = self.load_unit(unit).await?;
        self.manager
            .property(path.as_str(), UNIT, "ActiveState", unit)
            .await
    }

    /// The Manager's `SystemState`: `initializing`, `starting`, `running`, `degraded`,
    /// `maintenance`, `stopping`, ...
    pub async fn system_state(&self) -> Result<String, SystemdError> {
        self.manager
            .property(PATH, MANAGER, "SystemState", "manager")
            .await
    }

    /// The units in the `failed` state (`ListUnitsFiltered(["failed"])`), by name.
    pub async fn failed_units(&self) -> Result<Vec<String>, SystemdError> {
        let reply = self
            .manager
            .call("ListUnitsFiltered", "failed units", &(vec!["failed"],))
            .await?;
        let units: Vec<ListedUnit> = deserialize(&reply, "ListUnitsFiltered", "failed units")?;
        let mut names: Vec<String> = units.into_iter().map(|u| u.0).collect();
        names.sort();
        Ok(names)
    }

    /// The units of the jobs systemd is running now (`ListJobs`, state `running`; jobs that
    /// wait for others are left out).
    pub async fn running_jobs(&self) -> Result<Vec<String>, SystemdError> {
        let reply = self.manager.call("ListJobs", "jobs", &()).await?;
        let jobs: Vec<(
            u32,
            String,
            String,
            String,
            OwnedObjectPath,
            OwnedObjectPath,
        )> = deserialize(&reply, "ListJobs", "jobs")?;
        Ok(jobs
            .into_iter()
            .filter(|j| j.3 == "running")
            .map(|j| j.1)
            .collect())
    }

    /// Why a unit is in the state it is in: its state, result and exit status, then the last
    /// lines of its journal (`unit X: state: failed/failed, result: exit-code, exit status 1;
    /// last log lines: ...`).
    pub async fn describe_unit(&self, unit: &str) -> String {
        let state = self.unit_status(unit).await;
        let journal = self.journal_tail(unit).await;
        format!("unit {unit}: {state}{}", journal_suffix(&journal))
    }

    async fn load_unit(&self, unit: &str) -> Result<OwnedObjectPath, SystemdError> {
        let reply = self.manager.call("LoadUnit", unit, &(unit,)).await?;
        deserialize(&reply, "LoadUnit", unit)
    }

    /// Queues a job for `unit` and waits for its `JobRemoved` signal.
    async fn job(&self, op: JobOp, unit: &str) -> Result<(), SystemdError> {
        // Subscribe first: the job may finish before the method reply reaches us.
        let mut signals = self.manager.job_removed_stream().await?;
        let reply = self
            .manager
            .call(op.method(), unit, &(unit, "replace"))
            .await?;
        let job: OwnedObjectPath = deserialize(&reply, op.method(), unit)?;
        tracing::debug!(%unit, %op, job = %job.as_str(), "job queued");
        let waited = tokio::time::timeout(self.job_timeout, async {
            loop {
                let next = poll_fn(|cx| Pin::new(&mut signals).poll_next(cx)).await;
                let msg = match next {
                    Some(Ok(msg)) => msg,
                    Some(Err(source)) => {
                        return Err(SystemdError::Bus {
                            op: format!("waiting for JobRemoved of {unit}"),
                            source,
                        })
                    }
                    None => {
                        return Err(SystemdError::Bus {
                            op: format!("waiting for JobRemoved of {unit}"),
                            source: zbus::Error::InputOutput(std::sync::Arc::new(
                                std::io::Error::new(
                                    std::io::ErrorKind::UnexpectedEof,
                                    "the bus connection closed",
                                ),
                            )),
                        })
                    }
                };
                let Ok((_id, path, _unit, result)) = msg.body().deserialize::<JobRemoved>() else {
                    continue;
                };
                if path == job {
                    return Ok(result);
                }
            }
        })
        .await;
        drop(signals);
        let result = match waited {
            Ok(result) => result?,
            Err(_) => {
                return Err(SystemdError::Timeout {
                    unit: unit.to_string(),
                    op,
                    after: self.job_timeout,
                })
            }
        };
        if result == "done" {
            tracing::info!(%unit, %op, "job done");
            return Ok(());
        }
        let state = self.unit_status(unit).await;
        let journal = self.journal_tail(unit).await;
        let err = SystemdError::UnitFailed {
            unit: unit.to_string(),
            op,
            job_result: result,
            state: Box::new(state),
            journal,
        };
        tracing::warn!("{err}");
        Err(err)
    }

    /// `ActiveState`, `SubState`, `Result`, `ExecMainStatus`; what cannot be read stays empty.
    async fn unit_status(&self, unit: &str) -> UnitStatus {
        let mut status = UnitStatus::default();
        let Ok(path) = self.load_unit(unit).await else {
            return status;
        };
        let path = path.as_str();
        let m = &self.manager;
        status.active_state = m
            .property(path, UNIT, "ActiveState", unit)
            .await
            .unwrap_or_default();
        status.sub_state = m
            .property(path, UNIT, "SubState", unit)
            .await
            .unwrap_or_default();
        if let Some(iface) = type_interface(unit) {
            status.result = m.property(path, &iface, "Result", unit).await.ok();
            if iface.ends_with(".Service") {
                status.exec_main_code = m
                    .property::<i32>(path, &iface, "ExecMainCode", unit)
                    .await
                    .ok();
                status.exec_main_status = m
                    .property::<i32>(path, &iface, "ExecMainStatus", unit)
                    .await
                    .ok();
            }
        }
        status
    }

    /// The last [`JOURNAL_LINES`] lines of the unit's journal, read with
    /// `journalctl --root=ROOT -u UNIT -n 20 -o short --no-pager -q`.
    ///
    /// journald receives a service's output and systemd's own messages about the unit
    /// asynchronously, so the lines may still be on their way when the job result arrives: the
    /// journal is read again (every 100 ms, for at most 2 s) until two reads agree.
    async fn journal_tail(&self, unit: &str) -> Vec<String> {
        let mut last: Option<Vec<String>> = None;
        for _ in 0..20 {
            let lines = match self.read_journal(unit).await {
                Ok(lines) => lines,
                Err(e) => {
                    tracing::warn!(%unit, "could not read the journal: {e}");
                    return vec![format!("(could not read the journal: {e})")];
                }
            };
            if !lines.is_empty() && last.as_ref() == Some(&lines) {
                return lines;
            }
            last = Some(lines);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        last.unwrap_or_default()
    }

    async fn read_journal(&self, unit: &str) -> Result<Vec<String>, String> {
        let mut root = std::ffi::OsString::from("--root=");
        root.push(self.root.as_os_str());
        let out = tokio::process::Command::new("journalctl")
            .arg(root)
            .args(["-u", unit, "-n", &JOURNAL_LINES.to_string()])
            .args(["-o", "short", "--no-pager", "-q"])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|e| format!("journalctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "journalctl: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty() && *l != "-- No entries --")
            .map(String::from)
            .collect())
    }
}

/// The D-Bus interface with the unit type's `Result` property, from the unit name's suffix.
fn type_interface(unit: &str) -> Option<String> {
    let suffix = unit.rsplit_once('.')?.1;
    let name = match suffix {
        "service" => "Service",
        "socket" => "Socket",
        "mount" => "Mount",
        "swap" => "Swap",
        "timer" => "Timer",
        "path" => "Path",
        "automount" => "Automount",
        "scope" => "Scope",
        _ => return None,
    };
    Some(format!("org.freedesktop.systemd1.{name}"))
}

fn log_changes(what: &str, changes: &Changes) {
    for (kind, file, dest) in changes {
        match kind.as_str() {
            "symlink" => tracing::info!("{what}: created symlink {file} -> {dest}"),
            "unlink" => tracing::info!("{what}: removed {file}"),
            _ => tracing::info!("{what}: {kind} {file} {dest}"),
        }
    }
}

fn deserialize<T>(reply: &Message, method: &str, unit: &str) -> Result<T, SystemdError>
where
    T: serde::de::DeserializeOwned + zbus::zvariant::Type,
{
    reply
        .body()
        .deserialize::<T>()
        .map_err(|source| SystemdError::Bus {
            op: format!("{method} {unit}: reading the reply"),
            source,
        })
}

/// The systemd Manager object (zbus 6's generated proxies are not enabled in this workspace:
/// plain method calls).
#[derive(Debug, Clone)]
struct Manager {
    conn: Connection,
}

impl Manager {
    async fn call<B>(&self, method: &str, unit: &str, body: &B) -> Result<Message, SystemdError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        self.conn
            .call_method(Some(DEST), PATH, Some(MANAGER), method, body)
            .await
            .map_err(|e| {
                let op = if unit.is_empty() {
                    method.to_string()
                } else {
                    format!("{method} {unit}")
                };
                SystemdError::from_bus(op, unit, e)
            })
    }

    async fn property<T>(
        &self,
        path: &str,
        iface: &str,
        name: &str,
        unit: &str,
    ) -> Result<T, SystemdError>
    where
        T: TryFrom<OwnedVariant>,
        T::Error: Into<zbus::Error>,
    {
        let op = || format!("reading {iface}.{name} of {unit}");
        let reply = self
            .conn
            .call_method(Some(DEST), path, Some(PROPERTIES), "Get", &(iface, name))
            .await
            .map_err(|e| SystemdError::from_bus(op(), unit, e))?;
        let value: OwnedVariant = reply
            .body()
            .deserialize()
            .map_err(|source| SystemdError::Bus { op: op(), source })?;
        T::try_from(value).map_err(|e| SystemdError::Bus {
            op: op(),
            source: e.into(),
        })
    }

    /// A stream of the Manager's `JobRemoved` signals (the match rule is in place on return).
    async fn job_removed_stream(&self) -> Result<MessageStream, SystemdError> {
        let op = || "subscribing to JobRemoved".to_string();
        let rule = MatchRule::builder()
            .msg_type(MessageType::Signal)
            .sender(DEST)
            .path(PATH)
            .interface(MANAGER)
            .member("JobRemoved")
            .build()
            .map_err(|source| SystemdError::Bus { op: op(), source })?;
        MessageStream::for_match_rule(rule, &self.conn, NonZeroUsize::new(4096))
            .await
            .map_err(|source| SystemdError::Bus { op: op(), source })
    }
}
