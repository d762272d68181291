//! hearth's rpm-ostree backend against a STAND-IN rpm-ostree daemon (rpm-ostree cannot run on
//! these Debian machines). The stand-in (`tests/rpmostree_standin/`) implements the documented
//! D-Bus interface on a real, private `dbus-daemon`, with real peer-to-peer transaction
//! connections and real signals, and keeps deployments in memory. Every test name contains
//! `standin`: what these tests prove is that hearth speaks the interface as documented and
//! reacts correctly to what a daemon that behaves as the stand-in does answers; docs/os-layer.md
//! says what this does not prove about the real daemon.
//!
//! Each test asserts what the backend SENT (methods and arguments, as the stand-in recorded
//! them) as well as what it returned.

mod rpmostree_standin;

use std::collections::BTreeSet;
use std::path::Path;

use hearth_config::model::KernelType;
use hearth_config::plan::Action;
use hearth_hostops::os::ledger::KargLedger;
use hearth_hostops::os::rpmostree::{
    DEFAULT_KERNEL_PACKAGES, KERNEL_64K_PACKAGES, REALTIME_KERNEL_PACKAGES,
};
use hearth_hostops::os::{
    Finalization, OsBackend, OsChange, OsError, RollbackOutcome, RpmOstreeBackend,
    NOT_OSTREE_REASON, RPM_OSTREE_REASON,
};
use rpmostree_standin::{Deployment, PrivateBus, Standin};
use serde_json::json;

const OS: &str = "rhcos";
const FCOS: &str = "fedora:fedora/x86_64/coreos/stable";

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A root that looks like an rpm-ostree host to detection, where the ledger is kept.
fn rpm_ostree_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for f in ["run/ostree-booted", "usr/bin/rpm-ostree"] {
        let p = root.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    root
}

struct Env {
    standin: Standin,
    backend: OsBackend,
    root: tempfile::TempDir,
    // Last: the bus outlives the service.
    _bus: PrivateBus,
}

async fn env(deployments: Vec<Deployment>) -> Env {
    init_logging();
    let bus = PrivateBus::start();
    let standin = Standin::start(&bus.address, deployments).await;
    let root = rpm_ostree_root();
    let backend = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(backend.kind(), "rpm-ostree", "{backend:?}");
    assert_eq!(backend.unsupported_reason(), None);
    assert_eq!(backend.root(), Some(root.path()));
    standin.clear_calls();
    Env {
        standin,
        backend,
        root,
        _bus: bus,
    }
}

fn fcos(kargs: &[&str]) -> Deployment {
    Deployment::booted(OS, FCOS, "39.20240101.3.0", kargs)
}

fn kargs_change(delete: &[&str], append: &[&str]) -> OsChange {
    OsChange {
        kargs_delete: s(delete),
        kargs_append: s(append),
        ..Default::default()
    }
}

/// The OS methods that started transactions, in order.
fn transactions(standin: &Standin) -> Vec<String> {
    standin
        .calls()
        .into_iter()
        .filter(|c| c.interface == "OS" && c.transaction.is_some())
        .map(|c| c.method)
        .collect()
}

fn set(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn strs(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_status_reads_deployments_and_boot_configs() {
    let mut rollback = Deployment::booted(OS, FCOS, "39.20231201.3.0", &["rw", "quiet"]);
    rollback.booted = false;
    rollback.base_checksum = "1".repeat(64);
    rollback.checksum = "1".repeat(64);
    rollback.pinned = true;
    let booted = fcos(&["rw", "quiet", "mitigations=auto,nosmt"]);
    let e = env(vec![booted.clone(), rollback.clone()]).await;

    let status = e.backend.status().await.unwrap();
    assert_eq!(status.backend, "rpm-ostree");
    assert_eq!(status.deployments.len(), 2);
    let b = &status.booted;
    assert_eq!(b.id.osname, OS);
    assert_eq!(b.id.checksum, booted.checksum);
    assert_eq!(b.id.serial, 0);
    assert_eq!(b.index, 0);
    assert!(b.booted && !b.staged && !b.pinned);
    assert_eq!(b.refspec.as_deref(), Some(FCOS));
    assert_eq!(b.image, FCOS);
    assert_eq!(b.version.as_deref(), Some("39.20240101.3.0"));
    assert_eq!(b.kernel_type, KernelType::Default);
    // From GetDeploymentBootConfig's `options`, without ostree=.
    assert_eq!(b.kernel_args, s(&["rw", "quiet", "mitigations=auto,nosmt"]));
    assert_eq!(b.boot_checksum, booted.boot_csum);
    assert!(status.pending.is_none());
    let r = status.rollback.as_ref().expect("a rollback deployment");
    assert_eq!(r.id.checksum, "1".repeat(64));
    assert!(r.pinned && !r.booted);
    assert_eq!(r.kernel_args, s(&["rw", "quiet"]));

    // What was sent: a registered client, one boot config per deployment (by index).
    let calls = e.standin.calls();
    assert_eq!(calls[0].method, "RegisterClient");
    assert_eq!(calls[0].args, json!({"options": {"id": "hearth"}}));
    let configs: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "GetDeploymentBootConfig")
        .map(|c| c.args.clone())
        .collect();
    assert_eq!(
        configs,
        vec![
            json!({"deployid": "0", "is_pending": false}),
            json!({"deployid": "1", "is_pending": false})
        ]
    );
    assert_eq!(calls.last().unwrap().method, "UnregisterClient");
    assert!(e.standin.clients().is_empty(), "the client unregistered");
    assert!(
        transactions(&e.standin).is_empty(),
        "status starts no transaction"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_status_of_a_container_booted_realtime_host() {
    let image = format!(
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
        "ab".repeat(32)
    );
    let mut d = Deployment::booted(
        OS,
        &format!("ostree-unverified-registry:{image}"),
        "416.94.202405291527-0",
        &["rw"],
    );
    d.requested_packages = s(&REALTIME_KERNEL_PACKAGES);
    d.requested_base_removals = s(&DEFAULT_KERNEL_PACKAGES);
    let e = env(vec![d]).await;
    let b = e.backend.status().await.unwrap().booted;
    assert_eq!(b.image, image, "the transport is not part of the image");
    assert_eq!(
        b.refspec.as_deref(),
        Some(format!("ostree-unverified-registry:{image}").as_str())
    );
    assert_eq!(b.kernel_type, KernelType::Realtime);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_kernel_args_append_and_delete_follow_the_ledger() {
    let e = env(vec![fcos(&["rw", "quiet", "mitigations=auto"])]).await;

    // Append: one KernelArgs transaction with the whole list.
    let staged = e
        .backend
        .stage(&kargs_change(&[], &["hugepages=32", "selinux=0"]))
        .await
        .unwrap();
    let want = s(&[
        "rw",
        "quiet",
        "mitigations=auto",
        "hugepages=32",
        "selinux=0",
    ]);
    assert_eq!(staged.deployment.kernel_args, want);
    assert!(staged.deployment.staged);
    assert_eq!(staged.finalization, Finalization::AtShutdown);
    assert!(staged.skipped_deletes.is_empty());
    assert_eq!(transactions(&e.standin), ["KernelArgs"]);
    let k = &e.standin.calls_of("KernelArgs")[0];
    assert_eq!(
        k.args,
        json!({
            "existing_kernel_arg_string": "rw quiet mitigations=auto",
            "kernel_args_added": [],
            "kernel_args_replaced": [],
            "kernel_args_removed": [],
            "options": {
                "final-kernel-args": "rw quiet mitigations=auto hugepages=32 selinux=0",
                "initiating-command-line": "hearth-agent"
            }
        })
    );
    // Start was called on the transaction, and the client synced with Reload.
    assert!(e
        .standin
        .calls()
        .iter()
        .any(|c| c.interface == "Transaction" && c.method == "Start"));
    assert!(!e.standin.calls_of("Reload").is_empty());
    // The ledger records hearth's arguments.
    let ledger = KargLedger::new(e.root.path()).load().unwrap();
    assert_eq!(
        ledger.hearth_added(&want),
        s(&["hugepages=32", "selinux=0"])
    );

    e.standin.reboot();
    assert!(e
        .backend
        .verify_booted(&staged.expectation())
        .await
        .unwrap()
        .is_empty());

    // Delete: hearth's argument goes, the image's stays (skipped, with the reason).
    e.standin.clear_calls();
    let staged = e
        .backend
        .stage(&kargs_change(&["selinux=0", "quiet"], &[]))
        .await
        .unwrap();
    assert_eq!(
        staged.deployment.kernel_args,
        s(&["rw", "quiet", "mitigations=auto", "hugepages=32"])
    );
    assert_eq!(staged.skipped_deletes.len(), 1);
    assert_eq!(staged.skipped_deletes[0].argument, "quiet");
    assert!(
        staged.skipped_deletes[0]
            .reason
            .contains("not added by hearth"),
        "{}",
        staged.skipped_deletes[0].reason
    );
    let k = &e.standin.calls_of("KernelArgs")[0];
    assert_eq!(
        k.args["options"]["final-kernel-args"],
        "rw quiet mitigations=auto hugepages=32"
    );
    assert_eq!(
        k.args["existing_kernel_arg_string"],
        "rw quiet mitigations=auto hugepages=32 selinux=0"
    );
    assert_eq!(transactions(&e.standin), ["KernelArgs"]);

    // A quoted argument with spaces cannot go through final-kernel-args: refused, nothing sent.
    e.standin.clear_calls();
    let err = e
        .backend
        .stage(&kargs_change(&[], &["dyndbg=\"file x.c +p\""]))
        .await
        .unwrap_err();
    assert!(matches!(err, OsError::InvalidChange(_)), "{err}");
    assert!(err.to_string().contains("contains a space"), "{err}");
    assert!(transactions(&e.standin).is_empty());

    // Adopting an argument of the booted deployment makes it deletable.
    e.standin.reboot();
    let adopted = e
        .backend
        .adopt_kernel_arguments(&s(&["quiet"]))
        .await
        .unwrap();
    assert_eq!(adopted, s(&["hugepages=32", "quiet"]));
    let staged = e
        .backend
        .stage(&kargs_change(&["quiet"], &[]))
        .await
        .unwrap();
    assert!(staged.skipped_deletes.is_empty());
    assert_eq!(
        staged.deployment.kernel_args,
        s(&["rw", "mitigations=auto", "hugepages=32"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_kernel_type_swap_sends_the_mco_override_modifiers() {
    let e = env(vec![fcos(&["rw"])]).await;
    let to_rt = OsChange {
        kernel_type: Some((KernelType::Default, KernelType::Realtime)),
        ..Default::default()
    };
    let staged = e.backend.stage(&to_rt).await.unwrap();
    assert_eq!(staged.deployment.kernel_type, KernelType::Realtime);
    assert_eq!(staged.deployment.kernel_args, s(&["rw"]));
    assert_eq!(transactions(&e.standin), ["UpdateDeployment"]);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        set(&u["modifiers"]["override-remove-packages"]),
        strs(&DEFAULT_KERNEL_PACKAGES)
    );
    assert_eq!(
        set(&u["modifiers"]["install-packages"]),
        strs(&REALTIME_KERNEL_PACKAGES)
    );
    assert_eq!(u["modifiers"].as_object().unwrap().len(), 2, "{u}");
    assert_eq!(u["options"]["idempotent-layering"], true);
    // The layered commit differs from the booted one.
    assert_ne!(staged.deployment.id.checksum, staged.from.checksum);

    e.standin.reboot();
    assert_eq!(
        e.backend.status().await.unwrap().booted.kernel_type,
        KernelType::Realtime
    );

    // Back to the default kernel: the overrides are reset, the realtime packages uninstalled.
    e.standin.clear_calls();
    let to_default = OsChange {
        kernel_type: Some((KernelType::Realtime, KernelType::Default)),
        ..Default::default()
    };
    let staged = e.backend.stage(&to_default).await.unwrap();
    assert_eq!(staged.deployment.kernel_type, KernelType::Default);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        set(&u["modifiers"]["override-reset-packages"]),
        strs(&DEFAULT_KERNEL_PACKAGES)
    );
    assert_eq!(
        set(&u["modifiers"]["uninstall-packages"]),
        strs(&REALTIME_KERNEL_PACKAGES)
    );
    assert_eq!(u["modifiers"].as_object().unwrap().len(), 2, "{u}");

    // 64k-pages: aarch64 only, as in the MCO.
    e.standin.clear_calls();
    let to_64k = OsChange {
        kernel_type: Some((KernelType::Realtime, KernelType::Pages64k)),
        ..Default::default()
    };
    let r = e.backend.stage(&to_64k).await;
    if std::env::consts::ARCH == "aarch64" {
        let staged = r.unwrap();
        assert_eq!(staged.deployment.kernel_type, KernelType::Pages64k);
        let u = &e.standin.calls_of("UpdateDeployment")[0].args;
        assert_eq!(
            set(&u["modifiers"]["install-packages"]),
            strs(&KERNEL_64K_PACKAGES)
        );
    } else {
        let err = r.unwrap_err().to_string();
        assert!(err.contains("only supported on aarch64"), "{err}");
        assert!(transactions(&e.standin).is_empty(), "nothing was sent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_rebase_to_a_container_image_with_kernel_args() {
    let e = env(vec![fcos(&["rw"])]).await;
    let image = format!(
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
        "cd".repeat(32)
    );
    let change = OsChange {
        os_image: Some(image.clone()),
        kargs_append: s(&["nosmt"]),
        ..Default::default()
    };
    let staged = e.backend.stage(&change).await.unwrap();
    assert_eq!(staged.deployment.image, image);
    assert_eq!(
        staged.deployment.refspec.as_deref(),
        Some(format!("ostree-unverified-registry:{image}").as_str())
    );
    assert_eq!(staged.deployment.kernel_args, s(&["rw", "nosmt"]));
    assert_eq!(
        staged.pulled.as_deref(),
        Some(format!("ostree-unverified-registry:{image}").as_str())
    );
    // UpdateDeployment first (the step that pulls), then KernelArgs on its result.
    assert_eq!(transactions(&e.standin), ["UpdateDeployment", "KernelArgs"]);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        u["modifiers"],
        json!({"set-refspec": format!("ostree-unverified-registry:{image}")})
    );
    let k = &e.standin.calls_of("KernelArgs")[0].args;
    assert_eq!(k["options"]["final-kernel-args"], "rw nosmt");
    // One pending deployment carries both: booted + staged.
    let ds = e.standin.deployments();
    assert_eq!(ds.len(), 2, "{ds:#?}");
    assert!(ds[0].staged && ds[1].booted);

    // Staging again replaces the pending deployment, from the booted one.
    e.standin.clear_calls();
    let again = e
        .backend
        .stage(&OsChange {
            os_image: Some(FCOS.into()),
            ..Default::default()
        })
        .await;
    // The booted deployment is already on FCOS: only the pending one is dropped.
    let again = again.unwrap();
    assert_eq!(transactions(&e.standin), ["Cleanup"]);
    assert_eq!(
        e.standin.calls_of("Cleanup")[0].args,
        json!({"elements": ["pending-deploy"]})
    );
    assert!(again.deployment.booted);
    assert_eq!(e.standin.deployments().len(), 1);

    // An ostree refspec is sent as it is.
    e.standin.clear_calls();
    let staged = e
        .backend
        .stage(&OsChange {
            os_image: Some("fedora:fedora/x86_64/coreos/next".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(staged.deployment.image, "fedora:fedora/x86_64/coreos/next");
    assert_eq!(
        e.standin.calls_of("UpdateDeployment")[0].args["modifiers"],
        json!({"set-refspec": "fedora:fedora/x86_64/coreos/next"})
    );

    // A commit checksum is deployed with set-revision (the refspec stays).
    e.standin.reboot();
    e.standin.clear_calls();
    let rev = "5".repeat(64);
    let staged = e
        .backend
        .stage(&OsChange {
            os_image: Some(rev.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        e.standin.calls_of("UpdateDeployment")[0].args["modifiers"],
        json!({"set-revision": rev})
    );
    assert_eq!(staged.deployment.id.checksum, rev);
    assert_eq!(staged.deployment.image, "fedora:fedora/x86_64/coreos/next");

    // Garbage is refused before anything is sent.
    e.standin.clear_calls();
    let err = e
        .backend
        .stage(&OsChange {
            os_image: Some("not an image".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, OsError::InvalidChange(_)), "{err}");
    assert!(transactions(&e.standin).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_extensions_are_package_layers() {
    let e = env(vec![fcos(&["rw"])]).await;
    let add = [Action::Extensions {
        from: vec![],
        to: s(&["usbguard", "kerberos"]),
    }];
    // Only a backend with package layering accepts them.
    let e_lib = OsChange::from_actions(&add).unwrap_err().to_string();
    assert!(e_lib.contains("rpm-ostree package layers"), "{e_lib}");
    let change = e.backend.change_from_actions(&add).unwrap();
    assert_eq!(
        change.extensions,
        Some((vec![], s(&["usbguard", "kerberos"])))
    );
    let staged = e.backend.stage(&change).await.unwrap();
    assert_eq!(transactions(&e.standin), ["UpdateDeployment"]);
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        set(&u["modifiers"]["install-packages"]),
        strs(&["usbguard", "krb5-workstation", "libkadm5"])
    );
    assert_eq!(u["options"]["idempotent-layering"], true);
    assert_eq!(
        e.standin.deployments()[0].requested_packages.len(),
        3,
        "the stand-in layered them"
    );
    assert!(staged.deployment.staged);

    // Removing one extension uninstalls its packages only.
    e.standin.reboot();
    e.standin.clear_calls();
    let remove = [Action::Extensions {
        from: s(&["usbguard", "kerberos"]),
        to: s(&["usbguard"]),
    }];
    let change = e.backend.change_from_actions(&remove).unwrap();
    e.backend.stage(&change).await.unwrap();
    let u = &e.standin.calls_of("UpdateDeployment")[0].args;
    assert_eq!(
        u["modifiers"],
        json!({"uninstall-packages": ["krb5-workstation", "libkadm5"]})
    );

    // An unknown extension is refused with the supported list, before anything is sent.
    e.standin.clear_calls();
    let bad = e
        .backend
        .change_from_actions(&[Action::Extensions {
            from: vec![],
            to: s(&["emacs"]),
        }])
        .unwrap();
    let err = e.backend.stage(&bad).await.unwrap_err().to_string();
    assert!(err.contains("\"emacs\" is not supported"), "{err}");
    assert!(err.contains("usbguard"), "{err}");
    assert!(transactions(&e.standin).is_empty());

    // The libostree backend keeps refusing a change that carries extensions.
    let lib = OsBackend::detect_with_config(Path::new("/nonexistent"), Default::default());
    assert!(lib.change_from_actions(&add).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_a_failed_transaction_carries_the_daemon_message() {
    let e = env(vec![fcos(&["rw"])]).await;
    let daemon_msg = "Importing: Unable to pull quay.io/x/y@sha256:00: manifest unknown";
    e.standin.fail_next("UpdateDeployment", daemon_msg);
    let image = format!("quay.io/x/y@sha256:{}", "0".repeat(64));
    let err = e
        .backend
        .stage(&OsChange {
            os_image: Some(image),
            kargs_append: s(&["nosmt"]),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let recorded = e.standin.calls_of("UpdateDeployment")[0]
        .transaction
        .clone()
        .unwrap();
    match &err {
        OsError::RpmOstree {
            method,
            transaction,
            message,
        } => {
            assert_eq!(method, "UpdateDeployment");
            assert_eq!(transaction.as_deref(), Some(recorded.as_str()));
            assert!(message.starts_with(daemon_msg), "{message}");
        }
        other => panic!("expected an rpm-ostree error, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("UpdateDeployment"), "{text}");
    assert!(text.contains(&recorded), "{text}");
    assert!(text.contains("manifest unknown"), "{text}");
    // Nothing was staged, and KernelArgs was not attempted.
    assert_eq!(transactions(&e.standin), ["UpdateDeployment"]);
    assert_eq!(e.standin.deployments().len(), 1);

    // The second transaction fails: the half-made deployment is removed, and the error says so.
    e.standin.clear_calls();
    e.standin
        .fail_next("KernelArgs", "Failed to write bootloader configuration");
    let err = e
        .backend
        .stage(&OsChange {
            kernel_type: Some((KernelType::Default, KernelType::Realtime)),
            kargs_append: s(&["nosmt"]),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("KernelArgs"), "{err}");
    assert!(
        err.contains("Failed to write bootloader configuration"),
        "{err}"
    );
    assert!(
        err.contains("removed with Cleanup(pending-deploy)"),
        "{err}"
    );
    assert_eq!(
        transactions(&e.standin),
        ["UpdateDeployment", "KernelArgs", "Cleanup"]
    );
    let ds = e.standin.deployments();
    assert_eq!(ds.len(), 1, "no pending deployment is left: {ds:#?}");
    assert!(e.backend.status().await.unwrap().pending.is_none());

    // The daemon dies in the middle of a transaction: the connection closes without Finished.
    e.standin.clear_calls();
    e.standin.crash_next("KernelArgs");
    let err = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap_err();
    let recorded = e.standin.calls_of("KernelArgs")[0]
        .transaction
        .clone()
        .unwrap();
    match &err {
        OsError::RpmOstree {
            method,
            transaction,
            message,
        } => {
            assert_eq!(method, "KernelArgs");
            assert_eq!(transaction.as_deref(), Some(recorded.as_str()));
            assert!(
                message.contains("closed the transaction's connection before Finished"),
                "{message}"
            );
        }
        other => panic!("expected an rpm-ostree error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_unreachable_daemon_is_a_clear_error() {
    init_logging();
    let root = rpm_ostree_root();
    // No bus at that address.
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("unix:path={}/no-bus-here", dir.path().display());
    let b = OsBackend::detect_on_bus(root.path(), &nowhere)
        .await
        .unwrap();
    assert_eq!(b.kind(), "none");
    let reason = b.unsupported_reason().unwrap();
    assert!(
        reason.contains("cannot be reached") && reason.contains(&nowhere),
        "{reason}"
    );
    assert!(reason.contains("org.projectatomic.rpmostree1"), "{reason}");
    let err = b.status().await.unwrap_err().to_string();
    assert!(err.contains("cannot be reached"), "{err}");

    // A real bus without the daemon on it.
    let bus = PrivateBus::start();
    let b = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    let reason = b.unsupported_reason().unwrap();
    assert!(reason.contains("is not on this bus"), "{reason}");
    let direct = RpmOstreeBackend::new(root.path(), &bus.address);
    let err = direct.status().await.unwrap_err();
    match &err {
        OsError::RpmOstree {
            method, message, ..
        } => {
            assert_eq!(method, "Sysroot.RegisterClient");
            assert!(
                message.contains("org.projectatomic.rpmostree1"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }

    // The daemon goes away between detection and use.
    let standin = Standin::start(&bus.address, vec![fcos(&["rw"])]).await;
    let b = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(b.kind(), "rpm-ostree");
    standin.stop().await;
    let err = b
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("RegisterClient") && err.contains("not on this bus"),
        "{err}"
    );

    // Detection without a bus is unchanged; a host that is not an ostree host stays one.
    let b = OsBackend::detect(root.path()).unwrap();
    assert_eq!(b.unsupported_reason(), Some(RPM_OSTREE_REASON));
    let plain = tempfile::tempdir().unwrap();
    let b = OsBackend::detect_on_bus(plain.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(b.unsupported_reason(), Some(NOT_OSTREE_REASON));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_verify_booted_after_a_simulated_reboot() {
    let e = env(vec![fcos(&["rw"])]).await;
    let staged = e
        .backend
        .stage(&OsChange {
            kernel_type: Some((KernelType::Default, KernelType::Realtime)),
            kargs_append: s(&["hugepages=32"]),
            ..Default::default()
        })
        .await
        .unwrap();
    let expected = staged.expectation();
    // Before the reboot: another deployment is booted, and the staged one is still staged.
    let diffs = e.backend.verify_booted(&expected).await.unwrap();
    assert!(
        diffs.iter().any(|d| d.contains("is still staged")),
        "{diffs:?}"
    );
    assert!(
        diffs.iter().any(|d| d.contains("hugepages=32 is missing")),
        "{diffs:?}"
    );
    // After it, the host booted exactly what was staged.
    e.standin.reboot();
    let diffs = e.backend.verify_booted(&expected).await.unwrap();
    assert!(diffs.is_empty(), "{diffs:?}");
    let status = e.backend.status().await.unwrap();
    assert_eq!(status.booted.id, staged.deployment.id);
    assert_eq!(status.booted.kernel_type, KernelType::Realtime);
    assert_eq!(status.rollback.unwrap().id, staged.from);
    // On a real boot the running kernel's command line is checked too (missing arguments).
    let cmdline = e.root.path().join("proc/cmdline");
    std::fs::create_dir_all(cmdline.parent().unwrap()).unwrap();
    std::fs::write(
        &cmdline,
        "BOOT_IMAGE=(hd0,gpt3)/ostree/x/vmlinuz ostree=/ostree/boot.1/rhcos/x/0 rw\n",
    )
    .unwrap();
    let diffs = e.backend.verify_booted(&expected).await.unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(
        diffs[0].starts_with("kernel argument hugepages=32 is missing from /proc/cmdline"),
        "{diffs:?}"
    );
    std::fs::write(
        &cmdline,
        "BOOT_IMAGE=(hd0,gpt3)/ostree/x/vmlinuz ostree=/ostree/boot.1/rhcos/x/0 rw hugepages=32\n",
    )
    .unwrap();
    assert!(e.backend.verify_booted(&expected).await.unwrap().is_empty());
    std::fs::remove_file(&cmdline).unwrap();

    // An expectation of another deployment is reported as such.
    let mut wrong = expected.clone();
    wrong.deployment = Some(staged.from.clone());
    let diffs = e.backend.verify_booted(&wrong).await.unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("not the staged deployment"), "{diffs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_rollback_drops_pending_then_rolls_back() {
    let e = env(vec![fcos(&["rw"])]).await;
    // Only one deployment: nothing to roll back to.
    let err = e.backend.rollback().await.unwrap_err();
    assert!(matches!(err, OsError::NoRollback(_)), "{err}");
    assert!(err.to_string().contains("only deployment"), "{err}");

    let staged = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap();
    // A pending deployment: rollback drops it.
    e.standin.clear_calls();
    let out = e.backend.rollback().await.unwrap();
    assert_eq!(
        out,
        RollbackOutcome::CancelledPending {
            dropped: staged.deployment.id.clone()
        }
    );
    assert_eq!(transactions(&e.standin), ["Cleanup"]);
    assert_eq!(e.standin.deployments().len(), 1);

    // Booted into a new deployment: rollback makes the previous one the default.
    let staged = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap();
    e.standin.reboot();
    e.standin.clear_calls();
    let out = e.backend.rollback().await.unwrap();
    assert_eq!(
        out,
        RollbackOutcome::RolledBack {
            from: staged.deployment.id.clone(),
            to: staged.from.clone()
        }
    );
    assert_eq!(transactions(&e.standin), ["Rollback"]);
    assert_eq!(
        e.standin.calls_of("Rollback")[0].args,
        json!({"options": {}})
    );
    e.standin.reboot();
    let status = e.backend.status().await.unwrap();
    assert_eq!(status.booted.id, staged.from);
    assert_eq!(status.booted.kernel_args, s(&["rw"]));

    // A failed Rollback transaction carries the daemon's message.
    e.standin
        .fail_next("Rollback", "Transaction in progress: upgrade");
    // The deployment with nosmt is now the rollback one.
    let err = e.backend.rollback().await.unwrap_err().to_string();
    assert!(
        err.contains("Rollback") && err.contains("Transaction in progress: upgrade"),
        "{err}"
    );
}

/// The transaction endpoint served by GLib's `GDBusServer` (what rpm-ostreed uses), not by zbus:
/// hearth's peer-to-peer client authenticates, starts, and reads the signals of a GLib server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_transactions_served_by_glib_gdbusserver() {
    let e = env(vec![fcos(&["rw"])]).await;
    e.standin.use_glib_transactions();
    let image = format!("quay.io/fedora/fedora-coreos@sha256:{}", "ef".repeat(32));
    let staged = e
        .backend
        .stage(&OsChange {
            os_image: Some(image.clone()),
            kargs_append: s(&["nosmt"]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(staged.deployment.image, image);
    assert_eq!(staged.deployment.kernel_args, s(&["rw", "nosmt"]));
    assert_eq!(transactions(&e.standin), ["UpdateDeployment", "KernelArgs"]);
    let starts: Vec<_> = e
        .standin
        .calls()
        .into_iter()
        .filter(|c| c.method == "Start")
        .map(|c| c.args)
        .collect();
    assert_eq!(
        starts,
        vec![
            json!({"for": "UpdateDeployment", "server": "GDBusServer"}),
            json!({"for": "KernelArgs", "server": "GDBusServer"})
        ]
    );

    // A failure's message arrives through GLib's Finished signal too.
    e.standin
        .fail_next("Rollback", "Transaction in progress: upgrade");
    e.standin.reboot();
    let err = e.backend.rollback().await.unwrap_err().to_string();
    assert!(err.contains("Rollback (transaction unix:path="), "{err}");
    assert!(err.contains("Transaction in progress: upgrade"), "{err}");
}

/// Set (to the booted deployment's kernel arguments) in the environment of the stand-in that
/// dbus-daemon activates in `standin_the_first_call_activates_the_daemon`.
const ACTIVATED_ENV: &str = "HEARTH_RPMOSTREE_STANDIN_ACTIVATED";

/// The stand-in as an activated service: dbus-daemon runs this test binary with
/// `--exact standin_activated_service_entry` and `DBUS_STARTER_ADDRESS`. In a normal test run
/// (without [`ACTIVATED_ENV`]) it returns at once: it is an entry point, not a test.
#[test]
fn standin_activated_service_entry() {
    let Ok(kargs) = std::env::var(ACTIVATED_ENV) else {
        return;
    };
    let address = std::env::var("DBUS_STARTER_ADDRESS")
        .expect("dbus-daemon sets DBUS_STARTER_ADDRESS for activated services");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let args: Vec<&str> = kargs.split_whitespace().collect();
        let standin = Standin::start(&address, vec![fcos(&args)]).await;
        standin
            .serve_until_the_bus_closes(std::time::Duration::from_secs(120))
            .await;
    });
}

async fn name_has_owner(address: &str) -> bool {
    let conn = zbus::connection::Builder::address(address)
        .build()
        .await
        .unwrap();
    conn.call_method(
        Some("org.freedesktop.DBus"),
        "/org/freedesktop/DBus",
        Some("org.freedesktop.DBus"),
        "NameHasOwner",
        &(rpmostree_standin::BUS_NAME,),
    )
    .await
    .unwrap()
    .body()
    .deserialize::<bool>()
    .unwrap()
}

/// On a real host rpm-ostreed is D-Bus-activated: nothing runs until a client sends it a
/// message. Here dbus-daemon activates the stand-in (this test binary) on hearth's first call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_the_first_call_activates_the_daemon() {
    init_logging();
    let exe = std::env::current_exe().unwrap();
    let bus = PrivateBus::start_activatable(
        &exe,
        &[
            "--exact",
            "standin_activated_service_entry",
            "--test-threads=1",
        ],
        &[(ACTIVATED_ENV, "rw console=ttyS0 activated=1")],
    );
    assert!(
        !name_has_owner(&bus.address).await,
        "nothing owns the name before the first call"
    );
    let root = rpm_ostree_root();
    let b = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(b.kind(), "rpm-ostree", "{:?}", b.unsupported_reason());
    assert!(name_has_owner(&bus.address).await, "activated");
    let status = b.status().await.unwrap();
    assert_eq!(
        status.booted.kernel_args,
        s(&["rw", "console=ttyS0", "activated=1"]),
        "the activated process answers"
    );
    let staged = b.stage(&kargs_change(&[], &["nosmt"])).await.unwrap();
    assert_eq!(
        staged.deployment.kernel_args,
        s(&["rw", "console=ttyS0", "activated=1", "nosmt"])
    );
}

/// Another client's transaction (zincati, an admin) makes the daemon refuse methods with
/// "Transaction in progress": hearth waits for it, up to a limit, then reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_waits_while_another_transaction_runs() {
    let e = env(vec![fcos(&["rw"])]).await;
    e.standin.busy_next("KernelArgs", 2);
    let staged = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap();
    assert_eq!(staged.deployment.kernel_args, s(&["rw", "nosmt"]));
    let attempts = e.standin.calls_of("KernelArgs");
    assert_eq!(attempts.len(), 3, "two refused, the third started");
    assert!(attempts[0].transaction.is_none() && attempts[1].transaction.is_none());
    assert!(attempts[2].transaction.is_some());

    // Busy for longer than the backend waits: the daemon's message, and how long it waited.
    e.standin.reboot();
    e.standin.clear_calls();
    e.standin.busy_next("KernelArgs", u32::MAX);
    let impatient = OsBackend::RpmOstree(
        RpmOstreeBackend::new(e.root.path(), &e._bus.address)
            .with_busy_wait(std::time::Duration::from_millis(700)),
    );
    let err = impatient
        .stage(&kargs_change(&[], &["quiet"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("rpm-ostree KernelArgs: Transaction in progress: upgrade"),
        "{err}"
    );
    assert!(err.contains("waited 0 s for it to end"), "{err}");
    assert!(e.standin.calls_of("KernelArgs").len() >= 2, "it retried");
    assert!(transactions(&e.standin).is_empty());
}
