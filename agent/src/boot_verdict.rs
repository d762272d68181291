//! The agent's verdict on this boot, for the boot loader's boot counting: the agent records it
//! in `/run` (emptied by every boot) once it has judged the boot, and
//! `hearth-boot-complete.service` (`hearth-agent boot-complete`, ordered before
//! `boot-complete.target`, which `systemd-bless-boot.service` waits for) waits for it. So a
//! deployment that boots with a boot counter is marked good only after hearth's health check
//! passed; a bad verdict leaves the counter as it is (the agent rolls back, or the boot loader
//! does after the last try).
//!
//! The verdict is about the *booted* deployment: "good" when the agent's health check of a new
//! deployment passed, or when nothing was new in this boot (the agent had no OS change to judge);
//! "bad" with the reason when the health check failed.

use std::path::Path;
use std::time::{Duration, Instant};

use hearth_hostops::fs::Root;

/// Where the verdict is kept for this boot.
pub const VERDICT_PATH: &str = "/run/hearth/boot-verdict";

/// The unit that holds `boot-complete.target` until the verdict (units/).
pub const BOOT_COMPLETE_UNIT: &str = "hearth-boot-complete.service";

/// The agent's verdict on this boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The booted deployment is good: its boot counter may go.
    Good,
    /// It is not, and why.
    Bad(String),
}

impl Verdict {
    fn to_text(&self) -> String {
        match self {
            Verdict::Good => "good\n".into(),
            Verdict::Bad(why) => format!("bad: {}\n", why.replace('\n', " ")),
        }
    }

    fn parse(text: &str) -> Option<Verdict> {
        let text = text.trim();
        if text == "good" {
            return Some(Verdict::Good);
        }
        text.strip_prefix("bad: ")
            .map(|why| Verdict::Bad(why.to_string()))
    }
}

/// Records the verdict on this boot (replacing one recorded before). Failures are logged: the
/// verdict only matters on hosts with boot counting, where the gate then times out (and the
/// boot is not marked good: the safe side).
pub fn record(root: &Root, verdict: &Verdict) {
    match root.write_atomic(VERDICT_PATH, verdict.to_text().as_bytes(), 0o644, None) {
        Ok(_) => tracing::info!(?verdict, "verdict on this boot recorded"),
        Err(e) => tracing::warn!(error = %e, "cannot record the verdict on this boot"),
    }
}

/// Records `verdict` unless one is recorded for this boot already.
pub fn record_unless_set(root: &Root, verdict: &Verdict) {
    if !matches!(root.stat(VERDICT_PATH), Ok(Some(_))) {
        record(root, verdict);
    }
}

/// Waits until the verdict on this boot is recorded under `root`, at most `timeout`.
pub fn wait(root: &Path, timeout: Duration) -> Result<Verdict, String> {
    let path = hearth_hostops::os::paths::inside(root, VERDICT_PATH);
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Some(v) = Verdict::parse(&text) {
                return Ok(v);
            }
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the agent recorded no verdict on this boot in {VERDICT_PATH} within {} s \
                 (is hearth-agent.service running? `journalctl -u hearth-agent`)",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip() {
        for v in [Verdict::Good, Verdict::Bad("unit x failed".into())] {
            assert_eq!(Verdict::parse(&v.to_text()), Some(v));
        }
        assert_eq!(
            Verdict::parse(&Verdict::Bad("a\nb".into()).to_text()),
            Some(Verdict::Bad("a b".into()))
        );
        assert_eq!(Verdict::parse("maybe"), None);
    }

    #[test]
    fn waiting_sees_a_verdict_recorded_later() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert!(wait(dir.path(), Duration::from_millis(10))
            .unwrap_err()
            .contains("no verdict"));
        let path = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || wait(&path, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(300));
        record_unless_set(&root, &Verdict::Bad("unhealthy".into()));
        record_unless_set(&root, &Verdict::Good);
        assert_eq!(waiter.join().unwrap(), Ok(Verdict::Bad("unhealthy".into())));
    }
}
