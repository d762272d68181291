//! What a reconcile is told: the controller's settings and how much to reconcile.

use super::window::WindowClock;

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How many of the newest renders of each pool (and of each node with overlays) are kept;
    /// those in use are always kept.
    pub retention: usize,
    /// The clock maintenance windows are judged by.
    pub window_clock: WindowClock,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            retention: 5,
            window_clock: WindowClock::default(),
        }
    }
}

/// How much to reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Render everything, then roll out (MachineConfigs, pools or labels changed).
    Full,
    /// Roll out only (a status report, a reboot slot).
    Rollout,
}
