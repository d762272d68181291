//! Which OS backend a host gets: none on a plain systemd host (a real Debian container), libostree
//! on a booted ostree deployment, none (for now) on an rpm-ostree host; configuration errors.

use crate::os_common;

use hearth_hostops::os::{
    OsBackend, OsChange, OsConfig, OsError, OsExpectation, NOT_OSTREE_REASON, RPM_OSTREE_REASON,
};
use hearth_vm_tests::SystemdHost;
use os_common::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_plain_systemd_host_has_no_os_backend() {
    init_logging();
    let host = SystemdHost::boot().unwrap();
    for root in [host.live_path("/"), host.root().to_path_buf()] {
        let backend = OsBackend::detect(&root).unwrap();
        assert!(matches!(backend, OsBackend::None(_)), "{backend:?}");
        assert_eq!(backend.kind(), "none");
        assert_eq!(backend.unsupported_reason(), Some(NOT_OSTREE_REASON));
        let rt = rt();
        let change = kargs_change(&[], &["hugepages=32"]);
        let e = rt.block_on(backend.stage(&change)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("OS changes are not possible on this host: {NOT_OSTREE_REASON}")
        );
        assert!(matches!(
            rt.block_on(backend.status()),
            Err(OsError::Unsupported { .. })
        ));
        assert!(rt.block_on(backend.rollback()).is_err());
        assert!(rt
            .block_on(backend.verify_booted(&OsExpectation::default()))
            .is_err());
    }
    host.shutdown().unwrap();
}

#[test]
fn a_booted_ostree_deployment_gets_the_libostree_backend() {
    init_logging();
    let host = boot_v1();
    let backend = with_helper(OsBackend::detect(&host.live_root()).unwrap());
    assert_eq!(backend.kind(), "ostree");
    assert_eq!(backend.unsupported_reason(), None);
    let status = rt().block_on(backend.status()).unwrap();
    assert!(!status.native);
    assert_eq!(
        status.booted.id.checksum,
        host.images()
            .commit(hearth_vm_tests::ostree::refs::V1)
            .unwrap()
    );
    // The deployment directory alone (the disk, without the container's /run) is no booted
    // ostree system.
    let disk = OsBackend::detect(host.deployment_root()).unwrap();
    assert_eq!(disk.kind(), "none");
    host.shutdown().unwrap();
}

#[test]
fn an_rpm_ostree_host_is_left_to_rpm_ostree() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/ostree-booted"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("usr/bin")).unwrap();
    std::fs::write(dir.path().join("usr/bin/rpm-ostree"), "").unwrap();
    let backend = OsBackend::detect(dir.path()).unwrap();
    assert_eq!(backend.unsupported_reason(), Some(RPM_OSTREE_REASON));
}

#[test]
fn the_os_configuration_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/ostree-booted"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("etc/hearth")).unwrap();
    let config = dir.path().join("etc/hearth/os.json");

    std::fs::write(
        &config,
        r#"{"remote": {"name": "hearth", "url": "https://hearth.example/repo"},
            "kernelTypes": {"realtime": "{ref}-rt"}}"#,
    )
    .unwrap();
    let OsBackend::Ostree(o) = OsBackend::detect(dir.path()).unwrap() else {
        panic!("expected the ostree backend");
    };
    assert_eq!(o.config().remote.as_ref().unwrap().name, "hearth");
    assert_eq!(o.config().min_free_bytes.boot, 1 << 20);

    std::fs::write(&config, r#"{"kernelTypes": {"realtime": "rt"}}"#).unwrap();
    let e = OsBackend::detect(dir.path()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("etc/hearth/os.json") && msg.contains("{ref}"),
        "{msg}"
    );

    std::fs::write(&config, r#"{"remotes": []}"#).unwrap();
    let msg = OsBackend::detect(dir.path()).unwrap_err().to_string();
    assert!(msg.contains("unknown field"), "{msg}");

    // A configuration passed in is used as it is.
    let backend = OsBackend::detect_with_config(dir.path(), OsConfig::default());
    assert_eq!(backend.kind(), "ostree");
    // An empty change is an empty change.
    assert!(OsChange::default().is_empty());
}
