//! The VM tier with hearth's agent: the real `hearth-agent` binary (this workspace's build,
//! handed to the guest through the 9p share, so the image does not change with the agent)
//! applies MachineConfigs with OS changes in a QEMU guest booted from a real kernel and dracut
//! initramfs, reboots it through logind, and verifies after the boot.
//!
//! Needs root, qemu-system-x86, e2fsprogs, debootstrap and ostree
//! (`vm-tests/scripts/install-deps.sh`); the first run builds the VM image (a few minutes,
//! cached). Run all VM scenarios with
//! `cargo test -p hearth-vm-tests --test 'vm_*' -- --include-ignored --test-threads=1`.

use std::time::Instant;

use hearth_vm_tests::qemu::{refs, workspace_binary, Vm, VmOptions};

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

/// Where the guest runs the agent from: a copy in `/run` (tmpfs), made at every boot from the
/// share (executing straight from 9p works too, but a copy behaves like an installed binary).
const AGENT: &str = "/run/hearth-agent";

/// Boots a VM with this workspace's `hearth-agent` in its share (`bin/hearth-agent`).
fn vm_with_agent() -> Vm {
    let agent = workspace_binary("hearth-agent", "hearth-agent").unwrap();
    let vm = Vm::boot(VmOptions::default()).unwrap();
    let bin = vm.share_dir().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(&agent, bin.join("hearth-agent")).unwrap();
    vm
}

/// Copies the agent out of the share (again after every boot: `/run` is a tmpfs).
fn install_agent(vm: &mut Vm) {
    vm.exec_ok(&format!(
        "install -m 0755 /run/hearth/bin/hearth-agent {AGENT}"
    ))
    .unwrap();
}

/// Writes a MachineConfig into the share; returns its path inside the guest.
fn put_config(vm: &Vm, name: &str, spec: &str) -> String {
    let yaml = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  \
         name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n{spec}"
    );
    std::fs::write(vm.share_dir().join(format!("{name}.yaml")), yaml).unwrap();
    format!("/run/hearth/{name}.yaml")
}

/// The agent's status document (`hearth-agent status -o json`).
fn status(vm: &mut Vm) -> serde_json::Value {
    let out = vm.exec_ok(&format!("{AGENT} status -o json")).unwrap();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("status is not JSON ({e}): {out}"))
}

/// Applies a config with the agent as a transient unit (so that it outlives the harness's
/// script and reboots the guest through logind itself), waits for the reboot, then runs the
/// agent once more after the boot: it sees the new boot id, verifies, and reports Done.
fn apply_through_reboot(vm: &mut Vm, config: &str) {
    vm.exec_ok(&format!(
        "systemd-run --unit=hearth-apply --no-block --property=StandardOutput=journal+console \
         --property=StandardError=journal+console {AGENT} apply --once-from {config}"
    ))
    .unwrap();
    vm.wait_for_reboot().unwrap();
    install_agent(vm);
    let out = vm
        .exec(&format!("{AGENT} apply --once-from {config}"))
        .unwrap();
    assert_eq!(
        out.code, 0,
        "apply after the reboot: stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let st = status(vm);
    assert_eq!(st["state"], "Done", "{st:#}");
}

/// Seed 004's kernel arguments through the agent. The seed asks for
/// `default_hugepagesz=1G hugepagesz=1G hugepages=32` (32 GiB, more than this 1 GiB guest
/// has); the same arguments with 2 MiB pages reserve 64 MiB, so the kernel really allocates
/// them and the test checks that too. Plus the seed's `selinux=0`.
#[test]
#[ignore = "needs the agent's OS wiring (hostops' OsBackend in the agent's apply); VM tier, ~3 min"]
fn vm_agent_applies_seed_004_kargs_reboots_and_reports_done() {
    init_logging();
    let started = Instant::now();
    let mut vm = vm_with_agent();
    install_agent(&mut vm);
    let kargs = [
        "default_hugepagesz=2M",
        "hugepagesz=2M",
        "hugepages=32",
        "selinux=0",
    ];
    let spec = format!(
        "  kernelArguments:\n{}",
        kargs
            .iter()
            .map(|a| format!("  - {a}\n"))
            .collect::<String>()
    );
    let config = put_config(&vm, "99-worker-kargs-hugepage", &spec);
    let before = vm.current_boot().unwrap().clone();
    apply_through_reboot(&mut vm, &config);

    let after = vm.current_boot().unwrap().clone();
    assert_eq!(after.boot_count, 2);
    assert_ne!(after.boot_id, before.boot_id);
    for arg in kargs {
        assert!(
            has_arg(&after.proc_cmdline, arg),
            "{arg} missing from {}",
            after.proc_cmdline
        );
    }
    for arg in vm.image().kargs.clone().split_whitespace() {
        assert!(
            has_arg(&after.proc_cmdline, arg),
            "{arg} lost: {}",
            after.proc_cmdline
        );
    }
    let meminfo = vm.exec_ok("cat /proc/meminfo").unwrap();
    let total = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Total:"))
        .map(str::trim);
    assert_eq!(total, Some("32"), "{meminfo}");
    eprintln!("total: {:?}", started.elapsed());
    vm.shutdown().unwrap();
}

/// A pivot to `v2` and back to `v1` through the agent (`osImageURL` is an ostree ref here).
#[test]
#[ignore = "needs the agent's OS wiring (hostops' OsBackend in the agent's apply); VM tier, ~5 min"]
fn vm_agent_pivots_v1_to_v2_and_back() {
    init_logging();
    let started = Instant::now();
    let mut vm = vm_with_agent();
    install_agent(&mut vm);
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v1\n"
    );

    let to_v2 = put_config(&vm, "99-os-v2", &format!("  osImageURL: {}\n", refs::V2));
    apply_through_reboot(&mut vm, &to_v2);
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v2\n"
    );
    let v2 = vm.image().commit(refs::V2).unwrap().to_string();
    let status = vm.exec_ok("ostree admin status").unwrap();
    assert!(status.contains(&format!("* debian {v2}.")), "{status}");

    let to_v1 = put_config(&vm, "99-os-v1", &format!("  osImageURL: {}\n", refs::V1));
    apply_through_reboot(&mut vm, &to_v1);
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v1\n"
    );
    assert_eq!(vm.boot_count(), 3);
    eprintln!("total: {:?}", started.elapsed());
    vm.shutdown().unwrap();
}
