//! Feeding systemd's watchdog (`WatchdogSec=` of `hearth-agent.service`) from a thread of its
//! own, so that a long step cannot get the agent killed in the middle of it, while a hung agent
//! still is.
//!
//! The feeder sends `WATCHDOG=1` every half watchdog interval **as long as the agent makes
//! progress**: its main loop (or an apply's step loop) called [`beat`] within the last watchdog
//! interval, or a long operation is under way ([`busy`]: staging an OS change, which pulls the
//! image; waiting for a unit's start, restart or reload job; the boot health check; starting
//! the finalization unit) and has not overrun its own bound. An operation that overruns its
//! bound, or a main loop that stops beating outside of one, stops the feeding: systemd then
//! kills and restarts the agent, which resumes from its journal. Outside systemd (no
//! `WATCHDOG_USEC`) nothing is started.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Bound of staging an OS change (pulling the image included).
pub const STAGE_MAX: Duration = Duration::from_secs(60 * 60);

// The OS helper's own time limit for staging is below this one, so that a stuck helper is
// killed and reported before the watchdog gives up on the agent.
const _: () = assert!(hearth_hostops::os::ostree::STAGE_TIME_LIMIT.as_secs() < STAGE_MAX.as_secs());

/// Bound of waiting for one unit job (start, restart, reload, daemon-reload).
pub const UNIT_JOB_MAX: Duration = Duration::from_secs(30 * 60);

#[derive(Debug)]
struct Shared {
    interval: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    last_beat: Instant,
    next_id: u64,
    ops: Vec<(u64, &'static str, Instant)>,
}

static FEEDER: OnceLock<Shared> = OnceLock::new();

/// Starts the feeder thread when systemd asked for a watchdog; otherwise does nothing.
pub fn start() {
    let Some(interval) = libsystemd::daemon::watchdog_enabled(false) else {
        return;
    };
    if FEEDER
        .set(Shared {
            interval,
            state: Mutex::new(State {
                last_beat: Instant::now(),
                next_id: 0,
                ops: Vec::new(),
            }),
        })
        .is_err()
    {
        return;
    }
    let notifier = crate::logging::Notifier::new();
    let spawned = std::thread::Builder::new()
        .name("hearth-watchdog".into())
        .spawn(move || {
            let Some(shared) = FEEDER.get() else { return };
            let mut starving = false;
            loop {
                std::thread::sleep(shared.interval / 2);
                match shared.stalled() {
                    None => {
                        starving = false;
                        notifier.watchdog();
                    }
                    Some(why) if !starving => {
                        starving = true;
                        tracing::error!(
                            "{why}; no longer feeding the watchdog (systemd restarts the agent)"
                        );
                    }
                    Some(_) => {}
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the watchdog feeder");
    }
    tracing::debug!(?interval, "watchdog feeder started");
}

impl Shared {
    /// `None` while the agent makes progress; otherwise why it stalled.
    fn stalled(&self) -> Option<String> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some((_, what, _)) = s.ops.iter().find(|(_, _, deadline)| now > *deadline) {
            return Some(format!("{what} overran its time bound"));
        }
        if !s.ops.is_empty() || now.duration_since(s.last_beat) < self.interval {
            return None;
        }
        Some(format!(
            "the agent's main loop made no progress for {} s",
            now.duration_since(s.last_beat).as_secs()
        ))
    }
}

/// The main loop (or a step of an apply) made progress.
pub fn beat() {
    if let Some(shared) = FEEDER.get() {
        shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_beat = Instant::now();
    }
}

/// A long operation under way, until dropped.
#[derive(Debug)]
pub struct Busy {
    id: Option<u64>,
}

/// Marks `what` as under way for at most `max`: the watchdog is fed meanwhile.
pub fn busy(what: &'static str, max: Duration) -> Busy {
    let Some(shared) = FEEDER.get() else {
        return Busy { id: None };
    };
    let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let id = s.next_id;
    s.next_id += 1;
    s.ops.push((id, what, Instant::now() + max));
    Busy { id: Some(id) }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let (Some(id), Some(shared)) = (self.id, FEEDER.get()) {
            let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            s.ops.retain(|(i, _, _)| *i != id);
            s.last_beat = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(last_beat_ago: Duration, ops: Vec<(u64, &'static str, Instant)>) -> Shared {
        Shared {
            interval: Duration::from_secs(10),
            state: Mutex::new(State {
                last_beat: Instant::now() - last_beat_ago,
                next_id: 0,
                ops,
            }),
        }
    }

    #[test]
    fn fed_while_beating_or_busy_within_bounds_starved_otherwise() {
        let later = Instant::now() + Duration::from_secs(3600);
        let past = Instant::now() - Duration::from_secs(1);
        assert!(shared(Duration::from_secs(1), vec![]).stalled().is_none());
        let stale = shared(Duration::from_secs(60), vec![]).stalled();
        assert!(stale.unwrap().contains("no progress for 60 s"));
        // A long step keeps it fed although the main loop does not beat...
        assert!(shared(Duration::from_secs(60), vec![(0, "staging", later)])
            .stalled()
            .is_none());
        // ...until it overruns its bound, even while the loop beats.
        let overrun = shared(
            Duration::ZERO,
            vec![(0, "staging", later), (1, "a unit job", past)],
        )
        .stalled()
        .unwrap();
        assert!(overrun.contains("a unit job overran"), "{overrun}");
    }
}
