//! `hearth_hostops::systemd` against the real thing: each test boots a Debian 12 systemd with
//! its own system bus in systemd-nspawn (`hearth_vm_tests::SystemdHost`) and drives it over
//! D-Bus, checking the outcome with `systemctl` inside the container and with the files on its
//! disk.
//!
//! These tests need root, systemd-nspawn and (for the first build of the cached root
//! filesystem) debootstrap: `vm-tests/scripts/install-deps.sh`. Without them they fail, saying
//! so; they never skip.

use std::fs;
use std::time::{Duration, Instant};

use hearth_hostops::systemd::{JobOp, Systemd, SystemdError};
use hearth_vm_tests::SystemdHost;

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("hearth_hostops=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

fn boot() -> SystemdHost {
    init_logs();
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests boot systemd in systemd-nspawn and must run as root \
         (see vm-tests/scripts/install-deps.sh)"
    );
    match SystemdHost::boot() {
        Ok(host) => host,
        Err(e) => panic!(
            "could not boot a test host (these tests need root, systemd-nspawn and \
             debootstrap: run vm-tests/scripts/install-deps.sh as root):\n{e:#}"
        ),
    }
}

async fn connect(host: &SystemdHost) -> Systemd {
    Systemd::connect_with_root(&host.bus_address(), host.root())
        .await
        .expect("connect to the container's system bus")
}

fn write_unit(host: &SystemdHost, name: &str, content: &str) {
    let path = host.path(format!("/etc/systemd/system/{name}"));
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

/// `systemctl is-enabled UNIT` inside the container (its stdout, whatever the exit code).
fn is_enabled(host: &SystemdHost, unit: &str) -> String {
    host.exec(&["systemctl", "is-enabled", unit])
        .unwrap()
        .stdout
        .trim()
        .to_string()
}

fn names(units: &[&str]) -> Vec<String> {
    units.iter().map(|u| u.to_string()).collect()
}

const WANTED_UNIT: &str = "[Unit]\nDescription=hearth test unit\n\
    [Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n\
    [Install]\nWantedBy=multi-user.target\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_disable_mask_unmask() {
    let host = boot();
    let sd = connect(&host).await;
    write_unit(&host, "hearth-a.service", WANTED_UNIT);
    sd.daemon_reload().await.unwrap();
    assert_eq!(
        sd.unit_file_state("hearth-a.service").await.unwrap(),
        Some("disabled".into())
    );

    let wants = host.path("/etc/systemd/system/multi-user.target.wants/hearth-a.service");
    sd.enable(&names(&["hearth-a.service"])).await.unwrap();
    assert_eq!(is_enabled(&host, "hearth-a.service"), "enabled");
    assert_eq!(
        fs::read_link(&wants).unwrap().to_str().unwrap(),
        "/etc/systemd/system/hearth-a.service"
    );
    assert_eq!(
        sd.unit_file_state("hearth-a.service").await.unwrap(),
        Some("enabled".into())
    );
    // Enabling again changes nothing and is not an error.
    sd.enable(&names(&["hearth-a.service"])).await.unwrap();

    sd.disable(&names(&["hearth-a.service"])).await.unwrap();
    assert_eq!(is_enabled(&host, "hearth-a.service"), "disabled");
    assert!(
        fs::symlink_metadata(&wants).is_err(),
        "the .wants link is gone"
    );

    // Mask: a link to /dev/null in /etc/systemd/system. The unit file of this one is in
    // /etc/systemd/system itself, where systemd refuses to put a mask over it; mask a unit
    // from /usr/lib instead (the image's systemd-timesyncd-free units: use one we ship).
    fs::create_dir_all(host.path("/usr/lib/systemd/system")).unwrap();
    fs::write(
        host.path(
            // Debian builds systemd with /lib/systemd/system first in its search path.
            "/lib/systemd/system/hearth-vendor.service",
        ),
        WANTED_UNIT,
    )
    .unwrap();
    sd.daemon_reload().await.unwrap();
    sd.mask(&names(&["hearth-vendor.service"])).await.unwrap();
    let mask = host.path("/etc/systemd/system/hearth-vendor.service");
    assert_eq!(fs::read_link(&mask).unwrap().to_str().unwrap(), "/dev/null");
    assert_eq!(is_enabled(&host, "hearth-vendor.service"), "masked");
    sd.daemon_reload().await.unwrap();
    let err = sd.start("hearth-vendor.service").await.unwrap_err();
    assert!(
        matches!(err, SystemdError::Masked { .. }),
        "starting a masked unit: {err}"
    );
    println!("start of a masked unit: {err}");
    // Enabling a masked unit is refused too.
    let err = sd
        .enable(&names(&["hearth-vendor.service"]))
        .await
        .unwrap_err();
    assert!(matches!(err, SystemdError::Masked { .. }), "{err}");

    sd.unmask(&names(&["hearth-vendor.service"])).await.unwrap();
    assert!(fs::symlink_metadata(&mask).is_err(), "the mask is gone");
    assert_eq!(is_enabled(&host, "hearth-vendor.service"), "disabled");
    sd.enable(&names(&["hearth-vendor.service"])).await.unwrap();
    assert_eq!(
        fs::read_link(
            host.path("/etc/systemd/system/multi-user.target.wants/hearth-vendor.service")
        )
        .unwrap()
        .to_str()
        .unwrap(),
        // Debian builds systemd with /lib/systemd/system first in its search path.
        "/lib/systemd/system/hearth-vendor.service"
    );
    assert_eq!(is_enabled(&host, "hearth-vendor.service"), "enabled");

    // Mask over a unit file in /etc/systemd/system is refused by systemd (it would destroy the
    // file): that is a D-Bus error, not a silent success.
    let err = sd.mask(&names(&["hearth-a.service"])).await.unwrap_err();
    println!("mask over a unit file in /etc: {err}");
    assert!(matches!(err, SystemdError::Bus { .. }), "{err}");
    assert!(err.to_string().contains("hearth-a.service"), "{err}");
    assert!(
        fs::metadata(host.path("/etc/systemd/system/hearth-a.service"))
            .unwrap()
            .is_file()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preset_follows_the_preset_files() {
    let host = boot();
    let sd = connect(&host).await;
    for unit in [
        "hearth-on.service",
        "hearth-off.service",
        "hearth-nomatch.service",
    ] {
        write_unit(&host, unit, WANTED_UNIT);
    }
    fs::create_dir_all(host.path("/etc/systemd/system-preset")).unwrap();
    fs::write(
        host.path("/etc/systemd/system-preset/10-hearth.preset"),
        "# hearth test policy\nenable hearth-on.service\ndisable hearth-off.*\n",
    )
    .unwrap();
    sd.daemon_reload().await.unwrap();
    // hearth-off starts enabled: preset must disable it.
    sd.enable(&names(&["hearth-off.service"])).await.unwrap();
    assert_eq!(is_enabled(&host, "hearth-off.service"), "enabled");

    sd.preset(&names(&[
        "hearth-on.service",
        "hearth-off.service",
        "hearth-nomatch.service",
    ]))
    .await
    .unwrap();
    assert_eq!(is_enabled(&host, "hearth-on.service"), "enabled");
    assert_eq!(is_enabled(&host, "hearth-off.service"), "disabled");
    // No line matches and the image has no catch-all "disable *": enabled (systemd.preset(5)).
    assert_eq!(is_enabled(&host, "hearth-nomatch.service"), "enabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabling_a_unit_without_install_section_is_not_an_error() {
    let host = boot();
    let sd = connect(&host).await;
    write_unit(
        &host,
        "hearth-static.service",
        "[Service]\nType=oneshot\nExecStart=/bin/true\n",
    );
    sd.daemon_reload().await.unwrap();
    sd.enable(&names(&["hearth-static.service"])).await.unwrap();
    assert_eq!(is_enabled(&host, "hearth-static.service"), "static");
    assert_eq!(
        sd.unit_file_state("hearth-static.service").await.unwrap(),
        Some("static".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_restart_reload_stop_are_checked_jobs() {
    let host = boot();
    let sd = connect(&host).await;
    write_unit(
        &host,
        "hearth-count.service",
        "[Service]\nType=oneshot\nRemainAfterExit=yes\n\
         ExecStart=/bin/sh -c 'echo start >> /var/lib/hearth-count'\n\
         ExecReload=/bin/sh -c 'echo reload >> /var/lib/hearth-count'\n\
         ExecStop=/bin/sh -c 'echo stop >> /var/lib/hearth-count'\n",
    );
    sd.daemon_reload().await.unwrap();
    assert_eq!(
        sd.active_state("hearth-count.service").await.unwrap(),
        "inactive"
    );
    let count = || fs::read_to_string(host.path("/var/lib/hearth-count")).unwrap_or_default();

    sd.start("hearth-count.service").await.unwrap();
    // The job is done when start returns: no polling needed.
    assert_eq!(count(), "start\n");
    assert_eq!(
        sd.active_state("hearth-count.service").await.unwrap(),
        "active"
    );
    // Starting an active unit is a job that is done at once.
    sd.start("hearth-count.service").await.unwrap();
    assert_eq!(count(), "start\n");

    sd.restart("hearth-count.service").await.unwrap();
    assert_eq!(count(), "start\nstop\nstart\n");
    sd.reload("hearth-count.service").await.unwrap();
    assert_eq!(count(), "start\nstop\nstart\nreload\n");
    sd.stop("hearth-count.service").await.unwrap();
    assert_eq!(count(), "start\nstop\nstart\nreload\nstop\n");

    // Jobs of several units at once, on one connection: each waits for its own job.
    for i in 0..4 {
        write_unit(
            &host,
            &format!("hearth-par{i}.service"),
            &format!(
                "[Service]\nType=oneshot\nRemainAfterExit=yes\n\
                 ExecStart=/bin/sh -c 'sleep 0.{}; touch /var/lib/hearth-par{i}'\n",
                4 - i
            ),
        );
    }
    sd.daemon_reload().await.unwrap();
    let (a, b, c, d) = tokio::join!(
        sd.start("hearth-par0.service"),
        sd.start("hearth-par1.service"),
        sd.start("hearth-par2.service"),
        sd.start("hearth-par3.service"),
    );
    for r in [a, b, c, d] {
        r.unwrap();
    }
    for i in 0..4 {
        assert!(host.path(format!("/var/lib/hearth-par{i}")).exists());
    }
    assert_eq!(
        sd.active_state("hearth-count.service").await.unwrap(),
        "inactive"
    );
    assert_eq!(sd.system_state().await.unwrap(), "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_unit_reports_result_exit_status_and_journal() {
    let host = boot();
    let sd = connect(&host).await;
    write_unit(
        &host,
        "hearth-fail.service",
        "[Unit]\nDescription=hearth failing unit\n\
         [Service]\nType=oneshot\n\
         ExecStart=/bin/sh -c 'echo hearth-test-marker; echo to-stderr >&2; exit 3'\n",
    );
    sd.daemon_reload().await.unwrap();
    let started = Instant::now();
    let err = sd.start("hearth-fail.service").await.unwrap_err();
    let took = started.elapsed();
    println!("start of a failing unit took {took:?}; the error reads:\n{err}");
    let SystemdError::UnitFailed {
        unit,
        op,
        job_result,
        state,
        journal,
    } = &err
    else {
        panic!("expected UnitFailed, got {err:?}");
    };
    assert_eq!(unit, "hearth-fail.service");
    assert_eq!(*op, JobOp::Start);
    assert_eq!(job_result, "failed");
    assert_eq!(state.active_state, "failed");
    assert_eq!(state.sub_state, "failed");
    assert_eq!(state.result.as_deref(), Some("exit-code"));
    assert_eq!(state.exec_main_code, Some(1), "CLD_EXITED");
    assert_eq!(state.exec_main_status, Some(3));
    assert!(
        journal.iter().any(|l| l.contains("hearth-test-marker")),
        "{journal:#?}"
    );
    assert!(
        journal.iter().any(|l| l.contains("to-stderr")),
        "{journal:#?}"
    );
    assert!(journal.len() <= 20);
    let text = err.to_string();
    assert!(
        text.starts_with(
            "unit hearth-fail.service failed to start (job result: failed; state: failed/failed, \
             result: exit-code, exit status 3); last log lines:\n  "
        ),
        "{text}"
    );
    assert!(text.contains("hearth-test-marker"), "{text}");

    // /bin/false: exit status 1; restart of a failed unit fails the same way.
    write_unit(
        &host,
        "hearth-false.service",
        "[Service]\nType=oneshot\nExecStart=/bin/false\n",
    );
    sd.daemon_reload().await.unwrap();
    let err = sd.restart("hearth-false.service").await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("unit hearth-false.service failed to restart (job result: failed; state: failed/failed, result: exit-code, exit status 1)"),
        "{err}"
    );

    // Killed by a signal: said so.
    write_unit(
        &host,
        "hearth-killed.service",
        "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'kill -9 $$$$'\n",
    );
    sd.daemon_reload().await.unwrap();
    let err = sd.start("hearth-killed.service").await.unwrap_err();
    assert!(
        err.to_string().starts_with(
            "unit hearth-killed.service failed to start (job result: failed; state: \
             failed/failed, result: signal, killed by signal 9)"
        ),
        "{err}"
    );

    // A dependency that fails: the job result says so.
    write_unit(
        &host,
        "hearth-needs-fail.service",
        "[Unit]\nRequires=hearth-fail.service\nAfter=hearth-fail.service\n\
         [Service]\nType=oneshot\nExecStart=/bin/true\n",
    );
    sd.daemon_reload().await.unwrap();
    let err = sd.start("hearth-needs-fail.service").await.unwrap_err();
    let SystemdError::UnitFailed {
        job_result, state, ..
    } = &err
    else {
        panic!("expected UnitFailed, got {err:?}");
    };
    assert_eq!(job_result, "dependency", "{err}");
    // It never ran: no exit status in the message.
    assert_eq!(state.exec_main_code, Some(0));
    assert!(
        err.to_string().starts_with(
            "unit hearth-needs-fail.service failed to start (job result: dependency; \
             state: inactive/dead, result: success); last log lines:\n"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_takes_too_long_times_out() {
    let host = boot();
    let sd = connect(&host)
        .await
        .with_job_timeout(Duration::from_millis(500));
    write_unit(
        &host,
        "hearth-slow.service",
        "[Service]\nType=oneshot\nExecStart=/bin/sleep 30\n",
    );
    sd.daemon_reload().await.unwrap();
    let started = Instant::now();
    let err = sd.start("hearth-slow.service").await.unwrap_err();
    assert!(
        matches!(&err, SystemdError::Timeout { unit, op: JobOp::Start, .. } if unit == "hearth-slow.service"),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.to_string(),
        "timed out after 500ms waiting for the start job of hearth-slow.service to finish"
    );
    // The job is systemd's: it is still running; stopping cancels it.
    assert_eq!(
        sd.active_state("hearth-slow.service").await.unwrap(),
        "activating"
    );
    let sd = sd.with_job_timeout(Duration::from_secs(30));
    sd.stop("hearth-slow.service").await.unwrap();
    // The stop job is done; the oneshot whose start was cut short by SIGTERM is "failed".
    let state = sd.active_state("hearth-slow.service").await.unwrap();
    assert!(state == "failed" || state == "inactive", "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_units() {
    let host = boot();
    let sd = connect(&host).await;
    assert_eq!(
        sd.unit_file_state("hearth-nope.service").await.unwrap(),
        None
    );
    let err = sd.start("hearth-nope.service").await.unwrap_err();
    assert!(err.is_no_such_unit(), "{err:?}");
    assert!(err.to_string().contains("hearth-nope.service"), "{err}");
    let err = sd
        .enable(&names(&["hearth-nope.service"]))
        .await
        .unwrap_err();
    assert!(err.is_no_such_unit(), "{err:?}");
    // Disabling one is an error too over D-Bus (offline::disable, like `systemctl --root`,
    // only warns).
    let err = sd
        .disable(&names(&["hearth-nope.service"]))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no such unit: hearth-nope.service (Unit file hearth-nope.service does not exist.)"
    );
    assert_eq!(
        sd.active_state("hearth-nope.service").await.unwrap(),
        "inactive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_in_takes_effect_after_daemon_reload() {
    let host = boot();
    let sd = connect(&host).await;
    write_unit(
        &host,
        "hearth-env.service",
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nEnvironment=FROM_UNIT=1\n\
         ExecStart=/bin/sh -c 'echo \"$FROM_UNIT $FROM_DROPIN\" > /var/lib/hearth-env'\n",
    );
    sd.daemon_reload().await.unwrap();
    let show = || {
        host.exec_ok(&[
            "systemctl",
            "show",
            "-p",
            "Environment",
            "hearth-env.service",
        ])
        .unwrap()
        .trim()
        .to_string()
    };
    let env = || fs::read_to_string(host.path("/var/lib/hearth-env")).unwrap();
    // Started (and, RemainAfterExit, kept loaded and active) with the unit file alone.
    sd.start("hearth-env.service").await.unwrap();
    assert_eq!(env(), "1 \n");
    assert_eq!(show(), "Environment=FROM_UNIT=1");

    write_unit(
        &host,
        "hearth-env.service.d/10-hearth.conf",
        "[Service]\nEnvironment=FROM_DROPIN=2\n",
    );
    // Not yet: systemd keeps the loaded definition until it reloads. (NeedDaemonReload stays
    // "no" here: systemd 252 does not notice a drop-in directory that did not exist at load.)
    assert_eq!(show(), "Environment=FROM_UNIT=1");
    sd.daemon_reload().await.unwrap();
    assert_eq!(show(), "Environment=FROM_UNIT=1 FROM_DROPIN=2");
    sd.restart("hearth-env.service").await.unwrap();
    assert_eq!(env(), "1 2\n");
}
