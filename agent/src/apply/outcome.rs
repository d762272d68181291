//! How a sync ended ([`Outcome`]): done, drifted, rebooting, degraded, unreconcilable or on
//! trial.

/// How a sync ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The host is in the desired config (verified).
    Done,
    /// The desired config is applied, but managed paths differ from it that the apply did not
    /// write (drift under the `report` or `revert` policy, or, on a host that already had the
    /// config, any difference). Each line names the path and the difference. The journal's state
    /// is `Done` with these listed as drift; the host is not in the desired config.
    Drifted(Vec<String>),
    /// The config is applied and the node must reboot; `requested` says whether the reboot was
    /// asked for, `inhibited` why not.
    Rebooting {
        /// Whether logind accepted the reboot.
        requested: bool,
        /// Who blocks it, if anyone.
        inhibited: Option<String>,
    },
    /// The apply failed and was undone; the reason names the step, the object and the cause.
    Degraded(String),
    /// The desired config cannot be applied to a running node; every field is listed.
    Unreconcilable(String),
    /// Applied and verified, on trial: the server must answer before the deadline (the
    /// reason says when), or the change is undone.
    Trial(String),
}
