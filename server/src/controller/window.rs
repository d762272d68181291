//! Maintenance windows in the server: [`gate`], the one place that decides (outside every window
//! of its pool a node gets no reboot slot, agent API and FleetLock alike, and the rollout hands
//! out no config whose update needs a reboot), and the [`WindowClock`] it judges by. Reading
//! and arithmetic are `hearth_config::window` (re-exported here).

pub use hearth_config::window::*;

use crate::store::records::PoolRecord;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The one decision: `None` when `pool` may reboot nodes at `now` (no windows, or inside one);
/// else why it waits.
pub fn gate(pool: &PoolRecord, now: u64) -> Option<WindowWait> {
    match Windows::of(&pool.metadata.annotations)? {
        Ok(w) => match w.state(now) {
            WindowState::Open { .. } => None,
            WindowState::Closed(wait) => Some(wait),
        },
        Err(e) => Some(WindowWait {
            window: pool
                .metadata
                .annotations
                .get(ANNOTATION)
                .cloned()
                .unwrap_or_default(),
            opens_at: None,
            error: Some(e.to_string()),
        }),
    }
}

/// The clock maintenance windows are judged by: the system clock, plus an offset that tests
/// (and the hidden server flag `--window-clock-start`) set. Clones share the offset.
#[derive(Debug, Clone, Default)]
pub struct WindowClock(Arc<AtomicI64>);

impl WindowClock {
    /// Now, Unix seconds.
    pub fn now(&self) -> u64 {
        (crate::time::now() as i64 + self.0.load(Ordering::Relaxed)).max(0) as u64
    }

    /// Makes `now()` return `unix` at this moment (and run on from there).
    pub fn set_now(&self, unix: u64) {
        self.0
            .store(unix as i64 - crate::time::now() as i64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-03 was a Saturday; this is its 00:00 UTC.
    const SAT: u64 = 1_767_398_400;
    const H: u64 = 3600;

    #[test]
    fn the_gate_reads_the_pool() {
        let mut pool = PoolRecord::builtin("worker", 0);
        assert_eq!(gate(&pool, SAT), None);
        pool.metadata
            .annotations
            .insert(ANNOTATION.into(), "Sat 02:00-06:00".into());
        let wait = gate(&pool, SAT).unwrap();
        assert_eq!(wait.opens_at, Some(SAT + 2 * H));
        assert_eq!(gate(&pool, SAT + 3 * H), None);
        pool.metadata
            .annotations
            .insert(ANNOTATION.into(), "whenever".into());
        let wait = gate(&pool, SAT + 3 * H).unwrap();
        assert_eq!(wait.opens_at, None);
        assert!(
            wait.message(0).contains("cannot be read"),
            "{}",
            wait.message(0)
        );
    }

    #[test]
    fn the_clock_can_be_set() {
        let c = WindowClock::default();
        let d = c.clone();
        c.set_now(SAT);
        assert!(d.now().abs_diff(SAT) <= 1);
    }
}
