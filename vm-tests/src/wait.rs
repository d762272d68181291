//! Waiting in tests: polling a condition until it holds, or failing with what was awaited.

use std::time::{Duration, Instant};

/// Calls `done` every 200 ms until it returns true; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
