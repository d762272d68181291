//! The offline commands, run as a user runs them: the `hearth` binary, its stdout, stderr and
//! exit codes (0 success, 1 invalid input, 2 usage error).

use std::path::PathBuf;
use std::process::Command;

fn hearth(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The path of one of hearth's own manifests (`testdata/manifests/`).
fn fixture(name: &str) -> String {
    hearth_testdata::manifest_path(name).display().to_string()
}

#[test]
fn validate_reports_every_problem_with_file_line_object_and_field() {
    let (code, out, err) = hearth(&["validate", "-f", "examples/fleet"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok: 4 MachineConfig(s), 2 pool(s), 3 node(s)"),
        "{out}"
    );

    let bad = fixture("raid-without-devices.yaml");
    let (code, _, err) = hearth(&[
        "validate",
        "-f",
        &bad,
        "-f",
        &fixture("fips-from-template.yaml"),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("raid-without-devices.yaml:15: error: MachineConfig/raid-without-devices: spec.config.storage.disks[0].device: expected a string, found null"), "{err}");
    assert!(
        err.contains(
            "fips-from-template.yaml:10: error: MachineConfig/fips-from-template: spec.fips:"
        ),
        "{err}"
    );
    // Every problem of an object, not only the first: the second disk too.
    assert!(err.contains("raid-without-devices.yaml:20: error: MachineConfig/raid-without-devices: spec.config.storage.disks[1].device: expected a string, found null"), "{err}");
    assert!(err.contains("3 error(s)"), "{err}");

    let (code, out, _) = hearth(&["validate", "-o", "json", "-f", &bad]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["problems"][0]["path"],
        "spec.config.storage.disks[0].device"
    );
    assert_eq!(v["problems"][0]["line"], 15);
}

/// A misspelled field (issue 35) is an error by default, naming the field it likely misspells;
/// `--validate=warn` makes it a warning, `--validate=ignore` nothing.
#[test]
fn a_misspelled_field_is_an_error_unless_asked_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.yaml");
    std::fs::write(
        &file,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: edge\nspec:\n  maxUnavailble: 2\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/edge: \"\"\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = hearth(&["validate", "-f", f]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "pool.yaml:6: error: MachineConfigPool/edge: spec.maxUnavailble: unknown field"
        ) && err.contains("did you mean `maxUnavailable`?"),
        "{err}"
    );
    let (code, _, err) = hearth(&["validate", "--validate=warn", "-f", f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("pool.yaml:6: warning:"), "{err}");
    let (code, _, err) = hearth(&["validate", "--validate", "ignore", "-f", f]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("maxUnavailble"), "{err}");
    let (code, _, err) = hearth(&["validate", "--validate=lenient", "-f", f]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn render_a_pool_and_a_node_and_read_it_back() {
    let (code, out, err) = hearth(&["render", "--pool", "infra", "-f", "examples/fleet"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("name: rendered-infra-"), "{out}");
    assert!(out.contains("kernelType: realtime"), "{out}");
    // The YAML output reads back: plan it from nothing.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, &out).unwrap();
    let (code, plan, err) = hearth(&["plan", "--to", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("kernel arguments: +default_hugepagesz=1G +hugepagesz=1G +hugepages=32"),
        "{plan}"
    );
    assert!(plan.contains("disruption: reboot"), "{plan}");

    let (code, out, _) = hearth(&[
        "render",
        "--node",
        "worker-1",
        "-f",
        "examples/fleet",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("rendered-worker-worker-1-"));
    let (code, _, err) = hearth(&["render", "--node", "nobody", "-f", "examples/fleet"]);
    assert_eq!(code, 1);
    assert!(err.contains("no node named \"nobody\""), "{err}");
}

#[test]
fn plan_for_a_node_names_its_disruption() {
    let (code, out, err) = hearth(&["plan", "--node", "worker-1", "-f", "examples/fleet"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("reload NetworkManager.service"), "{out}");
    assert!(
        out.contains("(user policy for /etc/NetworkManager/system-connections)"),
        "{out}"
    );
    let (code, out, _) = hearth(&[
        "plan",
        "--node",
        "worker-1",
        "-f",
        "examples/fleet",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["disruption"]["outcome"]["type"], "Reboot");
}

#[test]
fn convert_gives_each_version_or_says_what_it_cannot_express() {
    let mc = fixture("iommu-kernel-arguments.yaml");
    let (code, out, err) = hearth(&["convert", "--ignition-version", "3.4.0", "-f", &mc]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ignition"]["version"], "3.4.0");
    assert_eq!(v["kernelArguments"]["shouldExist"][0], "intel_iommu=on");
    let (code, _, err) = hearth(&["convert", "--ignition-version", "3.2.0", "-f", &mc]);
    assert_eq!(code, 1);
    assert!(
        err.contains("spec.config.kernelArguments: needs Ignition spec 3.3.0 or newer"),
        "{err}"
    );
    let (code, out, _) = hearth(&[
        "convert",
        "--ignition-version",
        "2.2.0",
        "-f",
        &fixture("registries-policy.yaml"),
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["storage"]["files"][0]["filesystem"], "root");
    // A 3.2 file without `overwrite` is served with `overwrite: true`, as at first boot (or
    // Ignition would refuse to replace /etc/containers/policy.json, which the image has).
    let (code, out, _) = hearth(&[
        "convert",
        "--ignition-version",
        "3.2.0",
        "-f",
        &fixture("registries-policy.yaml"),
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["storage"]["files"][0]["overwrite"], true);
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(
        hearth(&["convert", "--ignition-version", "3.9.0", "-f", "x"]).0,
        2
    );
    assert_eq!(
        hearth(&["render", "-f", "examples/fleet"]).0,
        2,
        "--pool or --node is required"
    );
    assert_eq!(hearth(&["validate", "--no-such-flag"]).0, 2);
    assert_eq!(hearth(&["--help"]).0, 0);
}

/// A 467-byte "billion laughs" manifest (nine levels of nine aliases) made `hearth validate`
/// take 6 GB and abort; it is refused at once with the file, the line and the reason.
#[test]
fn validate_refuses_a_billion_laughs_manifest() {
    let mut text = String::from("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: lol\nspec:\n  kernelArguments:\n  - &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        text.push_str(&format!(
            "  - &{} [{}]\n",
            w[1],
            vec![format!("*{}", w[0]); 9].join(",")
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bomb.yaml");
    std::fs::write(&file, &text).unwrap();
    let file = file.to_str().unwrap();
    let (code, _, err) = hearth(&["validate", "-f", file]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "{file}:10: error: refused at column 15: excessive aliasing"
        )),
        "{err}"
    );
    assert!(err.contains("1 error(s)"), "{err}");
}

/// `hearth render … | head` closes the pipe early: hearth ends quietly with the status of a
/// program killed by SIGPIPE (141), not with a panic ("failed printing to stdout").
#[test]
fn a_closed_pipe_ends_output_quietly() {
    // A pipe whose reading end is closed before hearth writes: its first write fails (EPIPE).
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["render", "--pool", "worker", "-f", "examples/fleet"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// `-f` as kubectl reads it: repeated for several paths, a directory's manifests (sorted, its
/// other files left out), its subdirectories only with `-R`; the same for `render` and `plan`.
#[test]
fn f_takes_several_paths_and_directories_recursive_only_with_r() {
    let d = tempfile::tempdir().unwrap();
    let fleet = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/fleet"));
    let copy = |from: &str, to: &str| {
        let to = d.path().join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fleet.join(from), to).unwrap();
    };
    copy("00-pools.yaml", "top/00-pools.yaml");
    copy("10-nodes.yaml", "top/10-nodes.yaml");
    copy("50-worker-chrony.yaml", "top/sub/50-worker-chrony.yaml");
    copy("60-worker-units.yaml", "other/60-worker-units.yaml");
    std::fs::write(d.path().join("top/README.md"), "not a manifest").unwrap();
    let p = |s: &str| d.path().join(s).display().to_string();

    let (code, out, err) = hearth(&["validate", "-f", &p("top")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok: 0 MachineConfig(s), 2 pool(s), 3 node(s) in 2 file(s)"),
        "{out}"
    );
    let (code, out, err) = hearth(&["validate", "-R", "-f", &p("top")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok: 1 MachineConfig(s), 2 pool(s), 3 node(s) in 3 file(s)"),
        "{out}"
    );
    let (code, out, err) = hearth(&[
        "validate",
        "-f",
        &p("top"),
        "-f",
        &p("other/60-worker-units.yaml"),
        "--recursive",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok: 2 MachineConfig(s), 2 pool(s), 3 node(s) in 4 file(s)"),
        "{out}"
    );
    // render reads the same way: the chrony config (in sub/) is found only with -R.
    let (code, _, err) = hearth(&["render", "--pool", "worker", "-f", &p("top")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("selects no MachineConfigs"), "{err}");
    let (code, out, err) = hearth(&["render", "--pool", "worker", "-R", "-f", &p("top")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rendered-from: 50-examplecorp-chrony"),
        "{out}"
    );
}

/// Run-once actions survive `render` (YAML) and `plan` reads them back and lists them.
#[test]
fn plan_lists_the_run_once_actions_of_a_rendered_config() {
    let dir = tempfile::tempdir().unwrap();
    let mc = dir.path().join("mc.yaml");
    std::fs::write(&mc, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 50-act\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n  actions:\n  - name: prep\n    when: BeforeFiles\n    script: echo hi\n  - name: enroll\n    failure: Ignore\n    timeoutSeconds: 30\n    script: |\n      echo two\n").unwrap();
    let (code, out, err) = hearth(&["render", "--pool", "worker", "-f", mc.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let rendered = dir.path().join("rendered.yaml");
    std::fs::write(&rendered, &out).unwrap();
    let (code, plan, err) = hearth(&["plan", "--to", rendered.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("  prep: BeforeFiles, on failure Degrade, timeout 300 s\n  enroll: AfterFiles, on failure Ignore, timeout 30 s\n"),
        "{plan}"
    );
}
