//! [`ExitSlot`]: the exit status of a systemd-nspawn process, filled in by the thread that
//! waits for it and read by the host ([`crate::host`]) and the boot wait ([`crate::bus`]).

use std::process::ExitStatus;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The exit status of a systemd-nspawn process, filled in by the thread that waits for it.
#[derive(Debug, Default)]
pub(crate) struct ExitSlot {
    status: Mutex<Option<ExitStatus>>,
    cond: Condvar,
}

impl ExitSlot {
    pub(crate) fn set(&self, status: ExitStatus) {
        let mut guard = self.status.lock().unwrap_or_else(|e| e.into_inner());
        *guard = Some(status);
        self.cond.notify_all();
    }

    /// The exit status, if the process has exited.
    pub(crate) fn get(&self) -> Option<ExitStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `timeout` for the process to exit.
    pub(crate) fn wait(&self, timeout: Duration) -> Option<ExitStatus> {
        let guard = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, timeout, |s| s.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_slot_reports_the_status() {
        let slot = ExitSlot::default();
        assert_eq!(slot.get(), None);
        assert_eq!(slot.wait(Duration::from_millis(10)), None);
        slot.set(ExitStatus::default());
        assert!(slot.wait(Duration::from_secs(1)).is_some());
    }
}
