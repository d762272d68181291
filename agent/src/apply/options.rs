//! What one sync is asked to do ([`Options`]), and the force file that asks for a full re-apply
//! from outside ([`FORCE_FILE`]).

use crate::drift_policy::DriftPolicies;

/// A file whose presence asks for a full re-apply on the next sync (the MCO's
/// `/run/machine-config-daemon-force`).
pub const FORCE_FILE: &str = "/run/hearth-force";

/// Options of one sync.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Re-apply everything even if the host is already in the desired config.
    pub force: bool,
    /// Do not reboot even if the plan needs it (leave the node `Rebooting`, reboot pending).
    pub no_reboot: bool,
    /// The drift policies: which paths that differ without the apply having written them are
    /// exempt (`ignore`) or reported as drift (`report`, `revert`) instead of failing it.
    pub drift: DriftPolicies,
    /// An admin's force request (`hearth node force`) this sync serves: it re-applies
    /// everything, and the request's id is written into the journal with the apply's start
    /// (`Journal::forcing`), so that it is acted on once, also across a crash.
    pub force_request: Option<u64>,
    /// The pool's trial policy (only when following a server: the trial needs one to answer):
    /// a change it covers ends in `Trial`, not `Done` (`trial.rs`).
    pub trial: Option<hearth_config::trial::TrialPolicy>,
}
