//! `hearth_hostops::drift`: the inotify drift monitor on plain temporary roots, running on a
//! thread of its own as the agent runs it. Each test measures how long the report took.
//! Needs root (reverts restore owners).

use hearth_hostops::drift::{DriftControl, DriftEvent, DriftMonitor, DriftPolicy, ManagedPath};
use hearth_hostops::fs::Root;
use hearth_hostops::verify::sha256_hex;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const CHRONY: &[u8] = b"pool 2.fedora.pool.ntp.org iburst\ndriftfile /var/lib/chrony/drift\n";
const SSHD: &[u8] = b"PasswordAuthentication no\n";
/// How long a report may take.
const WITHIN: Duration = Duration::from_secs(3);
/// How long we wait to be sure nothing is reported.
const QUIET: Duration = Duration::from_millis(1500);

struct Running {
    rx: mpsc::Receiver<(Instant, DriftEvent)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    control: DriftControl,
}

impl Running {
    fn start(root: &Root, managed: Vec<ManagedPath>) -> Running {
        let mut monitor = DriftMonitor::new(root, managed).unwrap();
        let control = monitor.control();
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                if let Some(ev) = monitor.next_event(Duration::from_millis(100)).unwrap() {
                    let _ = tx.send((Instant::now(), ev));
                }
            }
        });
        Running {
            rx,
            stop,
            thread: Some(thread),
            control,
        }
    }

    /// The next event, and how long after `since` it arrived.
    fn next(&self, since: Instant) -> (DriftEvent, Duration) {
        let (at, ev) = self
            .rx
            .recv_timeout(WITHIN)
            .unwrap_or_else(|_| panic!("no drift event within {WITHIN:?}"));
        let took = at.duration_since(since);
        eprintln!("reported in {took:?}: {} {}", ev.path, ev.what);
        (ev, took)
    }

    fn assert_quiet(&self) {
        if let Ok((_, ev)) = self.rx.recv_timeout(QUIET) {
            panic!("unexpected drift event: {ev:?}");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn root() -> (tempfile::TempDir, Root) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests restore file owners and must run as root"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    root.write_atomic("/etc/chrony.conf", CHRONY, 0o644, Some((0, 0)))
        .unwrap();
    root.write_atomic(
        "/etc/ssh/sshd_config.d/10-hearth.conf",
        SSHD,
        0o600,
        Some((0, 0)),
    )
    .unwrap();
    (dir, root)
}

fn managed(policy: DriftPolicy) -> Vec<ManagedPath> {
    vec![
        ManagedPath::new("/etc/chrony.conf", CHRONY, 0o644, Some((0, 0)), policy),
        ManagedPath::new(
            "/etc/ssh/sshd_config.d/10-hearth.conf",
            SSHD,
            0o600,
            Some((0, 0)),
            policy,
        ),
    ]
}

fn mode_owner(p: &Path) -> (u32, u32, u32) {
    let m = fs::metadata(p).unwrap();
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

#[test]
fn a_hand_edit_is_reported_with_its_path() {
    let (dir, root) = root();
    let mon = Running::start(&root, managed(DriftPolicy::Report));
    let t = Instant::now();
    fs::write(dir.path().join("etc/chrony.conf"), b"pool evil.example\n").unwrap();
    let (ev, took) = mon.next(t);
    assert_eq!(ev.path, "/etc/chrony.conf");
    assert_eq!(
        ev.what,
        format!(
            "content changed: expected sha256 {}, found {}",
            sha256_hex(CHRONY),
            sha256_hex(b"pool evil.example\n")
        )
    );
    assert!(!ev.reverted);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // Reported once, not again for the same state; the file is left as the admin wrote it.
    mon.assert_quiet();
    assert_eq!(
        fs::read(dir.path().join("etc/chrony.conf")).unwrap(),
        b"pool evil.example\n"
    );

    // A further change is a new report; going back to the expected content is not drift.
    let t = Instant::now();
    fs::write(dir.path().join("etc/chrony.conf"), b"pool other.example\n").unwrap();
    let (ev, _) = mon.next(t);
    assert!(ev.what.ends_with(&sha256_hex(b"pool other.example\n")));
    fs::write(dir.path().join("etc/chrony.conf"), CHRONY).unwrap();
    mon.assert_quiet();

    // JSON for the status report.
    let v = serde_json::to_value(&ev).unwrap();
    assert_eq!(v["path"], "/etc/chrony.conf");
    assert_eq!(v["changes"][0]["type"], "content");
    assert_eq!(v["changes"][0]["expectedSha256"], sha256_hex(CHRONY));
}

#[test]
fn editor_style_saves_are_one_report_not_a_deletion() {
    let (dir, root) = root();
    let mon = Running::start(&root, managed(DriftPolicy::Report));
    let etc = dir.path().join("etc");
    let t = Instant::now();
    // As vim does with backupcopy=no: rename the original away, write a new file.
    fs::rename(etc.join("chrony.conf"), etc.join("chrony.conf~")).unwrap();
    fs::write(etc.join("chrony.conf"), b"edited in vim\n").unwrap();
    fs::set_permissions(etc.join("chrony.conf"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::remove_file(etc.join("chrony.conf~")).unwrap();
    let (ev, _) = mon.next(t);
    assert!(ev.what.starts_with("content changed:"), "{}", ev.what);
    mon.assert_quiet();
}

#[test]
fn mode_owner_and_deletion_are_reported() {
    let (dir, root) = root();
    let mon = Running::start(&root, managed(DriftPolicy::Report));
    let sshd = dir.path().join("etc/ssh/sshd_config.d/10-hearth.conf");

    let t = Instant::now();
    fs::set_permissions(&sshd, fs::Permissions::from_mode(0o644)).unwrap();
    let (ev, _) = mon.next(t);
    assert_eq!(ev.path, "/etc/ssh/sshd_config.d/10-hearth.conf");
    assert_eq!(ev.what, "mode changed: expected 0600, found 0644");

    let t = Instant::now();
    std::os::unix::fs::chown(&sshd, Some(1000), None).unwrap();
    let (ev, _) = mon.next(t);
    assert_eq!(
        ev.what,
        "mode changed: expected 0600, found 0644; owner changed: expected 0:0, found 1000:0"
    );

    let t = Instant::now();
    fs::remove_file(dir.path().join("etc/chrony.conf")).unwrap();
    let (ev, took) = mon.next(t);
    assert_eq!(ev.path, "/etc/chrony.conf");
    assert_eq!(ev.what, "deleted");
    assert!(took < Duration::from_secs(1), "took {took:?}");

    // The whole directory goes: its file is deleted; when it comes back, it is watched again.
    let t = Instant::now();
    fs::remove_dir_all(dir.path().join("etc/ssh/sshd_config.d")).unwrap();
    let (ev, _) = mon.next(t);
    assert_eq!(
        (ev.path.as_str(), ev.what.as_str()),
        ("/etc/ssh/sshd_config.d/10-hearth.conf", "deleted")
    );
    fs::create_dir(dir.path().join("etc/ssh/sshd_config.d")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    fs::write(&sshd, b"PasswordAuthentication yes\n").unwrap();
    let (ev, _) = mon.next(t);
    assert!(ev.what.starts_with("content changed:"), "{}", ev.what);
}

#[test]
fn revert_puts_the_file_back_byte_for_byte() {
    let (dir, root) = root();
    let mon = Running::start(&root, managed(DriftPolicy::Revert));
    let chrony = dir.path().join("etc/chrony.conf");

    let t = Instant::now();
    fs::write(&chrony, b"server 10.0.0.1\n").unwrap();
    let (ev, took) = mon.next(t);
    assert!(ev.reverted);
    assert_eq!(
        ev.what,
        format!(
            "content changed: expected sha256 {}, found {}; reverted",
            sha256_hex(CHRONY),
            sha256_hex(b"server 10.0.0.1\n")
        )
    );
    assert_eq!(fs::read(&chrony).unwrap(), CHRONY);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // Its own write is not drift.
    mon.assert_quiet();

    // Mode and owner are restored too.
    let t = Instant::now();
    fs::set_permissions(&chrony, fs::Permissions::from_mode(0o666)).unwrap();
    std::os::unix::fs::chown(&chrony, Some(1000), Some(1000)).unwrap();
    let (ev, _) = mon.next(t);
    assert!(ev.reverted, "{ev:?}");
    assert_eq!(mode_owner(&chrony), (0o644, 0, 0));

    // A deleted file and a deleted directory come back.
    let t = Instant::now();
    fs::remove_file(&chrony).unwrap();
    let (ev, _) = mon.next(t);
    assert_eq!(ev.what, "deleted; reverted");
    assert_eq!(fs::read(&chrony).unwrap(), CHRONY);

    let sshd = dir.path().join("etc/ssh/sshd_config.d/10-hearth.conf");
    let t = Instant::now();
    fs::remove_dir_all(dir.path().join("etc/ssh")).unwrap();
    let (ev, _) = mon.next(t);
    assert_eq!(ev.what, "deleted; reverted");
    assert_eq!(fs::read(&sshd).unwrap(), SSHD);
    assert_eq!(mode_owner(&sshd), (0o600, 0, 0));
    mon.assert_quiet();
    // The recreated directory is watched again.
    let t = Instant::now();
    fs::write(&sshd, b"PermitRootLogin yes\n").unwrap();
    let (ev, _) = mon.next(t);
    assert!(ev.reverted);
    assert_eq!(fs::read(&sshd).unwrap(), SSHD);
    // No temporary files are left.
    let names: Vec<String> = fs::read_dir(dir.path().join("etc"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".hearth-tmp-")),
        "{names:?}"
    );
}

#[test]
fn ignore_reports_nothing() {
    let (dir, root) = root();
    let mon = Running::start(&root, managed(DriftPolicy::Ignore));
    fs::write(dir.path().join("etc/chrony.conf"), b"whatever\n").unwrap();
    fs::remove_file(dir.path().join("etc/ssh/sshd_config.d/10-hearth.conf")).unwrap();
    mon.assert_quiet();
    assert_eq!(
        fs::read(dir.path().join("etc/chrony.conf")).unwrap(),
        b"whatever\n"
    );
}

#[test]
fn hearths_own_writes_are_not_drift() {
    let (dir, root) = root();
    let mon = Running::start(&root, managed(DriftPolicy::Report));
    // Temporary files of an interrupted write, and unmanaged neighbours, are ignored.
    fs::write(
        dir.path().join("etc/.hearth-tmp-1-2-chrony.conf"),
        b"partial",
    )
    .unwrap();
    fs::write(dir.path().join("etc/hosts"), b"127.0.0.1 localhost\n").unwrap();
    mon.assert_quiet();

    // An apply: pause, write, new expectations, resume.
    const NEW: &[u8] = b"pool 3.fedora.pool.ntp.org iburst\n";
    mon.control.pause();
    assert!(mon.control.is_paused());
    root.write_atomic("/etc/chrony.conf", NEW, 0o644, Some((0, 0)))
        .unwrap();
    // Drift of a path the apply does not touch happens meanwhile.
    fs::write(
        dir.path().join("etc/ssh/sshd_config.d/10-hearth.conf"),
        b"PasswordAuthentication yes\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let mut m = managed(DriftPolicy::Report);
    m[0] = ManagedPath::new(
        "/etc/chrony.conf",
        NEW,
        0o644,
        Some((0, 0)),
        DriftPolicy::Report,
    );
    mon.control.set_expected(m);
    let t = Instant::now();
    mon.control.resume();
    // Only the real drift is reported, after the resume.
    let (ev, _) = mon.next(t);
    assert_eq!(ev.path, "/etc/ssh/sshd_config.d/10-hearth.conf");
    mon.assert_quiet();
    // And the new expectation is what counts now.
    let t = Instant::now();
    fs::write(dir.path().join("etc/chrony.conf"), CHRONY).unwrap();
    let (ev, _) = mon.next(t);
    assert_eq!(
        ev.what,
        format!(
            "content changed: expected sha256 {}, found {}",
            sha256_hex(NEW),
            sha256_hex(CHRONY)
        )
    );
}

#[test]
fn check_all_finds_drift_from_before_the_monitor_started() {
    let (dir, root) = root();
    fs::write(
        dir.path().join("etc/chrony.conf"),
        b"changed while hearth was down\n",
    )
    .unwrap();
    let mut mon = DriftMonitor::new(&root, managed(DriftPolicy::Report)).unwrap();
    assert_eq!(
        mon.watched_dirs(),
        ["/etc", "/etc/ssh/sshd_config.d"],
        "parent directories are watched"
    );
    let events = mon.check_all();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].path, "/etc/chrony.conf");
    // Reported once.
    assert!(mon.check_all().is_empty());
    assert!(mon
        .next_event(Duration::from_millis(300))
        .unwrap()
        .is_none());

    // A hash-only expectation can be reported, not reverted.
    let mut mon = DriftMonitor::new(
        &root,
        vec![ManagedPath::from_hash(
            "/etc/chrony.conf",
            sha256_hex(CHRONY),
            0o644,
            DriftPolicy::Revert,
        )],
    )
    .unwrap();
    let events = mon.check_all();
    assert!(!events[0].reverted);
    assert!(
        events[0]
            .what
            .ends_with("; not reverted: the expected content is not known"),
        "{}",
        events[0].what
    );
}

#[test]
fn managed_paths_come_from_a_rendered_config() {
    let (dir, root) = root();
    fs::write(
        dir.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n",
    )
    .unwrap();
    fs::write(dir.path().join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
    let config: hearth_config::ignition::Config = serde_json::from_value(serde_json::json!({
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [
            {"path": "/etc/a", "mode": 384, "user": {"name": "core"}, "contents": {"source": "data:,a"}},
            {"path": "/etc/appended", "append": [{"source": "data:,x"}]}
        ]},
        "systemd": {"units": [
            {"name": "u.service", "contents": "[Service]\n", "dropins": [{"name": "d.conf", "contents": "x"}, {"name": "e.conf"}]},
            {"name": "m.service", "mask": true, "contents": "[Service]\n"}
        ]}
    }))
    .unwrap();
    let m = hearth_hostops::drift::managed_paths(&root, &config, DriftPolicy::Revert).unwrap();
    type Row = (String, u32, Option<(u32, u32)>);
    let summary: Vec<Row> = m
        .iter()
        .map(|m| (m.path.clone(), m.mode, m.owner))
        .collect();
    assert_eq!(
        summary,
        [
            ("/etc/a".to_string(), 0o600, Some((1000, 0))),
            (
                "/etc/systemd/system/u.service".to_string(),
                0o644,
                Some((0, 0))
            ),
            (
                "/etc/systemd/system/u.service.d/d.conf".to_string(),
                0o644,
                Some((0, 0))
            ),
        ]
    );
    assert_eq!(m[0].expected_sha256, sha256_hex(b"a"));
    assert_eq!(m[0].content.as_deref(), Some(&b"a"[..]));
}
