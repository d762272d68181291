//! Proof on the real thing: these tests boot systemd in systemd-nspawn on this machine.
//!
//! They need root, systemd-nspawn and (for the first build of the cached root filesystem)
//! debootstrap: `vm-tests/scripts/install-deps.sh`. Without them they fail, saying so.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_vm_tests::{bus, HostOptions, SharedNetwork, SystemdHost};

const REBOOT_TIMEOUT: Duration = Duration::from_secs(60);

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("hearth_vm_tests=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

fn boot() -> SystemdHost {
    init_logs();
    match SystemdHost::boot() {
        Ok(host) => host,
        Err(e) => panic!(
            "could not boot a test host (these tests need root, systemd-nspawn and \
             debootstrap: run vm-tests/scripts/install-deps.sh as root):\n{e:#}"
        ),
    }
}

/// What must be gone once a host is dropped.
struct Traces {
    dir: PathBuf,
    root: PathBuf,
    nspawn_pid: u32,
    leader_pid: u32,
    cgroups: Vec<PathBuf>,
}

impl Traces {
    fn of(host: &SystemdHost) -> Self {
        let traces = Traces {
            dir: host.dir().to_path_buf(),
            root: host.root().to_path_buf(),
            nspawn_pid: host.nspawn_pid().expect("nspawn runs"),
            leader_pid: host.leader_pid(),
            cgroups: host.cgroup_dirs(),
        };
        // While the host runs, all of it is there.
        assert!(mounts()
            .iter()
            .any(|m| m.contains(&*traces.root.to_string_lossy())));
        assert!(is_alive(traces.nspawn_pid));
        assert!(is_alive(traces.leader_pid));
        assert!(!traces.cgroups.is_empty());
        assert!(traces.cgroups.iter().all(|c| c.is_dir()));
        traces
    }

    fn assert_gone(&self) {
        let dir = self.dir.to_string_lossy();
        let left: Vec<String> = mounts().into_iter().filter(|m| m.contains(&*dir)).collect();
        assert!(left.is_empty(), "mounts left behind: {left:#?}");
        assert!(
            !is_alive(self.nspawn_pid),
            "systemd-nspawn {} still runs",
            self.nspawn_pid
        );
        assert!(
            !is_alive(self.leader_pid),
            "the container's systemd {} still runs",
            self.leader_pid
        );
        for cg in &self.cgroups {
            assert!(!cg.exists(), "cgroup left behind: {}", cg.display());
        }
        assert!(!self.dir.exists(), "{} left behind", self.dir.display());
    }
}

/// Lines of /proc/mounts.
fn mounts() -> Vec<String> {
    fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Whether a process with this pid exists and is not a zombie.
fn is_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
            state != Some('Z') && state != Some('X')
        }
        Err(_) => false,
    }
}

#[test]
fn hosts_can_move_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SystemdHost>();
}

#[tokio::test]
async fn boots_to_running_and_answers_on_its_bus() {
    let host = boot();
    let info = host.boot_info().unwrap().clone();
    assert_eq!(
        info.system_state, "running",
        "failed units: {:?}",
        info.failed_units
    );
    assert_eq!(host.boot_count(), 1);
    assert!(host.bus_address().starts_with("unix:path=/"));

    let conn = host.bus().await.unwrap();
    assert_eq!(bus::system_state(&conn).await.unwrap(), "running");
    assert_eq!(
        bus::failed_units(&conn).await.unwrap(),
        Vec::<String>::new()
    );

    // The pieces later tests rely on: logind, journald, the core user, the machine-id.
    assert_eq!(
        host.exec_ok(&[
            "systemctl",
            "is-active",
            "systemd-logind.service",
            "systemd-journald.service",
            "dbus.service"
        ])
        .unwrap(),
        "active\nactive\nactive\n"
    );
    assert_eq!(
        host.exec_ok(&["id", "core"]).unwrap().trim(),
        "uid=1000(core) gid=1000(core) groups=1000(core),4(adm),27(sudo),999(systemd-journal)"
    );
    assert_eq!(
        host.exec_ok(&["getent", "passwd", "core"]).unwrap().trim(),
        "core:x:1000:1000::/home/core:/bin/bash"
    );
    let journal = host
        .exec_ok(&[
            "journalctl",
            "-b",
            "--no-pager",
            "-o",
            "cat",
            "-u",
            "systemd-logind",
        ])
        .unwrap();
    assert!(journal.contains("New seat seat0."), "{journal}");
    assert_eq!(
        host.exec_ok(&["cat", "/etc/machine-id"]).unwrap().trim(),
        host.machine_id()
    );
    assert_eq!(host.exec_ok(&["hostname"]).unwrap().trim(), host.name());
}

#[test]
fn exec_reports_status_and_output() {
    let host = boot();
    let out = host
        .exec(&["sh", "-c", "echo out; echo err >&2; exit 3"])
        .unwrap();
    assert_eq!(out.code(), Some(3));
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");

    // It runs inside: PID 1 is systemd, and the network is the container's (loopback only).
    assert_eq!(host.exec_ok(&["cat", "/proc/1/comm"]).unwrap(), "systemd\n");
    let links = host.exec_ok(&["ip", "-o", "link"]).unwrap();
    assert_eq!(links.lines().count(), 1, "{links}");
    assert!(links.contains("lo:"), "{links}");

    // Commands run by exec are not in a unit; systemd-run puts one in a transient unit.
    host.exec_ok(&[
        "systemd-run",
        "--wait",
        "--quiet",
        "--unit=hearth-probe",
        "--",
        "sh",
        "-c",
        "echo from-a-unit > /run/probe",
    ])
    .unwrap();
    assert_eq!(
        host.exec_ok(&["cat", "/run/probe"]).unwrap(),
        "from-a-unit\n"
    );
    // /run inside is the container's tmpfs: not below root(), but below live_path().
    assert!(!host.path("/run/probe").exists());
    assert_eq!(
        fs::read_to_string(host.live_path("/run/probe")).unwrap(),
        "from-a-unit\n"
    );

    let err = host.exec_ok(&["false"]).unwrap_err();
    assert!(format!("{err:#}").contains("exit code 1"), "{err:#}");
    let out = host
        .exec_timeout(&["sleep", "30"], Duration::from_millis(300))
        .unwrap_err();
    assert!(out.to_string().contains("did not finish"), "{out}");
}

#[test]
fn files_written_through_root_are_seen_inside_and_back() {
    let host = boot();
    fs::write(host.path("/etc/hearth-test.conf"), "written on the host\n").unwrap();
    assert_eq!(
        host.exec_ok(&["cat", "/etc/hearth-test.conf"]).unwrap(),
        "written on the host\n"
    );
    host.exec_ok(&["sh", "-c", "echo written inside > /root/inside.txt"])
        .unwrap();
    assert_eq!(
        fs::read_to_string(host.root().join("root/inside.txt")).unwrap(),
        "written inside\n"
    );

    // What the agent will do: drop a unit in /etc, reload, enable and start it.
    fs::write(
        host.path("/etc/systemd/system/hearth-hello.service"),
        "[Unit]\nDescription=hello\n[Service]\nType=oneshot\nRemainAfterExit=yes\n\
         ExecStart=/bin/sh -c 'echo hello > /run/hello'\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host.exec_ok(&["systemctl", "enable", "--now", "hearth-hello.service"])
        .unwrap();
    assert_eq!(
        host.exec_ok(&["systemctl", "is-enabled", "hearth-hello.service"])
            .unwrap(),
        "enabled\n"
    );
    assert_eq!(host.exec_ok(&["cat", "/run/hello"]).unwrap(), "hello\n");
    // The cached tree itself is untouched (the overlay's lower layer is read-only for us).
    assert!(!hearth_vm_tests::cached_rootfs()
        .unwrap()
        .join("etc/hearth-test.conf")
        .exists());
}

#[test]
fn two_hosts_at_once_are_independent() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(boot);
        let b = s.spawn(boot);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_ne!(a.name(), b.name());
    assert_ne!(a.root(), b.root());
    assert_ne!(a.bus_address(), b.bus_address());
    assert_ne!(a.machine_id(), b.machine_id());
    assert_ne!(a.boot_id(), b.boot_id());
    assert_ne!(a.leader_pid(), b.leader_pid());
    assert_eq!(a.exec_ok(&["hostname"]).unwrap().trim(), a.name());
    assert_eq!(b.exec_ok(&["hostname"]).unwrap().trim(), b.name());

    fs::write(a.path("/etc/only-in-a"), "a\n").unwrap();
    assert!(a.exec(&["test", "-e", "/etc/only-in-a"]).unwrap().success());
    assert!(!b.exec(&["test", "-e", "/etc/only-in-a"]).unwrap().success());

    // Stopping a service in one host leaves the other's alone (separate cgroups too).
    a.exec_ok(&["systemctl", "stop", "systemd-logind.service"])
        .unwrap();
    assert_eq!(
        a.exec(&["systemctl", "is-active", "systemd-logind.service"])
            .unwrap()
            .stdout,
        "inactive\n"
    );
    assert_eq!(
        b.exec_ok(&["systemctl", "is-active", "systemd-logind.service"])
            .unwrap(),
        "active\n"
    );
    assert!(a.cgroup_dirs().iter().all(|d| !b.cgroup_dirs().contains(d)));

    // Dropping one leaves the other running.
    let traces = Traces::of(&a);
    drop(a);
    traces.assert_gone();
    assert_eq!(
        b.exec_ok(&["systemctl", "is-system-running"]).unwrap(),
        "running\n"
    );
}

/// Reads what a TCP server at 127.0.0.1:`port` says, with bash's `/dev/tcp` (argv for exec).
fn tcp_read(port: u16) -> Vec<String> {
    vec![
        "bash".into(),
        "-c".into(),
        format!("exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3"),
    ]
}

#[test]
fn hosts_on_a_shared_network_reach_each_other_and_the_test_machine() {
    init_logs();
    let net = SharedNetwork::create().expect("create a network namespace (root, iproute2)");
    assert!(net.path().exists());
    let opts = || HostOptions {
        network: net.host_network(),
        ..HostOptions::default()
    };
    let mut a = SystemdHost::boot_with(opts()).expect("boot host a");
    let b = SystemdHost::boot_with(opts()).expect("boot host b");
    // A tiny TCP service in host a (systemd's own socket activation, as a transient unit).
    a.exec_ok(&[
        "systemd-run",
        "--unit=hello",
        "systemd-socket-activate",
        "--inetd",
        "--accept",
        "-l",
        "127.0.0.1:7070",
        "echo",
        "hello from a",
    ])
    .unwrap();
    let from_b = |b: &SystemdHost| {
        for _ in 0..50 {
            let out = b.exec(&tcp_read(7070)).unwrap();
            if out.success() {
                return out.stdout;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "host b never reached host a's port 7070: {}",
            b.exec(&tcp_read(7070)).unwrap()
        );
    };
    assert_eq!(from_b(&b), "hello from a\n");
    // A process of the test machine, in the namespace, reaches it too.
    let out = net
        .command("bash")
        .args(&tcp_read(7070)[1..])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from a\n");
    // The test machine's own network does not see it.
    let out = std::process::Command::new("bash")
        .args(&tcp_read(7070)[1..])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // A rebooted host comes back into the same namespace.
    a.exec(&["systemctl", "reboot"]).unwrap();
    a.wait_for_reboot(REBOOT_TIMEOUT).unwrap();
    a.exec_ok(&[
        "systemd-run",
        "--unit=hello",
        "systemd-socket-activate",
        "--inetd",
        "--accept",
        "-l",
        "127.0.0.1:7070",
        "echo",
        "hello from a",
    ])
    .unwrap();
    assert_eq!(from_b(&b), "hello from a\n");
    // Hosts with the default network are not in it.
    let c = boot();
    assert!(!c.exec(&tcp_read(7070)).unwrap().success());
    drop((a, b, c));
    let path = net.path().to_path_buf();
    drop(net);
    assert!(!path.exists(), "the namespace is deleted on drop");
}

#[test]
fn systemctl_reboot_comes_back_with_a_new_boot_id() {
    let mut host = boot();
    let first = host.boot_info().unwrap().clone();
    fs::write(host.path("/etc/survives-reboot"), "yes\n").unwrap();
    host.exec_ok(&["sh", "-c", "echo no > /run/gone-after-reboot"])
        .unwrap();

    // systemctl may be killed by the shutdown it started: its status does not matter.
    let _ = host.exec(&["systemctl", "reboot"]).unwrap();
    let second = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap();

    assert_eq!(second.boot_count, 2);
    assert_eq!(host.boot_count(), 2);
    assert_ne!(second.boot_id, first.boot_id);
    assert_eq!(second.system_state, "running");
    assert_eq!(
        host.exec_ok(&["cat", "/proc/sys/kernel/random/boot_id"])
            .unwrap()
            .trim(),
        second.boot_id
    );
    // A real reboot: /etc (disk) kept, /run (tmpfs) empty, the journal has both boots.
    assert_eq!(
        host.exec_ok(&["cat", "/etc/survives-reboot"]).unwrap(),
        "yes\n"
    );
    assert!(!host
        .exec(&["test", "-e", "/run/gone-after-reboot"])
        .unwrap()
        .success());
    let boots = host
        .exec_ok(&["journalctl", "--list-boots", "--no-pager"])
        .unwrap();
    assert_eq!(
        boots.lines().filter(|l| !l.contains("IDX")).count(),
        2,
        "{boots}"
    );
    assert!(host.log_tail(200).contains("boot 2 of"));
}

#[tokio::test]
async fn logind_reboot_with_flags_over_the_bus_reboots_the_host() {
    let mut host = boot();
    let first = host.boot_id().to_string();
    let conn = host.bus().await.unwrap();
    let reply = conn
        .call_method(
            Some("org.freedesktop.login1"),
            "/org/freedesktop/login1",
            Some("org.freedesktop.login1.Manager"),
            "RebootWithFlags",
            &(0u64,),
        )
        .await;
    // logind may lose the race between its reply and the bus going down: a dropped
    // connection is fine, a D-Bus error (e.g. access denied) is not.
    if let Err(e) = reply {
        assert!(
            !matches!(e, zbus::Error::MethodError(..) | zbus::Error::FDO(_)),
            "RebootWithFlags was refused: {e}"
        );
    }
    drop(conn);
    let second = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap();
    assert_eq!(second.boot_count, 2);
    assert_ne!(second.boot_id, first);

    // And again, to show the cycle repeats.
    let conn = host.bus().await.unwrap();
    let _ = conn
        .call_method(
            Some("org.freedesktop.login1"),
            "/org/freedesktop/login1",
            Some("org.freedesktop.login1.Manager"),
            "RebootWithFlags",
            &(0u64,),
        )
        .await;
    drop(conn);
    let third = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap();
    assert_eq!(third.boot_count, 3);
    assert_ne!(third.boot_id, second.boot_id);
    let conn = host.bus().await.unwrap();
    assert_eq!(bus::system_state(&conn).await.unwrap(), "running");
}

#[test]
fn wait_for_reboot_fails_clearly_without_a_reboot() {
    let mut host = boot();
    let err = host
        .wait_for_reboot(Duration::from_millis(300))
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("no reboot within"), "{msg}");
    assert!(msg.contains("last lines of"), "{msg}");
    // Still usable afterwards.
    assert_eq!(host.exec_ok(&["true"]).unwrap(), "");

    // A power-off is not a reboot.
    let _ = host.exec(&["systemctl", "poweroff"]).unwrap();
    let err = host.wait_for_reboot(REBOOT_TIMEOUT).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("without a reboot"), "{msg}");
    assert!(!host.is_running());
    let err = host.exec(&["true"]).unwrap_err();
    assert!(err.to_string().contains("is not running"), "{err}");
}

#[test]
fn drop_leaves_no_mounts_processes_cgroups_or_files() {
    let host = boot();
    let traces = Traces::of(&host);
    drop(host);
    traces.assert_gone();
}

#[test]
fn shutdown_reports_success_and_leaves_nothing() {
    let host = boot();
    let traces = Traces::of(&host);
    host.shutdown().unwrap();
    traces.assert_gone();
}

#[test]
fn a_panicking_test_leaves_nothing_behind() {
    let mut traces = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let host = boot();
        traces = Some(Traces::of(&host));
        panic!("a test fails while its host runs");
    }));
    assert!(result.is_err());
    traces.expect("the host booted").assert_gone();
}

#[test]
fn a_host_that_was_rebooting_is_cleaned_up_too() {
    let host = boot();
    let traces = Traces::of(&host);
    let _ = host.exec(&["systemctl", "reboot"]).unwrap();
    // Dropped while nspawn exits (or has exited) for the reboot, without wait_for_reboot.
    std::thread::sleep(Duration::from_millis(100));
    drop(host);
    traces.assert_gone();
}

#[test]
fn the_rootfs_cache_is_keyed_by_the_script() {
    init_logs();
    let rootfs = hearth_vm_tests::cached_rootfs().unwrap();
    let name = rootfs.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(name, format!("rootfs-{}", hearth_vm_tests::rootfs_key()));
    assert!(rootfs.starts_with(hearth_vm_tests::cache_dir()));
    assert!(Path::new(&rootfs).join("usr/lib/systemd/systemd").exists());
    // A second call finds it at once.
    let again = std::time::Instant::now();
    assert_eq!(hearth_vm_tests::cached_rootfs().unwrap(), rootfs);
    assert!(again.elapsed() < Duration::from_secs(1));
}
