//! Space checks before staging: a `/boot` too small for a new kernel, and a sysroot too full for
//! a pull or a deployment, are refused with a clear error before anything is written.
//!
//! `/boot` is a 2 MiB tmpfs (v1's placeholder kernel and initramfs, 80 KiB, fit; the realtime
//! kernel, 5 MiB, does not); the sysroot is a 400 MiB tmpfs that the test fills up.

use crate::os_common;

use hearth_config::model::KernelType;
use hearth_hostops::os::{OsChange, OsError};
use hearth_vm_tests::ostree::{refs, OstreeHost, OstreeHostOptions, SysrootOptions};
use os_common::*;

fn realtime() -> OsChange {
    OsChange {
        kernel_type: Some((KernelType::Default, KernelType::Realtime)),
        ..Default::default()
    }
}

#[test]
fn a_small_boot_is_detected_before_staging() {
    init_logging();
    let mut host = OstreeHost::boot_with(OstreeHostOptions {
        sysroot: SysrootOptions {
            refs: strings(&[refs::V1]),
            boot_size: 2 << 20,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let d = Driver::new(&host, Mode::Outside);
    let e = d.stage(&host, &realtime()).unwrap_err();
    let OsError::InsufficientSpace {
        what,
        needed,
        available,
        ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(what, "/boot");
    assert!(needed > available, "{e}");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(msg.contains("not enough free space on /boot"), "{msg}");
    assert!(msg.contains("hearth/debian/v1-rt"), "{msg}");
    assert!(msg.contains("kernel 6.1.0-hearth-rt"), "{msg}");
    // Nothing was staged, and the ledger was not touched.
    assert!(d.status(&host).unwrap().pending.is_none());
    assert!(!host.live_path("/var/lib/hearth/kargs.json").exists());

    // A kernel argument change needs no new kernel in /boot: it goes through.
    let staged = d.stage(&host, &kargs_change(&[], &["nosmt"])).unwrap();
    let boot = staged.space.iter().find(|c| c.what == "/boot").unwrap();
    assert!(boot.detail.contains("in /boot already"), "{boot:?}");
    host.reboot(REBOOT).unwrap();
    assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());

    // Inside (staged, finalized at shutdown) the check is the same: nothing is staged that
    // would fail at shutdown.
    let inside = Driver::new(&host, Mode::Inside);
    let e = inside.stage(&host, &realtime()).unwrap_err();
    assert!(
        e.to_string().contains("not enough free space on /boot"),
        "{e}"
    );
    assert!(inside.status(&host).unwrap().pending.is_none());
    host.shutdown().unwrap();
}

#[test]
fn a_full_sysroot_is_detected_before_pulling_or_deploying() {
    init_logging();
    let host = OstreeHost::boot_with(OstreeHostOptions {
        sysroot: SysrootOptions {
            refs: strings(&[refs::V1]),
            sysroot_size: Some(400 << 20),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let d = Driver::new(&host, Mode::Outside);
    // Leave about 3 MiB free: too little for the realtime kernel (5 MiB of new objects) and
    // for a deployment (a copy of /etc and the directories).
    let (free, _) = free_bytes(host.sysroot().path());
    let filler = host.sysroot().path().join("filler");
    let keep = 3u64 << 20;
    std::fs::write(&filler, vec![0u8; (free - keep) as usize]).unwrap();

    let e = d.stage(&host, &realtime()).unwrap_err();
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        matches!(&e, OsError::InsufficientSpace { what, .. } if what == "/sysroot"),
        "{e:?}"
    );
    assert!(msg.contains("objects to pull"), "{msg}");
    assert!(msg.contains("hearth/debian/v1-rt"), "{msg}");

    let e = d.stage(&host, &kargs_change(&[], &["nosmt"])).unwrap_err();
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        matches!(&e, OsError::InsufficientSpace { what, .. } if what == "/sysroot"),
        "{e:?}"
    );
    assert!(msg.contains("copy of /etc"), "{msg}");
    assert!(d.status(&host).unwrap().pending.is_none());

    // With room again, the same change goes through.
    std::fs::remove_file(&filler).unwrap();
    let staged = d.stage(&host, &realtime()).unwrap();
    assert_eq!(
        staged.deployment.id.checksum,
        host.images().commit(refs::V1_RT).unwrap()
    );
    host.shutdown().unwrap();
}

#[test]
fn a_sysroot_without_free_inodes_is_detected() {
    init_logging();
    let host = OstreeHost::boot_with(OstreeHostOptions {
        sysroot: SysrootOptions {
            refs: strings(&[refs::V1]),
            sysroot_size: Some(400 << 20),
            sysroot_inodes: Some(30_000),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let d = Driver::new(&host, Mode::Outside);
    // Leave 500 inodes: a deployment needs one per directory (1022) and /etc file.
    let filler = host.sysroot().path().join("filler");
    std::fs::create_dir(&filler).unwrap();
    let free = nix::sys::statvfs::statvfs(host.sysroot().path())
        .unwrap()
        .files_available() as u64;
    for i in 0..free.saturating_sub(500) {
        std::fs::write(filler.join(i.to_string()), "").unwrap();
    }
    let e = d.stage(&host, &kargs_change(&[], &["nosmt"])).unwrap_err();
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(matches!(e, OsError::InsufficientInodes { .. }), "{e:?}");
    assert!(msg.contains("not enough free inodes on /sysroot"), "{msg}");
    assert!(d.status(&host).unwrap().pending.is_none());
    host.shutdown().unwrap();
}

/// (bytes available, bytes total) of the filesystem of `path`.
fn free_bytes(path: &std::path::Path) -> (u64, u64) {
    let st = nix::sys::statvfs::statvfs(path).unwrap();
    (
        st.blocks_available() as u64 * st.fragment_size() as u64,
        st.blocks() as u64 * st.fragment_size() as u64,
    )
}
