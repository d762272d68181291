//! The agent's OS changes on a real ostree host: an ostree deployment booted in systemd-nspawn
//! (vm-tests' `OstreeHost`), the real `hearth-agent` running inside it as the systemd service,
//! real libostree staging, real reboots (the harness boots the default boot entry again, as a
//! boot loader would). Kernel arguments are checked in the boot entry the harness booted (the
//! container shares this machine's kernel, so `/proc/cmdline` is the VM tier's job). The
//! agent runs libostree through `hearth-ostree-helper`, installed beside it.

use crate::common;

use common::mc;
use hearth_vm_tests::ostree::{
    cached_oci_images, refs, tags, OstreeHost, OstreeHostOptions, SysrootOptions, DEFAULT_KARGS,
};
use hearth_vm_tests::qemu::workspace_binary;
use hearth_vm_tests::registry::Registry;
use hearth_vm_tests::relay_into;
use std::time::{Duration, Instant};

/// Where the agent lives in the host: in the stateroot's `/var`, which every deployment shares
/// (a pivot must not lose it).
const AGENT: &str = "/var/lib/hearth-test-bin/hearth-agent";
const REBOOT: Duration = Duration::from_secs(120);

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Boots `v1` with the agent installed as the service (the unit from `units/`, `ExecStart`
/// pointing at the binary in `/var`, a quick restart for the kill test), watching
/// `/etc/hearth/desired`, with the images' remote and the realtime mapping in `os.json`.
fn boot_with_agent(health_timeout: u64) -> OstreeHost {
    boot_with_agent_on(OstreeHostOptions::default(), health_timeout)
}

fn boot_with_agent_on(opts: OstreeHostOptions, health_timeout: u64) -> OstreeHost {
    let host = OstreeHost::boot_with(opts).expect(
        "boot an ostree deployment in a container (needs root, systemd-nspawn, ostree: run \
         vm-tests/scripts/install-deps.sh)",
    );
    let bin_dir = host.sysroot().stateroot_var().join("lib/hearth-test-bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_hearth-agent"),
        bin_dir.join("hearth-agent"),
    )
    .unwrap();
    // libostree runs in the helper process, found beside the agent.
    let helper = workspace_binary("hearth-ostree-helper", "hearth-ostree-helper").unwrap();
    std::fs::copy(helper, bin_dir.join("hearth-ostree-helper")).unwrap();
    let os = serde_json::json!({
        "remote": {"name": "hearth", "url": host.images().remote_url_inside()},
        "kernelTypes": {"realtime": "{ref}-rt"},
        "health": {"timeoutSeconds": health_timeout},
    });
    put(&host, "/etc/hearth/os.json", &os.to_string());
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../units/hearth-agent.service"
    ))
    .unwrap();
    put(&host, "/etc/systemd/system/hearth-agent.service", &unit);
    put(
        &host,
        "/etc/systemd/system/hearth-agent.service.d/10-test.conf",
        &format!("[Service]\nExecStart=\nExecStart={AGENT} run --interval 1\nRestartSec=1s\n"),
    );
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host
}

/// Writes a file into the booted deployment (its `/etc` is the live one).
fn put(host: &OstreeHost, path: &str, content: &str) {
    let p = host.host().path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, content).unwrap();
}

fn agent_status(host: &OstreeHost) -> serde_json::Value {
    let out = host.exec(&[AGENT, "status", "-o", "json"]).unwrap();
    assert!(out.success(), "status failed: {out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("status JSON: {e}\n{out}"))
}

/// Waits until the agent reports `state` (anything else after `timeout` fails with the status
/// and the agent's log).
fn wait_for_state(host: &OstreeHost, state: &str, timeout: Duration) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    loop {
        let st = agent_status(host);
        if st["state"] == state {
            return st;
        }
        if Instant::now() > deadline {
            let log = host
                .exec(&["journalctl", "-u", "hearth-agent", "-n", "60", "--no-pager"])
                .map(|o| o.stdout)
                .unwrap_or_default();
            panic!("the agent did not reach {state}: {st:#}\n--- agent log ---\n{log}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits for the agent's reboot of `host`; when none comes, fails with what the agent says
/// (its status and log), not only the container's console.
fn reboot(host: &mut OstreeHost, what: &str) -> hearth_vm_tests::BootInfo {
    match host.wait_for_reboot(REBOOT) {
        Ok(boot) => boot,
        Err(e) => {
            let status = host
                .exec(&[AGENT, "status", "-o", "json"])
                .map(|o| format!("{o}"))
                .unwrap_or_else(|e| format!("(no status: {e:#})"));
            let log = host
                .exec(&["journalctl", "-u", "hearth-agent", "-n", "80", "--no-pager"])
                .map(|o| o.stdout)
                .unwrap_or_default();
            panic!("{what}: {e:#}\n--- agent status ---\n{status}\n--- agent log ---\n{log}");
        }
    }
}

fn desire(host: &OstreeHost, name: &str, spec: &str) {
    // One file, replaced: the agent applies the newest config of the directory.
    let tmp = host.host().path("/etc/hearth/desired/.next");
    std::fs::create_dir_all(tmp.parent().unwrap()).unwrap();
    std::fs::write(&tmp, mc(name, spec)).unwrap();
    std::fs::rename(&tmp, host.host().path("/etc/hearth/desired/config.yaml")).unwrap();
}

fn start_agent(host: &OstreeHost) {
    host.exec_ok(&[
        "systemctl",
        "enable",
        "--now",
        "--no-block",
        "hearth-agent.service",
    ])
    .unwrap();
}

/// The deployments `ostree admin status` lists inside (a staged one has no boot entry yet).
fn deployments(host: &OstreeHost) -> usize {
    host.exec_ok(&["ostree", "admin", "status"])
        .unwrap()
        .lines()
        .filter(|l| {
            l.trim_start_matches("* ")
                .trim_start()
                .starts_with("debian ")
        })
        .count()
}

#[test]
fn kernel_arguments_are_staged_booted_and_verified_and_only_hearths_are_removed() {
    let mut host = boot_with_agent(120);
    // Seed 004's arguments (hugepages and selinux=0), from a MachineConfig as users write it,
    // plus `quiet`, which the image's boot entry already has.
    desire(
        &host,
        "05-worker-kernelarg-hugepages",
        "  kernelArguments:\n    - default_hugepagesz=1G\n    - hugepagesz=1G\n    - hugepages=32\n    - selinux=0\n    - quiet\n",
    );
    start_agent(&host);
    let boot = reboot(&mut host, "the agent rebooted the host");
    assert_eq!(boot.boot_count, 2);
    let st = wait_for_state(&host, "Done", Duration::from_secs(60));
    assert_eq!(st["current"], "05-worker-kernelarg-hugepages");
    let mut want = strings(&DEFAULT_KARGS);
    want.extend(strings(&[
        "default_hugepagesz=1G",
        "hugepagesz=1G",
        "hugepages=32",
        "selinux=0",
        "quiet",
    ]));
    assert_eq!(host.kernel_args(), want, "the booted entry's arguments");

    // Drop selinux=0 and quiet, change the page count. hearth deletes the `quiet` it appended,
    // never the image's own.
    desire(
        &host,
        "05-worker-kernelarg-hugepages-v2",
        "  kernelArguments:\n    - default_hugepagesz=1G\n    - hugepagesz=1G\n    - hugepages=16\n",
    );
    reboot(&mut host, "second reboot");
    let st = wait_for_state(&host, "Done", Duration::from_secs(60));
    assert_eq!(st["current"], "05-worker-kernelarg-hugepages-v2");
    let mut want = strings(&DEFAULT_KARGS);
    want.extend(strings(&[
        "default_hugepagesz=1G",
        "hugepagesz=1G",
        "hugepages=16",
    ]));
    assert_eq!(host.kernel_args(), want);
    host.shutdown().unwrap();
}

#[test]
fn pivot_to_v2_then_the_realtime_kernel_keeps_the_image() {
    let mut host = boot_with_agent(120);
    desire(&host, "10-os", &format!("  osImageURL: {}\n", refs::V2));
    start_agent(&host);
    reboot(&mut host, "reboot into v2");
    wait_for_state(&host, "Done", Duration::from_secs(60));
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
            .unwrap(),
        "v2\n"
    );
    assert_eq!(
        host.booted_entry().checksum,
        host.images().commit(refs::V2).unwrap()
    );
    // The agent and its journal came along (/var is shared by the deployments).
    // Now the realtime kernel: on plain ostree it is the image's `-rt` ref.
    desire(
        &host,
        "10-os-rt",
        &format!("  osImageURL: {}\n  kernelType: realtime\n", refs::V2),
    );
    reboot(&mut host, "reboot into v2-rt");
    let st = wait_for_state(&host, "Done", Duration::from_secs(60));
    assert_eq!(st["current"], "10-os-rt");
    assert_eq!(
        host.booted_entry().checksum,
        host.images().commit(refs::V2_RT).unwrap()
    );
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-kernel-type"])
            .unwrap(),
        "realtime\n"
    );
    host.shutdown().unwrap();
}

/// An ostree-native container image from the site's registry (TLS, a pull secret), as the MCO
/// writes `osImageURL` (`registry/repo@sha256:…`): pulled by skopeo and imported by the helper
/// as children of the agent's unit, under its hardening (capability bounding set, system call
/// filter, `NoNewPrivileges`, `MemoryDenyWriteExecute`); booted and verified.
#[test]
fn a_container_image_is_pulled_under_the_units_hardening_and_booted() {
    let images = cached_oci_images().unwrap();
    let registry = Registry::start().unwrap();
    registry
        .push(&images.reference(tags::V2), "os/debian:v2", None)
        .unwrap();
    let digest = images.digest(tags::V2).unwrap();
    let image = format!("{}/os/debian@{digest}", registry.host());
    let mut host = boot_with_agent(120);
    relay_into(host.host(), registry.addr(), registry.port()).unwrap();
    put(
        &host,
        &format!("/etc/containers/certs.d/{}/ca.crt", registry.host()),
        &registry.ca_pem().unwrap(),
    );
    put(&host, "/etc/ostree/auth.json", &registry.auth_json());
    desire(&host, "10-os-image", &format!("  osImageURL: {image}\n"));
    start_agent(&host);
    reboot(&mut host, "reboot into the container image");
    let st = wait_for_state(&host, "Done", Duration::from_secs(60));
    assert_eq!(st["current"], "10-os-image");
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
            .unwrap(),
        "v2\n"
    );
    assert_eq!(st["os"]["image"], image.as_str(), "{st:#}");
    assert_eq!(st["os"]["imageDigest"], digest, "{st:#}");
    let log = host
        .exec_ok(&[
            "journalctl",
            "-u",
            "hearth-agent",
            "--no-pager",
            "-o",
            "cat",
        ])
        .unwrap();
    assert!(
        log.contains("skopeo: "),
        "skopeo ran under the unit:\n{log}"
    );
    host.shutdown().unwrap();
}

#[test]
fn an_unhealthy_deployment_is_rolled_back_with_its_reason_and_not_retried() {
    let mut host = boot_with_agent(120);
    // A file with the OS change: it must be undone with the rollback.
    desire(
        &host,
        "20-broken",
        &format!(
            "  osImageURL: {}\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n        - path: /etc/hearth-test/marker\n          mode: 420\n          contents:\n            source: data:,broken-config\n",
            refs::V2_BROKEN
        ),
    );
    start_agent(&host);
    let v1 = host.images().commit(refs::V1).unwrap().to_string();
    // Boot 2: v2-broken, whose hearth-image-broken.service fails; the agent rolls back.
    reboot(&mut host, "reboot into v2-broken");
    assert_eq!(
        host.booted_entry().checksum,
        host.images().commit(refs::V2_BROKEN).unwrap()
    );
    // Boot 3: back in v1, by the agent's own decision.
    let boot = reboot(&mut host, "the agent rolled back and rebooted");
    assert_eq!(boot.boot_count, 3);
    assert_eq!(host.booted_entry().checksum, v1);
    let st = wait_for_state(&host, "Degraded", Duration::from_secs(60));
    let reason = st["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("booted unhealthy"), "{reason}");
    assert!(reason.contains("hearth-image-broken.service"), "{reason}");
    assert!(reason.contains("rolled back to deployment"), "{reason}");
    assert!(reason.contains("every change was undone"), "{reason}");
    assert_eq!(st["current"], serde_json::Value::Null);
    assert_eq!(st["desired"], "20-broken");
    assert!(
        !host.host().path("/etc/hearth-test/marker").exists(),
        "the config's file was undone with the rollback"
    );
    assert_eq!(
        host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
            .unwrap(),
        "v1\n"
    );

    // Not retried: the agent restarting (as after any reboot) leaves it Degraded, no reboot.
    host.exec_ok(&["systemctl", "restart", "hearth-agent.service"])
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let st = agent_status(&host);
    assert_eq!(st["state"], "Degraded", "{st:#}");
    assert_eq!(host.boot_count(), 3, "no new reboot");
    assert_eq!(
        host.sysroot().default_entry().unwrap().checksum,
        v1,
        "nothing staged again"
    );
    host.shutdown().unwrap();
}

#[test]
fn agent_killed_between_staging_and_reboot_converges() {
    let mut host = boot_with_agent(120);
    // Something on the node blocks shutdown (logind block inhibitor): the agent stages, asks
    // for the reboot, is refused, and waits.
    host.exec_ok(&[
        "systemd-run",
        "--unit=blocker",
        "systemd-inhibit",
        "--what=shutdown",
        "--mode=block",
        "--who=test",
        "--why=holding the reboot",
        "sleep",
        "600",
    ])
    .unwrap();
    desire(&host, "30-kargs", "  kernelArguments:\n    - hugepages=8\n");
    start_agent(&host);
    let st = wait_for_state(&host, "Rebooting", Duration::from_secs(60));
    let staged = st["progress"]["os"]["expect"]["deployment"].clone();
    assert!(
        staged.is_object(),
        "the journal names the staged deployment: {st:#}"
    );
    // Wait until the reboot was refused at least once (the deployment is staged by then).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !agent_status(&host)["reason"]
        .as_str()
        .is_some_and(|r| r.contains("inhibitors"))
    {
        assert!(Instant::now() < deadline, "no inhibited reboot reported");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The agent started the unit that finalizes the staged deployment at shutdown (a reboot
    // right after staging must not outrun its path unit).
    let active = host
        .exec(&["systemctl", "is-active", "ostree-finalize-staged.service"])
        .unwrap();
    assert_eq!(active.stdout.trim(), "active", "{active}");
    let entries_before = deployments(&host);
    assert_eq!(entries_before, 2, "booted + staged");
    host.exec_ok(&[
        "systemctl",
        "kill",
        "--signal=SIGKILL",
        "hearth-agent.service",
    ])
    .unwrap();
    // Restarted by systemd (Restart=on-failure): it resumes and stages nothing twice.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(deployments(&host), entries_before, "nothing staged twice");
    host.exec_ok(&["systemctl", "stop", "blocker.service"])
        .unwrap();
    reboot(
        &mut host,
        "the restarted agent rebooted once the inhibitor was gone",
    );
    let st = wait_for_state(&host, "Done", Duration::from_secs(60));
    assert_eq!(st["current"], "30-kargs");
    assert!(host.kernel_args().contains(&"hugepages=8".to_string()));
    assert_eq!(
        Some(host.booted_entry().checksum.as_str()),
        staged["checksum"].as_str(),
        "the deployment staged before the kill is the one booted"
    );
    host.shutdown().unwrap();
}

#[test]
fn a_host_taken_over_keeps_the_arguments_its_former_manager_appended() {
    // Installed (or managed by the MCO) with the config's first two arguments already appended.
    let mut kargs = strings(&DEFAULT_KARGS);
    kargs.extend(strings(&["hugepages=32", "selinux=0"]));
    let opts = OstreeHostOptions {
        sysroot: SysrootOptions {
            kargs,
            ..SysrootOptions::default()
        },
        ..OstreeHostOptions::default()
    };
    let mut host = boot_with_agent_on(opts, 120);
    // One entry holding two arguments, kept as written in the config: the agent must split it
    // as the kernel does to recognise them on the booted command line.
    desire(
        &host,
        "40-takeover",
        &format!(
            "  osImageURL: {}\n  kernelArguments:\n    - hugepages=32 selinux=0\n    - nosmt\n",
            refs::V1
        ),
    );
    start_agent(&host);
    reboot(&mut host, "reboot for nosmt");
    wait_for_state(&host, "Done", Duration::from_secs(60));
    let mut want = strings(&DEFAULT_KARGS);
    want.extend(strings(&["hugepages=32", "selinux=0", "nosmt"]));
    assert_eq!(host.kernel_args(), want, "nothing appended twice");
    assert_eq!(
        host.booted_entry().checksum,
        host.images().commit(refs::V1).unwrap(),
        "the booted image was not deployed again"
    );
    // The adopted arguments are hearth's now: a config without selinux=0 removes it.
    desire(
        &host,
        "40-takeover-2",
        &format!(
            "  osImageURL: {}\n  kernelArguments:\n    - hugepages=32\n    - nosmt\n",
            refs::V1
        ),
    );
    reboot(&mut host, "reboot without selinux=0");
    wait_for_state(&host, "Done", Duration::from_secs(60));
    let mut want = strings(&DEFAULT_KARGS);
    want.extend(strings(&["hugepages=32", "nosmt"]));
    assert_eq!(host.kernel_args(), want);
    host.shutdown().unwrap();
}

#[test]
fn a_oneshot_apply_during_the_boot_does_not_wait_for_itself() {
    // `hearth-agent apply` run by a oneshot unit that the boot waits for (how an image might
    // run it instead of the service): after the reboot the same unit finishes the apply, and
    // its health check must not wait for a boot that waits for it.
    let mut host = boot_with_agent(600);
    put(
        &host,
        "/etc/systemd/system/hearth-apply.service",
        &format!(
            "[Unit]\nDescription=apply the desired config once\nAfter=dbus.service systemd-logind.service\n\
             [Service]\nType=oneshot\nExecStart={AGENT} apply --once-from /etc/hearth/desired/config.yaml\n\
             SuccessExitStatus=3\n[Install]\nWantedBy=multi-user.target\n"
        ),
    );
    host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
    host.exec_ok(&["systemctl", "enable", "hearth-apply.service"])
        .unwrap();
    desire(
        &host,
        "50-oneshot",
        "  kernelArguments:\n    - hugepages=4\n",
    );
    host.exec_ok(&["systemctl", "start", "--no-block", "hearth-apply.service"])
        .unwrap();
    reboot(&mut host, "the one-shot rebooted the host");
    // Boot 2: the unit runs again during the boot and finishes; the health check (600 s limit)
    // must not be what ends it.
    let st = wait_for_state(&host, "Done", Duration::from_secs(90));
    assert_eq!(st["current"], "50-oneshot");
    assert!(host.kernel_args().contains(&"hugepages=4".to_string()));
    let state = host
        .exec(&["systemctl", "is-system-running", "--wait"])
        .unwrap();
    assert_eq!(state.stdout.trim(), "running", "{state}");
    host.shutdown().unwrap();
}

/// An ostree host whose `hearth-ostree-helper` is missing: the agent (which links no libostree)
/// runs, and the OS change is refused with what to install; nothing is staged.
#[test]
fn an_ostree_host_without_the_helper_refuses_os_changes_saying_what_to_install() {
    let host = boot_with_agent(120);
    std::fs::remove_file(
        host.sysroot()
            .stateroot_var()
            .join("lib/hearth-test-bin/hearth-ostree-helper"),
    )
    .unwrap();
    desire(&host, "kargs", "  kernelArguments:\n    - hugepages=32\n");
    start_agent(&host);
    let st = wait_for_state(&host, "Degraded", Duration::from_secs(60));
    let reason = st["reason"].as_str().unwrap();
    for want in [
        "hearth-ostree-helper",
        "not installed",
        "/usr/libexec/hearth/hearth-ostree-helper",
    ] {
        assert!(reason.contains(want), "{want:?} missing in: {reason}");
    }
    assert_eq!(deployments(&host), 1, "nothing was staged");
    // The agent itself is still running (the failure was the operation's).
    assert_eq!(
        host.exec_ok(&["systemctl", "is-active", "hearth-agent.service"])
            .unwrap()
            .trim(),
        "active"
    );
    host.shutdown().unwrap();
}
