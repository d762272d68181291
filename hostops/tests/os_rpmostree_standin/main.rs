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

#[path = "../rpmostree_standin/mod.rs"]
mod rpmostree_standin;

mod failures;
mod kargs;
mod reboot;
mod serving;
mod status;
mod update;

use std::collections::BTreeSet;

use hearth_hostops::os::{OsBackend, OsChange};
use rpmostree_standin::{Deployment, PrivateBus, Standin};

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
