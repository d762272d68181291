//! hearth's libostree backend on real sysroots whose deployments boot in systemd-nspawn (the
//! ostree fast tier, see hearth-vm-tests' `ostree` module): kernel arguments, the ledger, OS
//! pivots, kernel types, rollback, verification after the reboot. Each scenario runs both from
//! outside (libostree's external mode: the deployment is written as the new default) and from
//! inside the booted system (native mode: staged, finalized at shutdown by
//! ostree-finalize-staged.service; the production path).
//!
//! Needs root, systemd-nspawn and ostree; the first run builds the OS images (~4 minutes,
//! cached). No mocks: real libostree, real sysroots, real systemd.

use crate::os_common;

use std::time::Instant;

use hearth_config::model::KernelType;
use hearth_hostops::os::{Finalization, OsChange, OsError, RollbackOutcome};
use hearth_vm_tests::ostree::{refs, DEFAULT_KARGS};
use os_common::*;

fn finalization(mode: Mode) -> Finalization {
    match mode {
        Mode::Outside => Finalization::Written,
        Mode::Inside => Finalization::AtShutdown,
    }
}

// ---------------------------------------------------------------------------------------------

fn status_of_the_booted_deployment(mode: Mode) {
    init_logging();
    let host = boot_v1();
    let d = Driver::new(&host, mode);
    let v1 = host.images().commit(refs::V1).unwrap().to_string();
    let status = d.status(&host).unwrap();
    assert_eq!(status.backend, "ostree");
    assert_eq!(status.native, mode == Mode::Inside);
    let b = &status.booted;
    assert_eq!(b.id.osname, "debian");
    assert_eq!(b.id.checksum, v1);
    assert_eq!(b.id.serial, 0);
    assert!(b.booted && !b.staged && !b.pinned);
    assert_eq!(b.refspec.as_deref(), Some(refs::V1));
    assert_eq!(b.version.as_deref(), Some("v1"));
    assert_eq!(b.image, refs::V1);
    assert_eq!(b.kernel_type, KernelType::Default);
    assert_eq!(b.kernel_args, strings(&DEFAULT_KARGS));
    assert_eq!(b.boot_checksum.len(), 64);
    assert!(status.pending.is_none() && status.rollback.is_none());
    assert_eq!(status.deployments.len(), 1);
    // Nothing staged: verifying against "v1 with the default arguments" is clean.
    let expected = hearth_hostops::os::OsExpectation {
        deployment: Some(b.id.clone()),
        kernel_args: Some(strings(&DEFAULT_KARGS)),
    };
    assert_eq!(d.verify(&host, &expected).unwrap(), Vec::<String>::new());
    host.shutdown().unwrap();
}

#[test]
fn status_of_the_booted_deployment_outside() {
    status_of_the_booted_deployment(Mode::Outside);
}

#[test]
fn status_of_the_booted_deployment_inside() {
    status_of_the_booted_deployment(Mode::Inside);
}

// ---------------------------------------------------------------------------------------------

/// Seed 004's kernel arguments and `selinux=0`, then a delete of one hearth added and one the
/// image set (refused by the ledger), each staged, rebooted into and verified.
fn kernel_arguments(mode: Mode) {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, mode);
    let v1 = host.images().commit(refs::V1).unwrap().to_string();

    // 1. Append.
    let change = kargs_change(
        &[],
        &[
            "default_hugepagesz=1G",
            "hugepagesz=1G",
            "hugepages=32",
            "selinux=0",
        ],
    );
    let started = Instant::now();
    let staged = d.stage(&host, &change).unwrap();
    eprintln!("{mode:?}: kargs staged in {:?}", started.elapsed());
    let mut want = strings(&DEFAULT_KARGS);
    want.extend(strings(&[
        "default_hugepagesz=1G",
        "hugepagesz=1G",
        "hugepages=32",
        "selinux=0",
    ]));
    assert_eq!(staged.deployment.kernel_args, want);
    assert_eq!(
        staged.deployment.id.checksum, v1,
        "a kargs change keeps the commit"
    );
    assert_eq!(staged.deployment.id.serial, 1);
    assert_eq!(staged.finalization, finalization(mode));
    assert!(staged.pulled.is_none());
    assert!(staged.skipped_deletes.is_empty());
    assert_eq!(staged.from.serial, 0);
    let status = d.status(&host).unwrap();
    assert_eq!(status.pending.as_ref().unwrap().id, staged.deployment.id);
    assert_eq!(
        status.pending.as_ref().unwrap().staged,
        mode == Mode::Inside
    );
    // Before the reboot, verification says what is wrong.
    let before = d.verify(&host, &staged.expectation()).unwrap();
    assert!(
        before
            .iter()
            .any(|m| m.contains("not the staged deployment")),
        "{before:?}"
    );
    assert!(
        before.iter().any(|m| m.contains("hugepages=32 is missing")),
        "{before:?}"
    );

    host.reboot(REBOOT).unwrap();
    assert_eq!(
        host.kernel_args(),
        want,
        "boot entry: {}",
        host.boot_options()
    );
    assert_eq!(host.booted_entry().serial, 1);
    assert_eq!(
        d.verify(&host, &staged.expectation()).unwrap(),
        Vec::<String>::new()
    );
    let ledger = std::fs::read_to_string(host.live_path("/var/lib/hearth/kargs.json")).unwrap();
    assert!(ledger.contains("\"hearthAdded\""), "{ledger}");

    // 2. Delete one hearth added and one the image set: the second is skipped, with a reason.
    let change = kargs_change(&["hugepagesz=1G", "quiet"], &[]);
    let staged = d.stage(&host, &change).unwrap();
    assert_eq!(
        staged.skipped_deletes.len(),
        1,
        "{:?}",
        staged.skipped_deletes
    );
    assert_eq!(staged.skipped_deletes[0].argument, "quiet");
    assert!(
        staged.skipped_deletes[0]
            .reason
            .contains("not added by hearth"),
        "{}",
        staged.skipped_deletes[0].reason
    );
    let want: Vec<String> = want.into_iter().filter(|a| a != "hugepagesz=1G").collect();
    assert_eq!(staged.deployment.kernel_args, want);
    host.reboot(REBOOT).unwrap();
    assert_eq!(
        host.kernel_args(),
        want,
        "boot entry: {}",
        host.boot_options()
    );
    assert!(host.kernel_args().contains(&"quiet".to_string()));
    assert_eq!(
        d.verify(&host, &staged.expectation()).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(host.boot_count(), 3);
    host.shutdown().unwrap();
}

#[test]
fn kernel_arguments_outside() {
    kernel_arguments(Mode::Outside);
}

#[test]
fn kernel_arguments_inside() {
    kernel_arguments(Mode::Inside);
}

/// An argument hearth did not add can be adopted (a host taken over from the MCO), and then
/// removed.
#[test]
fn adopted_kernel_arguments_can_be_deleted() {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, Mode::Outside);
    let refused = d.stage(&host, &kargs_change(&["quiet"], &[])).unwrap();
    assert_eq!(refused.skipped_deletes.len(), 1);
    assert_eq!(
        d.adopt(&host, &strings(&["quiet", "not-present"])).unwrap(),
        strings(&["quiet"])
    );
    let staged = d.stage(&host, &kargs_change(&["quiet"], &[])).unwrap();
    assert!(
        staged.skipped_deletes.is_empty(),
        "{:?}",
        staged.skipped_deletes
    );
    assert!(!staged.deployment.kernel_args.contains(&"quiet".to_string()));
    host.reboot(REBOOT).unwrap();
    assert!(!host.kernel_args().contains(&"quiet".to_string()));
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
    host.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------

/// v1 → v2 pulled from the remote, keeping the kernel arguments.
fn pivot(mode: Mode) {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, mode);
    let v2 = host.images().commit(refs::V2).unwrap().to_string();
    let change = OsChange {
        os_image: Some(refs::V2.into()),
        kargs_append: strings(&["selinux=0"]),
        ..Default::default()
    };
    let started = Instant::now();
    let staged = d.stage(&host, &change).unwrap();
    eprintln!("{mode:?}: pivot staged in {:?}", started.elapsed());
    assert_eq!(staged.deployment.id.checksum, v2);
    assert_eq!(
        staged.pulled.as_deref(),
        Some(format!("hearth:{} ({v2})", refs::V2).as_str())
    );
    assert_eq!(
        staged.deployment.refspec.as_deref(),
        Some("hearth:hearth/debian/v2")
    );
    assert_eq!(staged.deployment.image, refs::V2);
    assert_eq!(staged.deployment.version.as_deref(), Some("v2"));
    let mut want = strings(&DEFAULT_KARGS);
    want.push("selinux=0".into());
    assert_eq!(staged.deployment.kernel_args, want);
    assert!(staged.space.iter().any(|c| c.what == "/boot"));
    assert!(staged
        .space
        .iter()
        .any(|c| c.detail.contains("objects to pull")));

    host.reboot(REBOOT).unwrap();
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
            .unwrap(),
        "v2\n"
    );
    assert_eq!(host.booted_entry().checksum, v2);
    assert_eq!(host.kernel_args(), want);
    assert_eq!(
        d.verify(&host, &staged.expectation()).unwrap(),
        Vec::<String>::new()
    );
    let status = d.status(&host).unwrap();
    assert_eq!(status.booted.image, refs::V2);
    assert_eq!(
        status.rollback.as_ref().unwrap().id.checksum,
        host.images().commit(refs::V1).unwrap()
    );
    host.shutdown().unwrap();
}

#[test]
fn pivot_v1_to_v2_outside() {
    pivot(Mode::Outside);
}

#[test]
fn pivot_v1_to_v2_inside() {
    pivot(Mode::Inside);
}

#[test]
fn pivot_to_a_commit_checksum_and_errors_name_the_image() {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, Mode::Outside);
    let v2 = host.images().commit(refs::V2).unwrap().to_string();
    let image = |i: &str| OsChange {
        os_image: Some(i.into()),
        ..Default::default()
    };
    let realtime = OsChange {
        kernel_type: Some((KernelType::Default, KernelType::Realtime)),
        ..Default::default()
    };

    // A ref the remote does not have.
    let e = d.stage(&host, &image("hearth/debian/v9")).unwrap_err();
    assert!(matches!(e, OsError::Pull { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("hearth/debian/v9") && msg.contains("remote hearth"),
        "{msg}"
    );
    // A container image reference that is not one (a digest cut short).
    let e = d
        .stage(
            &host,
            &image("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123"),
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("not a valid container image reference")
            && e.to_string().contains("64"),
        "{e}"
    );
    // Realtime without a mapping.
    let mut unmapped = Driver::new(&host, Mode::Outside);
    unmapped.config.kernel_types.clear();
    let e = unmapped.stage(&host, &realtime).unwrap_err();
    assert!(e.to_string().contains("not mapped"), "{e}");
    // No remote, and the ref is not in the sysroot's repository.
    let mut offline = Driver::new(&host, Mode::Outside);
    offline.config.remote = None;
    let e = offline.stage(&host, &image(refs::V2)).unwrap_err();
    assert!(matches!(e, OsError::NotFound { .. }), "{e:?}");
    assert!(e.to_string().contains("no remote is configured"), "{e}");
    // Nothing was staged by the failures.
    assert!(d.status(&host).unwrap().pending.is_none());

    // A commit checksum.
    let staged = d.stage(&host, &image(&v2)).unwrap();
    assert_eq!(staged.deployment.id.checksum, v2);
    assert_eq!(staged.deployment.image, v2);
    host.reboot(REBOOT).unwrap();
    assert_eq!(host.booted_entry().checksum, v2);
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
    // A kernel type needs a ref to derive the variant from.
    let e = d.stage(&host, &realtime).unwrap_err();
    assert!(e.to_string().contains("commit checksum"), "{e}");
    host.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------

/// default → realtime (v1-rt), then a pivot to v2 keeps realtime (v2-rt), then back to default.
fn kernel_type(mode: Mode) {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, mode);
    let commit = |r: &str| host.images().commit(r).unwrap().to_string();
    let (v1_rt, v2_rt, v2) = (commit(refs::V1_RT), commit(refs::V2_RT), commit(refs::V2));

    let staged = d
        .stage(
            &host,
            &OsChange {
                kernel_type: Some((KernelType::Default, KernelType::Realtime)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(staged.deployment.id.checksum, v1_rt);
    assert_eq!(staged.deployment.kernel_type, KernelType::Realtime);
    assert_eq!(staged.deployment.image, refs::V1);
    host.reboot(REBOOT).unwrap();
    assert_eq!(host.booted_entry().checksum, v1_rt);
    assert!(
        host.booted_entry().linux.contains("6.1.0-hearth-rt"),
        "{:?}",
        host.booted_entry()
    );
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-kernel-type"])
            .unwrap(),
        "realtime\n"
    );
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());

    // The pivot re-asserts the kernel type.
    let staged = d
        .stage(
            &host,
            &OsChange {
                os_image: Some(refs::V2.into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(staged.deployment.id.checksum, v2_rt);
    assert_eq!(staged.deployment.kernel_type, KernelType::Realtime);
    host.reboot(REBOOT).unwrap();
    assert_eq!(host.booted_entry().checksum, v2_rt);
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
            .unwrap(),
        "v2\n"
    );
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());

    // And back to the default kernel.
    let staged = d
        .stage(
            &host,
            &OsChange {
                kernel_type: Some((KernelType::Realtime, KernelType::Default)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(staged.deployment.id.checksum, v2);
    host.reboot(REBOOT).unwrap();
    assert_eq!(host.booted_entry().checksum, v2);
    assert!(host.booted_entry().linux.contains("vmlinuz-6.1.0-hearth"));
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
    host.shutdown().unwrap();
}

#[test]
fn kernel_type_outside() {
    kernel_type(Mode::Outside);
}

#[test]
fn kernel_type_inside() {
    kernel_type(Mode::Inside);
}

// ---------------------------------------------------------------------------------------------

/// A pending deployment is dropped; a booted one is rolled back from.
fn rollback(mode: Mode) {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, mode);
    let v1 = host.images().commit(refs::V1).unwrap().to_string();

    // Nothing to roll back to yet.
    let e = d.rollback(&host).unwrap_err();
    assert!(matches!(e, OsError::NoRollback(_)), "{e:?}");

    // Staged, then dropped before the reboot: the host boots what it had.
    let staged = d.stage(&host, &kargs_change(&[], &["nosmt"])).unwrap();
    match d.rollback(&host).unwrap() {
        RollbackOutcome::CancelledPending { dropped } => assert_eq!(dropped, staged.deployment.id),
        other => panic!("{other:?}"),
    }
    assert!(d.status(&host).unwrap().pending.is_none());
    host.reboot(REBOOT).unwrap();
    assert_eq!(host.booted_entry().serial, 0);
    assert_eq!(host.kernel_args(), strings(&DEFAULT_KARGS));

    // Staged and booted, then rolled back: the previous deployment boots again.
    let staged = d.stage(&host, &kargs_change(&[], &["nosmt"])).unwrap();
    host.reboot(REBOOT).unwrap();
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
    let new_id = staged.deployment.id.clone();
    let outcome = d.rollback(&host).unwrap();
    let RollbackOutcome::RolledBack { from, to } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(from, new_id);
    assert_eq!(to.checksum, v1);
    host.reboot(REBOOT).unwrap();
    assert_eq!(host.booted_entry().checksum, to.checksum);
    assert_eq!(host.booted_entry().serial, to.serial);
    assert_eq!(host.kernel_args(), strings(&DEFAULT_KARGS));
    // Verifying against the rolled-back deployment now names the difference.
    let diffs = d.verify(&host, &staged.expectation()).unwrap();
    assert!(
        diffs
            .iter()
            .any(|m| m.contains("not the staged deployment")),
        "{diffs:?}"
    );
    assert!(
        diffs.iter().any(|m| m.contains("nosmt is missing")),
        "{diffs:?}"
    );
    // The rolled-back-from deployment is the rollback target now.
    let status = d.status(&host).unwrap();
    assert_eq!(status.rollback.unwrap().id, new_id);
    host.shutdown().unwrap();
}

#[test]
fn rollback_outside() {
    rollback(Mode::Outside);
}

#[test]
fn rollback_inside() {
    rollback(Mode::Inside);
}

// ---------------------------------------------------------------------------------------------

/// Staging again before the reboot replaces the pending deployment (the agent re-runs `stage`
/// after a crash between staging and rebooting): one deployment boots, with the last change.
fn staging_again_replaces_the_pending_deployment(mode: Mode) {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, mode);
    let first = d.stage(&host, &kargs_change(&[], &["nosmt"])).unwrap();
    let second = d
        .stage(&host, &kargs_change(&[], &["nosmt", "mitigations=off"]))
        .unwrap();
    assert_ne!(first.deployment.id, second.deployment.id);
    let status = d.status(&host).unwrap();
    assert_eq!(status.pending.as_ref().unwrap().id, second.deployment.id);
    assert_eq!(status.deployments.len(), 2, "{:?}", status.deployments);
    host.reboot(REBOOT).unwrap();
    assert!(d.verify(&host, &second.expectation()).unwrap().is_empty());
    let mut want = strings(&DEFAULT_KARGS);
    want.extend(strings(&["nosmt", "mitigations=off"]));
    assert_eq!(host.kernel_args(), want);
    assert_eq!(host.sysroot().entries().unwrap().len(), 2);
    host.shutdown().unwrap();
}

#[test]
fn staging_again_replaces_the_pending_deployment_outside() {
    staging_again_replaces_the_pending_deployment(Mode::Outside);
}

#[test]
fn staging_again_replaces_the_pending_deployment_inside() {
    staging_again_replaces_the_pending_deployment(Mode::Inside);
}

// ---------------------------------------------------------------------------------------------

/// A pivot pulled over HTTP: the images' archive repository served by a small HTTP server in
/// this process (from outside only: the containers have no network).
#[test]
fn pivot_over_http_outside() {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    init_logging();
    let mut host = boot_v1();
    let repo = host.images().repo.clone();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (repo, counter) = (repo.clone(), counter.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                let _ = reader.read_line(&mut request);
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                }
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                let file = repo.join(path.trim_start_matches('/'));
                let mut stream = stream;
                match std::fs::read(&file) {
                    Ok(body) if !path.contains("..") => {
                        counter.fetch_add(1, Ordering::Relaxed);
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(&body);
                    }
                    _ => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                    }
                }
            });
        }
    });

    let mut d = Driver::new(&host, Mode::Outside);
    d.config.remote.as_mut().unwrap().url = Some(url.clone());
    let staged = d
        .stage(
            &host,
            &OsChange {
                os_image: Some(refs::V2.into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(
        served.load(Ordering::Relaxed) > 3,
        "the pull did not use {url}"
    );
    assert_eq!(
        staged.deployment.id.checksum,
        host.images().commit(refs::V2).unwrap()
    );
    host.reboot(REBOOT).unwrap();
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
            .unwrap(),
        "v2\n"
    );
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
    // The remote is configured in the booted deployment's /etc, as `ostree remote add` does.
    let conf = host
        .exec_ok(&["cat", "/etc/ostree/remotes.d/hearth.conf"])
        .unwrap();
    assert!(conf.contains(&url), "{conf}");
    host.shutdown().unwrap();
}

// ---------------------------------------------------------------------------------------------

/// What the OS backend needs on top of the agent unit's hardening (units/hearth-agent.service):
/// nothing on a host whose /sysroot is writable (see docs/os-layer.md, "The agent's unit").
/// Kept as the place to add properties if the unit's hardening grows.
const UNIT_ADDITIONS: &[&str] = &[];

/// The hardening properties of units/hearth-agent.service's `[Service]` section (everything
/// but how the service starts, restarts and notifies).
fn agent_unit_hardening() -> Vec<String> {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../units/hearth-agent.service"),
    )
    .unwrap();
    let mut in_service = false;
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
            continue;
        }
        if !in_service || line.starts_with('#') || !line.contains('=') {
            continue;
        }
        let key = line.split('=').next().unwrap();
        let skip = [
            "Type",
            "NotifyAccess",
            "EnvironmentFile",
            "ExecStart",
            "Restart",
            "RestartSec",
            "TimeoutStartSec",
            "WatchdogSec",
            "Environment",
        ];
        if !skip.contains(&key) {
            out.push(line.to_string());
        }
    }
    out
}

/// Staging from inside a transient unit with the agent unit's hardening (plus
/// [`UNIT_ADDITIONS`]), then the reboot, then the verification.
#[test]
fn staging_works_under_the_agent_units_hardening() {
    init_logging();
    let mut host = boot_v1();
    let d = Driver::new(&host, Mode::Inside);
    let binary = host.test_binary_inside().unwrap();
    let mut properties = agent_unit_hardening();
    properties.extend(UNIT_ADDITIONS.iter().map(|s| s.to_string()));
    eprintln!("properties: {properties:?}");
    let change = kargs_change(&[], &["hugepages=32"]);
    let op = serde_json::to_string(&GuestOp::Stage {
        config: d.config.clone(),
        change,
    })
    .unwrap();
    let mut argv = vec![
        "systemd-run".to_string(),
        "--wait".into(),
        "--pipe".into(),
        "--collect".into(),
        "--quiet".into(),
        format!("--setenv={GUEST_ENV}={op}"),
        // The helper process (libostree) runs under the same hardening, as the agent's child.
        format!(
            "--setenv={}={HELPER_INSIDE}",
            hearth_hostops::os::ostree::HELPER_ENV
        ),
    ];
    install_helper_inside(&host);
    for p in &properties {
        argv.push(format!("--property={p}"));
    }
    argv.extend(
        [
            binary.as_str(),
            "--exact",
            "guest_entry_point",
            "--nocapture",
            "--test-threads=1",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let out = host.exec(&argv).unwrap();
    eprintln!("{out}");
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.split_once(RESULT_MARKER).map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no result from the guest: {out}"));
    let reply: Result<GuestReply, hearth_hostops::os::OsError> =
        serde_json::from_str(line).unwrap();
    let GuestReply::Staged { staged, .. } = reply.unwrap() else {
        panic!("unexpected reply");
    };
    host.reboot(REBOOT).unwrap();
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
    assert!(host.kernel_args().contains(&"hugepages=32".to_string()));
    // The booted deployment's root is immutable (chattr +i), as libostree makes it: the unit
    // keeps CAP_LINUX_IMMUTABLE for that (and ostree-finalize-staged.service, with full
    // privileges, would do it at shutdown otherwise).
    let attrs = std::process::Command::new("lsattr")
        .arg("-d")
        .arg(host.deployment_root())
        .output()
        .unwrap();
    let attrs = String::from_utf8_lossy(&attrs.stdout).to_string();
    let flags = attrs.split_whitespace().next().unwrap_or_default();
    assert!(flags.contains('i'), "{attrs}");
    host.shutdown().unwrap();
}
