//! `hearth-agent`: brings a host to its desired rendered MachineConfig, crash-safely, and says
//! why when it can't.
//!
//! - [`state`]: the state machine (`Done`, `Working`, `Degraded`, `Unreconcilable`, `Rebooting`,
//!   `Trial`).
//! - [`journal`]: what the agent is doing, written atomically before each phase.
//! - [`apply`]: plan, execute through `hearth-hostops`, verify, reboot or roll back.
//! - [`source`]: where the desired config comes from (file, URL, watched directory).
//! - [`cli`]: `hearth-agent apply --once-from`, `run`, `status`: flags and dispatch.
//! - `daemon`: `run` watching a file or directory; drift monitor events.
//! - [`follow`]: `run --server`: long-poll, report, reboot slots; [`enrolment`]: the server and
//!   the credential the agent keeps, enrolling once and connecting.
//! - [`kube`]: `run --kubernetes`: follow the Node's `desiredConfig`, write the MCO's
//!   annotations and the MachineConfigNode's status.
//! - [`status`]: the status document and text.
//! - [`drift_policy`]: drift policies per path; drift versus failure after an apply.
//! - [`limits`]: size and time bounds on everything read from the network.
//! - [`daemon_lock`]: one keeper of the desired config (`run` versus `apply --once-from`).
//! - [`watchdog`]: feeding systemd's watchdog while the agent makes progress.
//! - [`recheck`]: the no-op re-check from a compact index, without re-reading the config.
//!
//! See `docs/agent.md`.
pub mod apply;
pub mod boot_verdict;
pub mod cli;
mod daemon;
pub mod daemon_lock;
pub mod drift_policy;
pub mod enrolment;
pub mod follow;
pub mod journal;
pub mod kube;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod os_pull;
pub mod recheck;
pub mod remote;
pub mod source;
pub mod state;
pub mod status;
pub mod watchdog;
