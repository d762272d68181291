//! The VM tier with the ostree CLI inside: a real kernel and dracut initramfs under QEMU (TCG),
//! kernel arguments that reach `/proc/cmdline` after a real reboot, a pivot between image
//! versions and back. UEFI firmware (OVMF) and systemd-boot boot the disk; hearth's boot entry
//! sync puts ostree's entries on the ESP (systemd-boot cannot read them in `/boot` on ext4);
//! everything else is the guest's own libostree, systemd and kernel.
//!
//! Needs root, qemu-system-x86, ovmf, e2fsprogs, dosfstools, mtools, fdisk, debootstrap and ostree
//! (`vm-tests/scripts/install-deps.sh`); the first run builds the VM image (a few minutes,
//! cached). Run all VM scenarios with
//! `cargo build -p hearth-agent -p hearth-ostree-helper && cargo test -p hearth-vm-tests --test 'vm_*' -- --include-ignored --test-threads=1`.

use std::time::Instant;

use hearth_vm_tests::qemu::{refs, Vm, VmOptions};

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hearth_vm_tests=info".into()),
        )
        .with_test_writer()
        .try_init();
}

fn has_arg(cmdline: &str, arg: &str) -> bool {
    cmdline.split_whitespace().any(|a| a == arg)
}

/// hearth's boot entry sync on, with its defaults (the ESP at /efi, 3 tries).
const BOOT_COUNTING: &str = r#"{"bootCounting": {}}"#;

/// Seed 004's kernel arguments, sized for a 1 GiB guest: the seed asks for
/// `default_hugepagesz=1G hugepagesz=1G hugepages=32` (32 GiB of huge pages, more than this
/// guest has); the same three arguments with 2 MiB pages reserve 64 MiB, which fits, so the
/// kernel really allocates them and the test checks that too. Plus the seed's `selinux=0`.
const SEED_004_KARGS: [&str; 4] = [
    "default_hugepagesz=2M",
    "hugepagesz=2M",
    "hugepages=32",
    "selinux=0",
];

/// The path below the agent, with the ostree CLI in the guest: the booted commit deployed again
/// with the extra arguments (what hearth's OS backend does), staged, finalized by
/// `ostree-finalize-staged.service` at shutdown. (The agent's version of this scenario,
/// `vm_agent.rs`, is the one CI runs.)
#[test]
#[ignore = "VM tier, ~2 min: the ostree CLI path below the agent; CI runs the agent's version of this scenario (vm_agent.rs); run with: cargo test -p hearth-vm-tests --test vm_ostree -- --ignored"]
fn vm_kargs_reboot_proc_cmdline_ostree_cli() {
    init_logging();
    let started = Instant::now();
    let mut vm = Vm::boot(VmOptions::default()).unwrap();
    // systemd-boot reads the ESP: hearth's boot entry sync puts ostree's entries there.
    vm.install_hearth(BOOT_COUNTING).unwrap();
    let first = vm.current_boot().unwrap().clone();
    eprintln!(
        "first boot: {:?} (total {:?})",
        first.boot_time,
        started.elapsed()
    );

    // Booted from the deployment: the initramfs's ostree-prepare-root ran.
    assert!(
        first.proc_cmdline.contains("ostree=/ostree/boot."),
        "{}",
        first.proc_cmdline
    );
    for arg in SEED_004_KARGS {
        assert!(
            !has_arg(&first.proc_cmdline, arg),
            "{arg} already in {}",
            first.proc_cmdline
        );
    }
    vm.exec_ok("test -e /run/ostree-booted").unwrap();
    let status = vm.exec_ok("ostree admin status").unwrap();
    let v1 = vm.image().commit(refs::V1).unwrap().to_string();
    assert!(status.contains(&format!("* debian {v1}.0")), "{status}");
    let kernel = vm.exec_ok("uname -r").unwrap();
    assert_eq!(kernel.trim(), vm.image().kernel_version);

    let appends: Vec<String> = SEED_004_KARGS
        .iter()
        .map(|a| format!("--karg-append={a}"))
        .collect();
    vm.exec_ok(&format!(
        "ostree admin deploy --stage {} {}",
        appends.join(" "),
        refs::V1
    ))
    .unwrap();
    let staged = Instant::now();
    let second = vm.reboot().unwrap().clone();
    eprintln!("reboot into the new arguments: {:?}", staged.elapsed());

    assert_eq!(second.boot_count, 2);
    assert_ne!(second.boot_id, first.boot_id);
    for arg in SEED_004_KARGS {
        assert!(
            has_arg(&second.proc_cmdline, arg),
            "{arg} missing from {}",
            second.proc_cmdline
        );
    }
    // The arguments the installer set are still there, and the kernel acted on the new ones.
    for arg in vm.image().kargs.clone().split_whitespace() {
        assert!(
            has_arg(&second.proc_cmdline, arg),
            "{arg} lost: {}",
            second.proc_cmdline
        );
    }
    let meminfo = vm.exec_ok("cat /proc/meminfo").unwrap();
    assert!(meminfo.contains("Hugepagesize:       2048 kB"), "{meminfo}");
    let total = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Total:"))
        .map(str::trim);
    assert_eq!(total, Some("32"), "{meminfo}");
    // The new deployment (serial 1 of the same commit) is the booted one, from its own entry.
    assert_eq!(second.entry, format!("hearth-debian-{v1}.1.conf"));
    let status = vm.exec_ok("ostree admin status").unwrap();
    assert!(status.contains(&format!("* debian {v1}.1")), "{status}");
    eprintln!("total: {:?}", started.elapsed());
    vm.shutdown().unwrap();
}

/// A pivot to `v2` and back to `v1`, each a staged deployment and a real reboot.
#[test]
#[ignore = "VM tier, ~4 min (three boots under TCG): a pivot with the ostree CLI on a real kernel is not proven in CI; run with: cargo test -p hearth-vm-tests --test vm_ostree -- --ignored"]
fn vm_pivot_v1_v2_and_back_ostree_cli() {
    init_logging();
    let started = Instant::now();
    let mut vm = Vm::boot(VmOptions::default()).unwrap();
    // systemd-boot reads the ESP: hearth's boot entry sync puts ostree's entries there.
    vm.install_hearth(BOOT_COUNTING).unwrap();
    let v1 = vm.image().commit(refs::V1).unwrap().to_string();
    let v2 = vm.image().commit(refs::V2).unwrap().to_string();
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v1\n"
    );
    // Something in /etc and /var that must survive both pivots.
    vm.exec_ok("echo kept >/etc/hearth-test-etc && echo kept >/var/hearth-test-var")
        .unwrap();

    vm.exec_ok(&format!("ostree admin deploy --stage {}", refs::V2))
        .unwrap();
    let boot = vm.reboot().unwrap().clone();
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v2\n"
    );
    let status = vm.exec_ok("ostree admin status").unwrap();
    assert!(status.contains(&format!("* debian {v2}.0")), "{status}");
    assert!(
        status.contains(&format!("debian {v1}.0 (rollback)")),
        "{status}"
    );
    assert!(
        boot.proc_cmdline.contains("ostree=/ostree/boot."),
        "{}",
        boot.proc_cmdline
    );
    assert_eq!(
        vm.exec_ok("cat /etc/hearth-test-etc /var/hearth-test-var")
            .unwrap(),
        "kept\nkept\n"
    );
    eprintln!("pivot to v2: {:?}", started.elapsed());

    vm.exec_ok(&format!("ostree admin deploy --stage {}", refs::V1))
        .unwrap();
    vm.reboot().unwrap();
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v1\n"
    );
    let status = vm.exec_ok("ostree admin status").unwrap();
    assert!(status.contains(&format!("* debian {v1}.")), "{status}");
    assert_eq!(
        vm.exec_ok("cat /etc/hearth-test-etc /var/hearth-test-var")
            .unwrap(),
        "kept\nkept\n"
    );
    assert_eq!(vm.boot_count(), 3);
    eprintln!("total: {:?}", started.elapsed());
    vm.shutdown().unwrap();
}
