//! The VM tier with hearth's agent: the real `hearth-agent` binary (this workspace's build,
//! handed to the guest through the 9p share, so the image does not change with the agent)
//! applies MachineConfigs with OS changes in a QEMU guest booted from a real kernel and dracut
//! initramfs, reboots it through logind, and verifies after the boot.
//!
//! Needs root, qemu-system-x86, e2fsprogs, debootstrap and ostree
//! (`vm-tests/scripts/install-deps.sh`); the first run builds the VM image (a few minutes,
//! cached). Run all VM scenarios with
//! `cargo build -p hearth-agent -p hearth-ostree-helper && cargo test -p hearth-vm-tests --test 'vm_*' -- --include-ignored --test-threads=1`.

use std::time::{Duration, Instant};

use hearth_vm_tests::qemu::{refs, workspace_binary, Vm, VmOptions, SHARE_INSIDE};

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

/// Where the agent lives in the guest: in `/var`, which every deployment shares (a pivot must
/// not lose it, and the agent must start again after each reboot).
const AGENT: &str = "/var/lib/hearth-test-bin/hearth-agent";

/// The helper process that runs libostree for the agent, beside it (where the agent looks).
const HELPER: &str = "/var/lib/hearth-test-bin/hearth-ostree-helper";

/// Boots `v1` with this workspace's `hearth-agent` installed as the systemd service (the unit
/// from `units/`, `ExecStart` pointing at the binary in `/var`), watching
/// `/etc/hearth/desired`, not started yet.
fn vm_with_agent() -> Vm {
    let mut vm = Vm::boot(VmOptions::default()).unwrap();
    let share = vm.share_dir().to_path_buf();
    std::fs::create_dir_all(share.join("bin")).unwrap();
    // The agent, and the helper process that runs libostree for it (found beside it).
    for (package, name) in [
        ("hearth-agent", "hearth-agent"),
        ("hearth-ostree-helper", "hearth-ostree-helper"),
    ] {
        let binary = workspace_binary(package, name).unwrap();
        // A debug build is mostly debug info (~170 MB): the guest gets it stripped (binutils'
        // `strip`, present wherever Rust links), which is much faster through 9p under TCG.
        let stripped = std::process::Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(share.join("bin").join(name))
            .arg(&binary)
            .status()
            .is_ok_and(|s| s.success());
        if !stripped {
            std::fs::copy(&binary, share.join("bin").join(name)).unwrap();
        }
    }
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../units/hearth-agent.service"),
        share.join("hearth-agent.service"),
    )
    .unwrap();
    // The health check waits for the boot to finish: TCG boots take a minute, give it room.
    std::fs::write(
        share.join("os.json"),
        r#"{"health": {"timeoutSeconds": 480}}"#,
    )
    .unwrap();
    vm.exec_ok(&format!(
        "set -e
         install -D -m 0755 {SHARE_INSIDE}/bin/hearth-agent {AGENT}
         install -D -m 0755 {SHARE_INSIDE}/bin/hearth-ostree-helper {HELPER}
         install -D -m 0644 {SHARE_INSIDE}/os.json /etc/hearth/os.json
         install -D -m 0644 {SHARE_INSIDE}/hearth-agent.service /etc/systemd/system/hearth-agent.service
         mkdir -p /etc/systemd/system/hearth-agent.service.d /etc/hearth/desired
         printf '[Service]\\nExecStart=\\nExecStart={AGENT} run --interval 1\\nRestartSec=1s\\n' \\
             >/etc/systemd/system/hearth-agent.service.d/10-test.conf
         systemctl daemon-reload"
    ))
    .unwrap();
    vm
}

/// Makes `spec` the desired MachineConfig `name` (one file in `/etc/hearth/desired`, replaced
/// atomically: the agent applies the newest config of the directory).
fn desire(vm: &mut Vm, name: &str, spec: &str) {
    let yaml = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  \
         name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n{spec}"
    );
    std::fs::write(vm.share_dir().join(format!("{name}.yaml")), yaml).unwrap();
    vm.exec_ok(&format!(
        "cp {SHARE_INSIDE}/{name}.yaml /etc/hearth/desired/.next && \
         mv /etc/hearth/desired/.next /etc/hearth/desired/config.yaml"
    ))
    .unwrap();
}

/// The agent's status document (`hearth-agent status -o json`).
fn status(vm: &mut Vm) -> serde_json::Value {
    let out = vm.exec_ok(&format!("{AGENT} status -o json")).unwrap();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("status is not JSON ({e}): {out}"))
}

/// Waits until the agent reports `state`; fails after `timeout` with the status and the
/// agent's log.
fn wait_for_state(vm: &mut Vm, state: &str, timeout: Duration) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    loop {
        let st = status(vm);
        if st["state"] == state {
            return st;
        }
        if Instant::now() > deadline {
            let log = vm
                .exec("journalctl -u hearth-agent -n 80 --no-pager")
                .map(|o| o.stdout)
                .unwrap_or_default();
            panic!("the agent did not reach {state}: {st:#}\n--- agent log ---\n{log}");
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Waits for the guest to reboot (the agent's doing); fails with the agent's log when it does
/// not.
fn wait_for_agent_reboot(vm: &mut Vm) -> hearth_vm_tests::qemu::VmBoot {
    let rebooted = vm.wait_for_reboot().cloned();
    rebooted.unwrap_or_else(|e| {
        let log = vm
            .exec("journalctl -u hearth-agent -n 80 --no-pager")
            .map(|o| o.stdout)
            .unwrap_or_default();
        panic!("the agent did not reboot the guest: {e:#}\n--- agent log ---\n{log}")
    })
}

/// How long the agent may take after a boot to verify, pass the health check (the boot must
/// finish first) and report.
const SETTLE: Duration = Duration::from_secs(300);

/// Seed 004's kernel arguments through the agent, which stages them, reboots the guest through
/// logind, and after the boot verifies them and reports Done. The seed asks for
/// `default_hugepagesz=1G hugepagesz=1G hugepages=32` (32 GiB, more than this 1 GiB guest
/// has); the same arguments with 2 MiB pages reserve 64 MiB, so the kernel really allocates
/// them and the test checks that too. Plus the seed's `selinux=0`.
#[test]
fn vm_agent_applies_seed_004_kargs_reboots_and_reports_done() {
    init_logging();
    let started = Instant::now();
    let mut vm = vm_with_agent();
    let before = vm.current_boot().unwrap().clone();
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
            .map(|a| format!("    - {a}\n"))
            .collect::<String>()
    );
    desire(&mut vm, "05-worker-kernelarg-hugepages", &spec);
    vm.exec_ok("systemctl enable --now --no-block hearth-agent.service")
        .unwrap();
    let after = wait_for_agent_reboot(&mut vm);
    eprintln!(
        "the agent's reboot: {:?} after the start",
        started.elapsed()
    );
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
    let st = wait_for_state(&mut vm, "Done", SETTLE);
    assert_eq!(st["current"], "05-worker-kernelarg-hugepages", "{st:#}");
    let meminfo = vm.exec_ok("cat /proc/meminfo").unwrap();
    let total = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Total:"))
        .map(str::trim);
    assert_eq!(total, Some("32"), "{meminfo}");
    eprintln!("total: {:?}", started.elapsed());
    vm.shutdown().unwrap();
}

/// A pivot to `v2` and back to `v1` through the agent (`osImageURL` is an ostree ref, already
/// in the guest's repository, so no remote is needed).
#[test]
#[ignore = "VM tier, ~5 min (three boots under TCG): a pivot on a real kernel is not proven in CI (nspawn tier: os_host.rs); run with: cargo test -p hearth-vm-tests --test vm_agent -- --ignored"]
fn vm_agent_pivots_v1_to_v2_and_back() {
    init_logging();
    let started = Instant::now();
    let mut vm = vm_with_agent();
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v1\n"
    );
    let v1 = vm.image().commit(refs::V1).unwrap().to_string();
    let v2 = vm.image().commit(refs::V2).unwrap().to_string();

    desire(
        &mut vm,
        "10-os-v2",
        &format!("  osImageURL: {}\n", refs::V2),
    );
    vm.exec_ok("systemctl enable --now --no-block hearth-agent.service")
        .unwrap();
    wait_for_agent_reboot(&mut vm);
    let st = wait_for_state(&mut vm, "Done", SETTLE);
    assert_eq!(st["current"], "10-os-v2", "{st:#}");
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v2\n"
    );
    let status = vm.exec_ok("ostree admin status").unwrap();
    assert!(status.contains(&format!("* debian {v2}.")), "{status}");
    eprintln!("pivot to v2: {:?}", started.elapsed());

    desire(
        &mut vm,
        "10-os-v1",
        &format!("  osImageURL: {}\n", refs::V1),
    );
    wait_for_agent_reboot(&mut vm);
    let st = wait_for_state(&mut vm, "Done", SETTLE);
    assert_eq!(st["current"], "10-os-v1", "{st:#}");
    assert_eq!(
        vm.exec_ok("cat /usr/lib/hearth-image-version").unwrap(),
        "v1\n"
    );
    let status = vm.exec_ok("ostree admin status").unwrap();
    assert!(status.contains(&format!("* debian {v1}.")), "{status}");
    assert_eq!(vm.boot_count(), 3);
    eprintln!("total: {:?}", started.elapsed());
    vm.shutdown().unwrap();
}
