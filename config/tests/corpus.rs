//! Acceptance: every manifest of hearth's own fixtures (`testdata/`) and, where it is beside the
//! repository, of the MCO's own end-to-end test data and the users' documents, is either accepted
//! or refused with a precise message. The expectations are pinned here, one per input, with the
//! reason. The `mco_corpus_*` tests need that corpus: `#[ignore]`d, run by `.ci/run` with its path.

use hearth_config::diag::{Diagnostic, Severity};
use hearth_config::ignition::SpecVersion;
use hearth_config::manifest::{read_str, Manifests};
use hearth_config::model::KernelType;
use hearth_config::{dataurl, render};

/// What reading one input must give.
enum Expect {
    /// Accepted: this many MachineConfigs and pools, no errors, and exactly these warning paths.
    Accepted {
        mcs: usize,
        pools: usize,
        warnings: &'static [&'static str],
    },
    /// Refused with one error at (line, path) whose message contains the text.
    Refused {
        line: usize,
        path: &'static str,
        message: &'static str,
    },
}

use Expect::*;

const OK_MC: Expect = Accepted {
    mcs: 1,
    pools: 0,
    warnings: &[],
};
const OK_POOL: Expect = Accepted {
    mcs: 0,
    pools: 1,
    warnings: &[],
};

fn fixture_expectation(name: &str) -> Expect {
    match name {
        "05-worker-kernelarg-selinux.yaml"
        | "10-worker-bootstrap-script.yaml"
        | "50-infra-file.yaml"
        | "99-master-ssh.yaml"
        | "99-worker-realtime.yaml"
        | "disable-chrony.yaml"
        | "iommu-kernel-arguments.yaml"
        | "registries-policy.yaml"
        | "units-and-dropins.yaml" => OK_MC,
        "infra.machineconfigpool.yaml" | "worker.machineconfigpool.yaml" => OK_POOL,
        "journald-filesystem-root.yaml" => Accepted {
            mcs: 1,
            pools: 0,
            warnings: &["spec.config.storage.files[0].filesystem"],
        },
        "fips-from-template.yaml" => Refused {
            line: 10,
            path: "spec.fips",
            message: "${{ENABLE_FIPS}} is an unsubstituted OpenShift Template parameter",
        },
        "ignition-version-null.yaml" => Refused {
            line: 11,
            path: "spec.config.ignition.version",
            message: "the Ignition spec version is required, found null",
        },
        "raid-without-devices.yaml" => Refused {
            line: 15,
            path: "spec.config.storage.disks[0].device",
            message: "expected a string, found null",
        },
        other => panic!("fixture {other} has no pinned expectation: add one"),
    }
}

fn corpus_expectation(name: &str) -> Expect {
    match name {
        "99_openshift-machineconfig_master.yaml"
        | "99_openshift-machineconfig_worker.yaml"
        | "add-gpg-pub-key.yaml"
        | "add-ignition-kernel-arguments.yaml"
        | "bz1866117-add-dummy-files.yaml"
        | "bz2096496-dummy-mc-for-fips.yaml"
        | "change-policy-json.yaml"
        | "change-worker-duplicated-kernel-argument.yaml"
        | "change-worker-extension-usbguard.yaml"
        | "change-worker-karg-ktype-extension.yaml"
        | "change-worker-kernel-selinux.yaml"
        | "change-workers-chrony-configuration.yaml"
        | "disable-chrony.yaml"
        | "infra-extension-mc.yaml"
        | "infra-testfile-mc.yaml"
        | "master-extension-mc.yaml"
        | "master-testfile-mc.yaml"
        | "set-64k-pages-kernel.yaml"
        | "set-realtime-kernel.yaml"
        | "test-config.yaml" => OK_MC,
        "custom-machine-config-pool.yaml"
        | "master.machineconfigpool.yaml"
        | "worker.machineconfigpool.yaml" => OK_POOL,
        // 3.2.0 configs that still carry the 2.x `filesystem: root`: accepted, with a warning.
        "add-mc-to-trigger-node-drain.yaml" | "change-worker-jrnl-configuration.yaml" => Accepted {
            mcs: 1,
            pools: 0,
            warnings: &["spec.config.storage.files[0].filesystem"],
        },
        // OpenShift Templates instantiated without their parameters.
        "change-fips.yaml" => Refused {
            line: 9,
            path: "spec.fips",
            message: "${{FIPS}} is an unsubstituted OpenShift Template parameter",
        },
        "custom-machine-config-pool-osimagestream.yaml" => Refused {
            line: 20,
            path: "spec.osImageStream.name",
            message: "${{OSIMAGESTREAM}} is an unsubstituted OpenShift Template parameter",
        },
        // Deliberately invalid values.
        "change-worker-ign-version.yaml" => Refused {
            line: 11,
            path: "spec.config.ignition.version",
            message: "the Ignition spec version is required, found null",
        },
        "extra-disks-with-files.yaml" => Refused {
            line: 14,
            path: "spec.config.storage.files[0].path",
            message: "expected a string, found null",
        },
        "extra-disks.yaml" => Refused {
            line: 14,
            path: "spec.config.storage.disks[0].device",
            message: "expected a string, found null",
        },
        other => panic!("corpus file {other} has no pinned expectation: add one"),
    }
}

fn block_expectation(file: &str, first_line: usize) -> Expect {
    match (file, first_line) {
        ("posts/worker-tuning-notes.md", 10) => OK_MC,
        ("posts/worker-tuning-notes.md", 29) => Refused {
            line: 37,
            path: "",
            message: "check the indentation of this line",
        },
        ("posts/worker-tuning-notes.md", 45) => OK_MC,
        ("posts/worker-tuning-notes.md", 59) => Refused {
            line: 60,
            path: "",
            message: "not valid YAML",
        },
        ("seeds/000_0e15a311a86aaee1.txt", 61) => OK_MC,
        ("seeds/001_aa7317c4db8c56ec.txt", 87) => OK_POOL,
        ("seeds/001_aa7317c4db8c56ec.txt", 108) => OK_MC,
        // Published mis-indented: the list items sit left of their key.
        ("seeds/004_7cac1ccf9a07f9c4.txt", 52) => Refused {
            line: 65,
            path: "",
            message: "check the indentation of this line",
        },
        ("seeds/004_7cac1ccf9a07f9c4.txt", 73) => Refused {
            line: 82,
            path: "",
            message: "check the indentation of this line",
        },
        ("seeds/004_7cac1ccf9a07f9c4.txt", 138) => OK_MC,
        ("seeds/004_7cac1ccf9a07f9c4.txt", 156) => OK_MC,
        // An ImageContentSourcePolicy pasted with its kind name on the line above it.
        ("seeds/004_7cac1ccf9a07f9c4.txt", 170) => Refused {
            line: 171,
            path: "",
            message: "not valid YAML",
        },
        other => panic!("block {other:?} has no pinned expectation: add one"),
    }
}

/// The errors a refused input has after the pinned first one (hearth reports every problem of
/// an object, not only the first).
fn further_errors(label: &str) -> Vec<&'static str> {
    match label {
        "extra-disks-with-files.yaml" => vec![
            "spec.config.storage.disks[0].device",
            "spec.config.storage.disks[1].device",
        ],
        "extra-disks.yaml" | "raid-without-devices.yaml" => {
            vec!["spec.config.storage.disks[1].device"]
        }
        _ => vec![],
    }
}

fn check(label: &str, m: &Manifests, diags: &[Diagnostic], expect: Expect) {
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    match expect {
        Accepted {
            mcs,
            pools,
            warnings,
        } => {
            assert!(errors.is_empty(), "{label}: unexpected errors: {errors:#?}");
            assert_eq!(m.machine_configs.len(), mcs, "{label}: MachineConfigs");
            assert_eq!(m.pools.len(), pools, "{label}: pools");
            let got: Vec<&str> = diags
                .iter()
                .filter(|d| d.severity == Severity::Warning)
                .map(|d| d.path.as_str())
                .collect();
            assert_eq!(got, warnings, "{label}: warnings {diags:#?}");
        }
        Refused {
            line,
            path,
            message,
        } => {
            // Every problem of an object is reported: the first is pinned above, the others
            // here (by field path).
            let others: Vec<&str> = errors[1..].iter().map(|d| d.path.as_str()).collect();
            assert_eq!(
                others,
                further_errors(label),
                "{label}: further errors {diags:#?}"
            );
            let e = errors[0];
            assert_eq!(e.line, Some(line), "{label}: line of {e}");
            assert_eq!(e.path, path, "{label}: path of {e}");
            assert!(e.message.contains(message), "{label}: message of {e}");
            assert!(
                m.machine_configs.is_empty() && m.pools.is_empty(),
                "{label}: nothing kept"
            );
        }
    }
}

/// Reads each file and checks it against its pinned expectation.
fn check_files(files: Vec<(String, String)>, expectation: fn(&str) -> Expect) {
    for (name, text) in files {
        let (m, diags) = read_str(&name, &text);
        check(&name, &m, &diags, expectation(&name));
        for d in &diags {
            assert_eq!(d.file, name);
            assert!(
                d.object.is_some() || d.path.is_empty(),
                "{d} names its object"
            );
        }
    }
}

/// Reads each manifest block of the documents and checks it against its pinned expectation.
fn check_blocks(blocks: Vec<hearth_testdata::Block>) {
    for b in blocks {
        let (m, diags) = read_str(&b.file, &b.text);
        check(
            &format!("{}:{}", b.file, b.first_line),
            &m,
            &diags,
            block_expectation(&b.file, b.first_line),
        );
    }
}

#[test]
fn every_fixture_is_accepted_or_refused_precisely() {
    let files = hearth_testdata::manifest_files();
    assert!(files.len() >= 15, "fixtures: {}", files.len());
    check_files(files, fixture_expectation);
}

#[test]
#[ignore = "needs the MCO e2e corpus: HEARTH_SHARED=DIR or ../shared beside the clone (.ci/run runs it)"]
fn mco_corpus_every_manifest_is_accepted_or_refused_precisely() {
    let files = hearth_testdata::mco_corpus_files();
    assert!(files.len() >= 30, "corpus has {} files", files.len());
    check_files(files, corpus_expectation);
}

#[test]
fn every_block_of_the_posts_is_accepted_or_refused_precisely() {
    let blocks = hearth_testdata::blocks(&hearth_testdata::posts_dir());
    assert_eq!(blocks.len(), 4, "blocks found: {blocks:#?}");
    check_blocks(blocks);
}

#[test]
#[ignore = "needs the MCO e2e corpus: HEARTH_SHARED=DIR or ../shared beside the clone (.ci/run runs it)"]
fn mco_corpus_every_seed_block_is_accepted_or_refused_precisely() {
    let blocks = hearth_testdata::blocks(&hearth_testdata::seeds_dir());
    assert_eq!(blocks.len(), 8, "seed blocks found: {blocks:#?}");
    check_blocks(blocks);
}

/// Reads hearth's own fixtures, which must have no errors.
fn fixtures(names: &[&str]) -> Manifests {
    let mut all = Manifests::default();
    for name in names {
        let (m, diags) = read_str(name, &hearth_testdata::manifest(name));
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:#?}");
        all.extend(m);
    }
    all
}

#[test]
fn a_worker_script_of_ignition_2_2_renders_as_an_executable_with_the_decoded_script() {
    let m = fixtures(&["10-worker-bootstrap-script.yaml"]);
    let configs: Vec<_> = m.machine_configs.iter().map(|s| s.item.clone()).collect();
    let pools = render::with_builtin_pools(&[]);
    let worker = pools.iter().find(|p| p.name() == "worker").unwrap();
    let rendered = render::render_pool(worker, &configs).unwrap();
    let f = &rendered.spec.config.storage.files[0];
    assert_eq!(f.path, "/usr/local/bin/site-bootstrap");
    assert_eq!(f.mode, Some(0o755), "YAML 0755 is octal");
    let content = dataurl::decode(f.contents.source.as_deref().unwrap(), None).unwrap();
    let script = String::from_utf8(content).unwrap();
    assert!(script.starts_with("#!/usr/bin/bash\n"), "{script}");
    assert!(script.contains("rpm-ostree install policycoreutils-python-utils"));
    assert_eq!(configs[0].spec.source_version, Some(SpecVersion::V2_2));
    assert_eq!(
        rendered.spec.config.ignition.version.as_deref(),
        Some("3.5.0")
    );
}

#[test]
fn an_infra_pool_gets_worker_and_infra_configs() {
    let m = fixtures(&[
        "infra.machineconfigpool.yaml",
        "50-infra-file.yaml",
        "10-worker-bootstrap-script.yaml",
    ]);
    let pools =
        render::with_builtin_pools(&m.pools.iter().map(|s| s.item.clone()).collect::<Vec<_>>());
    let configs: Vec<_> = m.machine_configs.iter().map(|s| s.item.clone()).collect();
    let infra = pools.iter().find(|p| p.name() == "infra").unwrap();
    let rendered = render::render_pool(infra, &configs).unwrap();
    let mut paths: Vec<&str> = rendered
        .spec
        .config
        .storage
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    paths.sort();
    assert_eq!(paths, ["/etc/testinfra", "/usr/local/bin/site-bootstrap"]);
    let infra_file = rendered
        .spec
        .config
        .storage
        .files
        .iter()
        .find(|f| f.path == "/etc/testinfra")
        .unwrap();
    assert_eq!(infra_file.mode, Some(0o644));
    assert_eq!(
        dataurl::decode(infra_file.contents.source.as_deref().unwrap(), None).unwrap(),
        b"test"
    );
    // A node labelled infra (and still worker) lands in the infra pool.
    let node = hearth_config::model::NodeInfo {
        metadata: hearth_config::model::ObjectMeta {
            name: "infra-0".into(),
            labels: [
                ("node-role.kubernetes.io/infra".to_string(), String::new()),
                ("node-role.kubernetes.io/worker".to_string(), String::new()),
            ]
            .into(),
            ..Default::default()
        },
    };
    assert_eq!(
        render::pool_for_node(&pools, &node).unwrap().name(),
        "infra"
    );
}

/// The worker render of the kernel-argument and realtime-kernel fixtures.
fn kargs_and_realtime() -> hearth_config::model::MachineConfig {
    let m = fixtures(&[
        "05-worker-kernelarg-selinux.yaml",
        "99-worker-realtime.yaml",
    ]);
    let configs: Vec<_> = m.machine_configs.iter().map(|s| s.item.clone()).collect();
    let pools = render::with_builtin_pools(&[]);
    let worker = pools.iter().find(|p| p.name() == "worker").unwrap();
    render::render_pool(worker, &configs).unwrap()
}

#[test]
fn kernel_arguments_and_the_realtime_kernel_are_read() {
    let rendered = kargs_and_realtime();
    assert_eq!(rendered.spec.kernel_arguments, ["selinux=0"]);
    assert_eq!(rendered.spec.kernel_type, KernelType::Realtime);
}

/// Renders every worker config of the files together, and the pool named `other` too.
fn render_together(
    files: Vec<(String, String)>,
    other: &str,
) -> (
    hearth_config::model::MachineConfig,
    hearth_config::model::MachineConfig,
) {
    let mut all = Manifests::default();
    for (name, text) in files {
        let (m, _) = read_str(&name, &text);
        all.extend(m);
    }
    let configs: Vec<_> = all.machine_configs.iter().map(|s| s.item.clone()).collect();
    let pools =
        render::with_builtin_pools(&all.pools.iter().map(|s| s.item.clone()).collect::<Vec<_>>());
    let worker = pools.iter().find(|p| p.name() == "worker").unwrap();
    let r = render::render_pool(worker, &configs).unwrap();
    // Same inputs, same name.
    assert_eq!(
        render::render_pool(worker, &configs).unwrap().name(),
        r.name()
    );
    let other = pools.iter().find(|p| p.name() == other).unwrap();
    (r, render::render_pool(other, &configs).unwrap())
}

fn chrony_enabled(r: &hearth_config::model::MachineConfig) -> Option<bool> {
    r.spec
        .config
        .systemd
        .units
        .iter()
        .find(|u| u.name == "chronyd.service")
        .unwrap()
        .enabled
}

#[test]
fn the_worker_fixtures_render_together() {
    let (r, infra) = render_together(hearth_testdata::manifest_files(), "infra");
    assert_eq!(r.spec.kernel_arguments, ["selinux=0"]);
    assert_eq!(r.spec.kernel_type, KernelType::Realtime);
    // Ignition kernelArguments are kept, not dropped.
    assert_eq!(
        r.spec.config.kernel_arguments.should_exist,
        ["intel_iommu=on"]
    );
    assert_eq!(r.spec.config.kernel_arguments.should_not_exist, ["quiet"]);
    assert_eq!(chrony_enabled(&r), Some(false));
    // The infra pool takes the worker configs and its own file.
    assert_eq!(
        infra.spec.config.storage.files.len(),
        r.spec.config.storage.files.len() + 1
    );
}

#[test]
#[ignore = "needs the MCO e2e corpus: HEARTH_SHARED=DIR or ../shared beside the clone (.ci/run runs it)"]
fn mco_corpus_worker_configs_render_together() {
    let (r, custom) = render_together(
        hearth_testdata::mco_corpus_files(),
        "custom-machine-config-pool",
    );
    // Kernel arguments of every worker config, in name order, duplicates kept.
    assert_eq!(
        r.spec.kernel_arguments,
        [
            "trigger-fips-issue=1",
            "y=0",
            "z=4",
            "y=1",
            "z=4",
            "z=10",
            "enforcing=0"
        ]
    );
    assert_eq!(
        r.spec.kernel_type,
        KernelType::Realtime,
        "set-realtime-kernel sorts after set-64k-pages-kernel"
    );
    assert_eq!(r.spec.extensions, ["usbguard"]);
    // Ignition kernelArguments are kept, not dropped.
    assert_eq!(r.spec.config.kernel_arguments.should_exist, ["enforcing=0"]);
    // The chrony unit is disabled and the custom pool inherits all of it.
    assert_eq!(chrony_enabled(&r), Some(false));
    assert_eq!(
        custom.spec.config.storage.files.len(),
        r.spec.config.storage.files.len()
    );
}

#[test]
fn kernel_arguments_and_the_realtime_kernel_show_in_the_plan_with_a_reboot() {
    use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
    use hearth_config::plan::{plan, Action};
    let rendered = kargs_and_realtime();
    let p = plan(
        &MachineConfigSpec::default(),
        &rendered.spec,
        &DisruptionPolicies::default(),
    );
    assert!(
        p.actions.contains(&Action::KernelArguments {
            delete: vec![],
            append: vec!["selinux=0".into()]
        }),
        "{p}"
    );
    assert!(
        p.actions.iter().any(|a| matches!(
            a,
            Action::KernelType {
                to: KernelType::Realtime,
                ..
            }
        )),
        "{p}"
    );
    assert!(p.disruption.reboot(), "{p}");
    let text = p.to_string();
    assert!(
        text.contains("reboot: kernel arguments changed") && text.contains("kernel type changed"),
        "{text}"
    );
}
