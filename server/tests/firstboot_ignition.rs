//! Zero-touch first boot through the real Ignition (Debian's `ignition` 2.14, its `fetch` and
//! `files` stages run against a root tree, which is then booted as a systemd container):
//!
//! - a node's own first-boot token (`hearth bootstrap-token worker --node worker-7`) makes
//!   `/config/worker` serve that node's config: its pool's files *and* its per-node overlay
//!   (static addresses, right from the first boot), with the agent's name in `agent.env`;
//! - the agent, started by the preset Ignition wrote, enrolls as worker-7 and adopts what
//!   Ignition wrote: it reaches Done in the node's render without rewriting a file (same inodes)
//!   and without the reboot a re-apply would cost under the default disruption policy.
//!
//! - the image is stock (the cached Debian tree, without hearth): the server serves the agent
//!   (`--serve-agent`), Ignition fetches it over TLS into `/usr/local/bin`, checks its sha512
//!   and writes its unit.
//!
//! hearth-server runs on the test machine in a network namespace shared with the container
//! (as in `fleet.rs`); the CLI makes the token.

use crate::common;

use common::hosts::{binary, wait_for};
use hearth_vm_tests::{HostOptions, SharedNetwork, SystemdHost};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const SERVER: &str = "https://127.0.0.1:22623";
/// Where Debian's `ignition` package installs the binary (a dracut module).
const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";
const BASE_FILE: &str = "/etc/hearth-fb/base.conf";
const OVERLAY_FILE: &str = "/etc/hearth-fb/addresses.conf";

const FLEET: &str = r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-base
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/hearth-fb/base.conf
        mode: 0644
        contents:
          source: data:,pool%20setting%0A
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 80-worker-7-addresses
  labels:
    machineconfiguration.openshift.io/role: worker
    hearth.io/node: worker-7
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/hearth-fb/addresses.conf
        mode: 0600
        contents:
          source: data:,address1%3D192.0.2.27%2F24%0A
"#;

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pointer config an installer puts on the machine: fetch `/config/worker` with the token
/// as a header, trusting the fleet CA.
fn pointer_config(token: &str, ca_pem: &str) -> String {
    serde_json::json!({
        "ignition": {
            "version": "3.3.0",
            "config": {"replace": {
                "source": format!("{SERVER}/config/worker"),
                "httpHeaders": [{"name": "Authorization", "value": format!("Bearer {token}")}],
            }},
            "security": {"tls": {"certificateAuthorities": [
                {"source": hearth_config::dataurl::encode(ca_pem.as_bytes())}
            ]}},
        }
    })
    .to_string()
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .ino()
}

#[test]
fn a_stock_image_first_booted_by_ignition_gets_the_agent_its_overlay_and_is_done_without_a_reboot()
{
    assert!(
        Path::new(IGNITION).exists(),
        "{IGNITION} is missing: install Debian's ignition package (vm-tests/scripts/install-deps.sh)"
    );
    let agent = binary("hearth-agent", "hearth-agent");
    let cli = binary("hearth-cli", "hearth");
    let net = SharedNetwork::create().expect("a shared network namespace (root, iproute2)");
    let state = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(state.path().join("server.log")).unwrap();
    // What the server hands out to first-booting machines: this build's agent.
    let served = state.path().join("served");
    std::fs::create_dir(&served).unwrap();
    std::fs::copy(&agent, served.join("hearth-agent")).unwrap();
    let mut server = net
        .command(env!("CARGO_BIN_EXE_hearth-server"))
        .arg("--state-dir")
        .arg(state.path())
        .args(["--listen", "127.0.0.1:22623", "--san", "127.0.0.1"])
        .arg("--serve-agent")
        .arg(&served)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("start hearth-server");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("listening on 127.0.0.1:22623"), "{first}");
    std::thread::spawn(move || for _ in lines {});
    let st = state.path().to_path_buf();
    wait_for("the server's first start", Duration::from_secs(30), || {
        st.join("admin.token").exists() && st.join("pki/ca.crt").exists()
    });
    let ca = st.join("pki/ca.crt");
    let admin = std::fs::read_to_string(st.join("admin.token")).unwrap();
    let hearth = |args: &[&str]| {
        run(
            net.command(&cli)
                .args(args)
                .env("HEARTH_SERVER", SERVER)
                .env("HEARTH_CA", &ca)
                .env("HEARTH_TOKEN", admin.trim()),
            &format!("hearth {}", args.join(" ")),
        )
    };
    let fleet = st.join("fleet.yaml");
    std::fs::write(&fleet, FLEET).unwrap();
    hearth(&["apply", "-f", fleet.to_str().unwrap()]);
    let token = hearth(&["bootstrap-token", "worker", "--node", "worker-7"]);
    let token = token.trim();

    // The machine's disk: a stock OS image (Debian, no hearth), then Ignition.
    let image = hearth_vm_tests::cached_rootfs().expect("the test root file system");
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    run(
        Command::new("cp").arg("-a").arg(&image).arg(&root),
        "copying the root file system",
    );
    assert!(!root.join("usr/bin/hearth-agent").exists());
    assert!(!root.join("usr/local/bin/hearth-agent").exists());
    // Ignition relabels what it wrote with `setfiles` (Debian's policycoreutils) and the root's
    // policy; Debian runs without SELinux: a policy type with no file contexts labels nothing.
    std::fs::create_dir_all(root.join("etc/selinux/targeted/contexts/files")).unwrap();
    std::fs::write(
        root.join("etc/selinux/targeted/contexts/files/file_contexts"),
        "",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/selinux/config"),
        "SELINUX=disabled\nSELINUXTYPE=targeted\n",
    )
    .unwrap();

    let pointer = work.path().join("pointer.ign");
    std::fs::write(
        &pointer,
        pointer_config(token, &std::fs::read_to_string(&ca).unwrap()),
    )
    .unwrap();
    let ign_run = work.path().join("run");
    std::fs::create_dir_all(&ign_run).unwrap();
    let ignition = |stage: &str| {
        run(
            net.command(IGNITION)
                .args(["-platform", "file", "-stage", stage, "-log-to-stdout"])
                .arg("-root")
                .arg(&root)
                .arg("-config-cache")
                .arg(ign_run.join("ignition.json"))
                .arg("-state-file")
                .arg(ign_run.join("state"))
                .arg("-neednet")
                .arg(ign_run.join("neednet"))
                .env("IGNITION_CONFIG_FILE", &pointer),
            &format!("ignition {stage}"),
        )
    };
    ignition("fetch");
    ignition("files");

    // What Ignition wrote: the pool's file, the node's overlay, the agent's settings and stamp.
    assert_eq!(
        std::fs::read_to_string(root.join(&BASE_FILE[1..])).unwrap(),
        "pool setting\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(&OVERLAY_FILE[1..])).unwrap(),
        "address1=192.0.2.27/24\n"
    );
    let env = std::fs::read_to_string(root.join("etc/hearth/agent.env")).unwrap();
    assert!(env.contains("HEARTH_NODE_NAME=worker-7\n"), "{env}");
    let stamp = std::fs::read_to_string(root.join("etc/hearth/firstboot-config")).unwrap();
    // The agent, as served (Ignition checked its sha512), and its unit running it from there.
    assert_eq!(
        std::fs::read(root.join("usr/local/bin/hearth-agent")).unwrap(),
        std::fs::read(&agent).unwrap()
    );
    let unit =
        std::fs::read_to_string(root.join("etc/systemd/system/hearth-agent.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/hearth-agent run"),
        "{unit}"
    );
    assert!(stamp.starts_with("rendered-worker-worker-7-"), "{stamp}");
    let inodes = (
        inode(&root.join(&BASE_FILE[1..])),
        inode(&root.join(&OVERLAY_FILE[1..])),
    );

    // First boot. The tree is booted as the container's own disk (an overlay over it).
    let host = SystemdHost::boot_with(HostOptions {
        rootfs: Some(root.clone()),
        network: net.host_network(),
        // No machine-id yet: systemd applies the presets Ignition wrote (the agent's unit).
        first_boot: true,
        ..HostOptions::default()
    })
    .expect("boot the Ignition-provisioned root");
    let booted = host.nspawn_pid();
    assert_eq!(
        host.exec_ok(&["cat", "/etc/machine-id"]).unwrap().trim(),
        host.machine_id(),
        "systemd took the first boot's machine-id"
    );
    let mut last = String::new();
    let done = (0..600).any(|_| {
        let out = net
            .command(&cli)
            .args(["get", "nodes", "-o", "json"])
            .env("HEARTH_SERVER", SERVER)
            .env("HEARTH_CA", &ca)
            .env("HEARTH_TOKEN", admin.trim())
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        let v: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
        let done = v["items"].as_array().is_some_and(|items| {
            items.iter().any(|n| {
                n["metadata"]["name"] == "worker-7"
                    && n["status"]["state"] == "Done"
                    && n["status"]["current"]
                        .as_str()
                        .is_some_and(|c| c == stamp.trim())
            })
        });
        if !done {
            std::thread::sleep(Duration::from_millis(200));
        }
        done
    });
    let agent_log = || {
        host.exec(&["journalctl", "-u", "hearth-agent", "--no-pager", "-n", "80"])
            .map(|o| o.stdout)
            .unwrap_or_default()
    };
    assert!(
        done,
        "worker-7 did not reach Done in {}:\n{last}\n--- agent log ---\n{}",
        stamp.trim(),
        agent_log()
    );
    let log = agent_log();
    assert!(
        log.contains("adopted the config Ignition wrote at first boot"),
        "{log}"
    );
    // Nothing rewritten, no reboot: the container is still in its first boot (the test boots
    // nothing again, so a reboot would have stopped it before Done).
    assert_eq!(
        (
            inode(&host.path(BASE_FILE)),
            inode(&host.path(OVERLAY_FILE))
        ),
        inodes,
        "a file Ignition wrote was rewritten"
    );
    assert!(host.is_running(), "the container stopped (a reboot?)");
    assert_eq!(host.nspawn_pid(), booted, "the container was booted again");
    drop(host);
    let _ = server.kill();
    let _ = server.wait();
}
