//! The drift monitor watching a real host's root from outside, as hearth does when it runs in a
//! container with the host's root mounted: edits made inside a systemd-nspawn container (on its
//! overlay root) are seen, and reverts are seen inside. Needs root and systemd-nspawn; fails,
//! never skips, without them.

use hearth_hostops::drift::{DriftMonitor, DriftPolicy, ManagedPath};
use hearth_hostops::fs::Root;
use hearth_vm_tests::SystemdHost;
use std::time::{Duration, Instant};

const CONF: &[u8] = b"# managed by hearth\nkey = value\n";

#[test]
fn edits_inside_a_container_are_reported_and_reverted() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test boots systemd in systemd-nspawn and must run as root"
    );
    let host = SystemdHost::boot().unwrap_or_else(|e| {
        panic!("could not boot a test host (needs root and systemd-nspawn): {e:#}")
    });
    let root = Root::open(host.root()).unwrap();
    root.write_atomic("/etc/hearth/app.conf", CONF, 0o644, Some((0, 0)))
        .unwrap();
    root.write_atomic("/etc/hearth/keep.conf", CONF, 0o644, Some((0, 0)))
        .unwrap();
    let mut mon = DriftMonitor::new(
        &root,
        vec![
            ManagedPath::new(
                "/etc/hearth/app.conf",
                CONF,
                0o644,
                Some((0, 0)),
                DriftPolicy::Report,
            ),
            ManagedPath::new(
                "/etc/hearth/keep.conf",
                CONF,
                0o644,
                Some((0, 0)),
                DriftPolicy::Revert,
            ),
        ],
    )
    .unwrap();

    let t = Instant::now();
    host.exec_ok(&["sh", "-c", "echo 'key = other' > /etc/hearth/app.conf"])
        .unwrap();
    let ev = mon
        .next_event(Duration::from_secs(5))
        .unwrap()
        .expect("an edit inside the container is reported");
    eprintln!("reported in {:?}: {}", t.elapsed(), ev.what);
    assert_eq!(ev.path, "/etc/hearth/app.conf");
    assert!(
        ev.what.starts_with("content changed: expected sha256 "),
        "{}",
        ev.what
    );
    assert_eq!(
        host.exec_ok(&["cat", "/etc/hearth/app.conf"]).unwrap(),
        "key = other\n",
        "Report leaves the edit in place"
    );

    let t = Instant::now();
    host.exec_ok(&[
        "sh",
        "-c",
        "echo tampered >> /etc/hearth/keep.conf; chmod 666 /etc/hearth/keep.conf; \
         chown core /etc/hearth/keep.conf",
    ])
    .unwrap();
    let ev = mon
        .next_event(Duration::from_secs(5))
        .unwrap()
        .expect("reported");
    eprintln!("reverted in {:?}: {}", t.elapsed(), ev.what);
    assert!(ev.reverted, "{ev:?}");
    assert_eq!(ev.path, "/etc/hearth/keep.conf");
    assert_eq!(
        host.exec_ok(&["cat", "/etc/hearth/keep.conf"])
            .unwrap()
            .as_bytes(),
        CONF
    );
    assert_eq!(
        host.exec_ok(&["stat", "-c", "%a %U:%G", "/etc/hearth/keep.conf"])
            .unwrap(),
        "644 root:root\n"
    );
    assert!(mon
        .next_event(Duration::from_millis(800))
        .unwrap()
        .is_none());

    host.exec_ok(&["rm", "/etc/hearth/app.conf"]).unwrap();
    let ev = mon
        .next_event(Duration::from_secs(5))
        .unwrap()
        .expect("reported");
    assert_eq!(
        (ev.path.as_str(), ev.what.as_str()),
        ("/etc/hearth/app.conf", "deleted")
    );
}
