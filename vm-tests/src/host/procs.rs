//! The systemd-nspawn process of a host (its exit codes, the thread waiting for it) and the
//! process tree below it: the container's PID 1 is the child of nspawn that is PID 1 of its own
//! pid namespace.

use std::fs;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nix::unistd::Pid;

use crate::exit_slot::ExitSlot;

/// Exit code of systemd-nspawn when the container asked for a reboot.
pub const NSPAWN_REBOOT_EXIT_CODE: i32 = 133;

/// A running systemd-nspawn process.
#[derive(Debug)]
pub(super) struct Nspawn {
    pub(super) pid: Pid,
    pub(super) exit: Arc<ExitSlot>,
    pub(super) waiter: Option<JoinHandle<()>>,
}

impl Nspawn {
    pub(super) fn join_waiter(&mut self) {
        if let Some(waiter) = self.waiter.take() {
            let _ = waiter.join();
        }
    }
}

/// Finds the container's PID 1: the child of nspawn that is pid 1 in its own pid namespace.
pub(super) fn find_leader(nspawn: Pid, exit: &ExitSlot, deadline: Instant) -> Result<Pid> {
    loop {
        if let Some(status) = exit.get() {
            bail!("systemd-nspawn exited ({status}) before the container started");
        }
        if let Some(pid) = children_of(nspawn)
            .into_iter()
            .find(|&p| is_namespace_init(p))
        {
            return Ok(Pid::from_raw(pid));
        }
        if Instant::now() >= deadline {
            bail!("timed out waiting for the container's PID 1 to appear");
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// The children of a process: from `/proc/PID/task/PID/children` where the kernel has it
/// (`CONFIG_PROC_CHILDREN`), else by scanning `/proc/*/stat` for the parent pid.
fn children_of(parent: Pid) -> Vec<i32> {
    if let Ok(children) = fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")) {
        return children
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect();
    }
    children_by_scan(parent)
}

/// The children of a process, by scanning `/proc/*/stat` for the parent pid.
fn children_by_scan(parent: Pid) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // Field 4 (ppid) follows the parenthesised command name and the state.
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent.as_raw())
        })
        .collect()
}

/// Whether `pid` is PID 1 of a nested pid namespace (`NSpid:\t<pid>\t1`).
fn is_namespace_init(pid: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            ids.len() >= 2 && ids.last() == Some(&"1")
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn children_are_found_both_ways() {
        let mut child = Command::new("sleep").arg("10").spawn().unwrap();
        let me = Pid::from_raw(std::process::id() as i32);
        let pid = child.id() as i32;
        // The task's children file lists children of the main thread only; the test runs on
        // another thread, so only the scan is sure to see it.
        assert!(children_by_scan(me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_by_scan(me).contains(&pid));
    }

    #[test]
    fn own_process_is_not_a_namespace_init() {
        assert!(!is_namespace_init(std::process::id() as i32));
    }
}
