//! `hearth_hostops::reboot` against a real Debian systemd + logind in systemd-nspawn: a reboot
//! over D-Bus really reboots (new boot id), and a block inhibitor on shutdown held inside the
//! container stops hearth. Needs root and systemd-nspawn; fails, never skips, without them.

use hearth_hostops::reboot::{self, RebootOutcome};
use hearth_vm_tests::SystemdHost;
use std::time::{Duration, Instant};

const REBOOT_TIMEOUT: Duration = Duration::from_secs(60);

fn boot() -> SystemdHost {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests boot systemd in systemd-nspawn and must run as root"
    );
    SystemdHost::boot().unwrap_or_else(|e| {
        panic!("could not boot a test host (needs root and systemd-nspawn): {e:#}")
    })
}

/// Starts `systemd-inhibit` in a transient unit inside the container and waits until logind
/// lists it.
async fn hold_inhibitor(host: &SystemdHost, unit: &str, what: &str, mode: &str, who: &str) {
    host.exec_ok(&[
        "systemd-run",
        &format!("--unit={unit}"),
        "systemd-inhibit",
        &format!("--what={what}"),
        &format!("--mode={mode}"),
        &format!("--who={who}"),
        "--why=testing",
        "sleep",
        "600",
    ])
    .unwrap();
    let conn = reboot::connect(&host.bus_address()).await.unwrap();
    let start = Instant::now();
    loop {
        let list = reboot::list_inhibitors(&conn).await.unwrap();
        if list.iter().any(|i| i.who == who) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "logind never listed {who}: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn reboot_without_inhibitors_reboots_the_host() {
    let mut host = boot();
    let first = host.boot_id().to_string();
    let t = Instant::now();
    let outcome = reboot::reboot(&host.bus_address()).await.unwrap();
    assert_eq!(
        outcome,
        RebootOutcome::Requested {
            method: "RebootWithFlags".into()
        }
    );
    let second = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap();
    eprintln!("reboot to running again: {:?}", t.elapsed());
    assert_eq!(second.boot_count, 2);
    assert_ne!(second.boot_id, first);
    assert_eq!(second.system_state, "running");
    let journal = host
        .exec_ok(&["journalctl", "--list-boots", "--no-pager"])
        .unwrap();
    assert_eq!(
        journal.lines().filter(|l| !l.contains("IDX")).count(),
        2,
        "{journal}"
    );
}

#[tokio::test]
async fn a_block_inhibitor_stops_hearth_until_it_is_released() {
    let mut host = boot();
    let first = host.boot_id().to_string();
    hold_inhibitor(&host, "inhibit-test", "shutdown", "block", "hearth-test").await;
    // Inhibitors that do not block a reboot: block on sleep only, delay on shutdown.
    hold_inhibitor(&host, "inhibit-sleep", "sleep", "block", "sleeper").await;
    hold_inhibitor(&host, "inhibit-delay", "shutdown", "delay", "delayer").await;

    let outcome = reboot::reboot(&host.bus_address()).await.unwrap();
    let RebootOutcome::Inhibited { by } = &outcome else {
        panic!("rebooted through a block inhibitor: {outcome:?}");
    };
    assert_eq!(by.len(), 1, "{by:?}");
    assert!(
        by[0].starts_with("hearth-test: testing (mode block, what shutdown, pid "),
        "{by:?}"
    );
    assert_eq!(
        serde_json::to_value(&outcome).unwrap()["outcome"],
        "inhibited"
    );

    // The host did not go down.
    let err = host
        .wait_for_reboot(Duration::from_secs(3))
        .expect_err("the host rebooted although an inhibitor was held");
    assert!(format!("{err:#}").contains("no reboot within"), "{err:#}");
    assert_eq!(host.boot_count(), 1);
    assert_eq!(host.boot_id(), first);
    assert_eq!(
        host.exec_ok(&["systemctl", "is-system-running"]).unwrap(),
        "running\n"
    );

    // Released: the next attempt reboots (the delay inhibitor only holds it up to logind's
    // InhibitDelayMaxSec, 5 s).
    host.exec_ok(&["systemctl", "stop", "inhibit-test.service"])
        .unwrap();
    let t = Instant::now();
    let outcome = reboot::reboot(&host.bus_address()).await.unwrap();
    assert!(
        matches!(outcome, RebootOutcome::Requested { .. }),
        "{outcome:?}"
    );
    let second = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap();
    eprintln!("reboot past a delay inhibitor: {:?}", t.elapsed());
    assert_eq!(second.boot_count, 2);
    assert_ne!(second.boot_id, first);
}

/// Why hearth checks `ListInhibitors` itself: logind lets a root caller reboot through a block
/// inhibitor that another root process holds (it ignores inhibitors of the caller's own uid).
#[tokio::test]
async fn logind_alone_would_reboot_through_a_root_inhibitor() {
    let mut host = boot();
    hold_inhibitor(&host, "inhibit-test", "shutdown", "block", "hearth-test").await;
    let conn = reboot::connect(&host.bus_address()).await.unwrap();
    let reply = conn
        .call_method(
            Some("org.freedesktop.login1"),
            "/org/freedesktop/login1",
            Some("org.freedesktop.login1.Manager"),
            "RebootWithFlags",
            &(0u64,),
        )
        .await;
    // Any error but a reply lost with the system going down (as hearth's own reboot reads it)
    // is logind refusing.
    if let Err(e) = &reply {
        assert!(reboot::is_lost_reply(e), "logind refused: {reply:?}");
    }
    drop(conn);
    let second = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap();
    assert_eq!(second.boot_count, 2);
}
