//! Conformance with the MCO's merge, conversion and validation tables:
//! openshift/machine-config-operator `pkg/controller/common/helpers_test.go` at commit
//! 7ff337a4ffac8e7562692181178ede61e4b2eec5 (against `MergeMachineConfigs`,
//! `ParseAndConvertConfig`, `ValidateIgnition`, `removeIgnDuplicateFilesUnitsUsers` and the
//! Ignition converter in `pkg/controller/common/helpers.go` and `ign_converter.go`). Each test is
//! one table entry, named after its MCO test; where hearth differs on purpose the test checks
//! hearth's documented behaviour (docs/config-model.md, "Differences from the MCO") and says why.
//!
//! The file-mode entries (sticky/setuid/setgid refused) are in mco_conformance_pending.rs.
#![allow(non_snake_case)]

use crate::mco_support as support;

use flate2::write::GzEncoder;
use flate2::Compression;
use hearth_config::dataurl;
use hearth_config::ignition::SpecVersion;
use hearth_config::model::KernelType;
use hearth_config::render::{merge, render_pool};
use serde_json::{json, Value};
use std::io::Write;
use support::*;

fn v3(sections: Value) -> Value {
    json!({"config": ign("3.5.0", sections)})
}

fn core_keys(keys: &[&str]) -> Value {
    json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": keys}]}})
}

// ---------------------------------------------------------------------------------------------
// TestValidateIgnition

// helpers_test.go TestValidateIgnition: "Test that an empty ignition config returns nil" (2.x and
// 3.x): a MachineConfig without Ignition content is valid.
#[test]
fn mco_helpers_test__TestValidateIgnition_empty_config() {
    let mc = load(
        "no-ignition",
        "worker",
        json!({"kernelArguments": ["nosmt"]}),
    );
    assert!(mc.spec.config.storage.files.is_empty());
    let mc = load(
        "only-version",
        "worker",
        json!({"config": ign("3.5.0", json!({}))}),
    );
    assert!(mc.spec.config.passwd.users.is_empty());
}

// TestValidateIgnition: "Test that an invalid ignition config returns an error" (users but no
// version), for 2.x and 3.x alike.
#[test]
fn mco_helpers_test__TestValidateIgnition_no_version() {
    let text = manifest(
        "no-version",
        "worker",
        json!({"config": core_keys(&["5678", "abc"])}),
    );
    let e = error_text(&text);
    assert!(
        e.contains("spec.config.ignition.version") && e.contains("missing"),
        "{e}"
    );
}

// TestValidateIgnition: "Test that a valid ignition config returns nil" (2.x, written as 2.0.0).
// Differs on purpose: hearth reads Ignition 2.2.0 to 2.4.0 (what the MCO and OpenShift have
// written since 4.x); 2.0.0 and 2.1.0 are refused with the versions hearth reads. The same
// config declared 2.2.0 is valid.
#[test]
fn mco_helpers_test__TestValidateIgnition_valid_2x_config() {
    let file = json!({"storage": {"files": [{"filesystem": "root", "path": "/etc/testfileconfig",
        "mode": 420, "contents": {"source": "data:,hello%20hearth"}}]}});
    for old in ["2.0.0", "2.1.0"] {
        let e = error_text(&manifest(
            "v2",
            "worker",
            json!({"config": ign(old, file.clone())}),
        ));
        assert!(e.contains(old) && e.contains("2.2.0"), "{old}: {e}");
    }
    let mc = load("v2", "worker", json!({"config": ign("2.2.0", file)}));
    assert_eq!(mc.spec.config.storage.files[0].path, "/etc/testfileconfig");
}

// TestValidateIgnition: "Test that a valid ignition config returns nil" (3.x with one file).
#[test]
fn mco_helpers_test__TestValidateIgnition_valid_3x_config() {
    let mc = load(
        "v3",
        "worker",
        v3(
            json!({"storage": {"files": [{"path": "/etc/testfileconfig", "mode": 420,
            "contents": {"source": "data:,hearth%20config"}}]}}),
        ),
    );
    assert_eq!(mc.spec.config.storage.files.len(), 1);
}

// TestValidateIgnition: "Test that an invalid typed config will fail" (a string).
#[test]
fn mco_helpers_test__TestValidateIgnition_invalid_typed_config() {
    let e = error_text(&manifest("typed", "worker", json!({"config": "test"})));
    assert!(e.contains("spec.config"), "{e}");
}

// ValidateIgnition runs Ignition's own validation, which refuses a repeated entry in a list: a
// 3.x config that repeats an SSH key is refused (issue 15, item 2; not in the MCO's table).
#[test]
fn mco_helpers_test__TestValidateIgnition_repeated_ssh_key_in_3x() {
    let text = manifest(
        "dup",
        "worker",
        v3(core_keys(&["ssh-ed25519 AAAA1", "ssh-ed25519 AAAA1"])),
    );
    let e = error_text(&text);
    assert!(
        e.contains("spec.config.passwd.users[0].sshAuthorizedKeys[1]")
            && e.contains("sshAuthorizedKeys[0]"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// The Ignition converter

// helpers_test.go TestIgnitionConverterGetSupportedMinorVersions: the MCO converts 2.2 and 3.0 to
// 3.5 (and reads 2.0 to 2.2 through its 2.2 parser). Differs on purpose: hearth reads and serves
// 2.2, 2.3 and 2.4 (2.3 and 2.4 are what the last 2.x Ignition releases write; the MCO refuses
// them) and 3.0 to 3.5, but not 2.0 or 2.1.
#[test]
fn mco_helpers_test__TestIgnitionConverterGetSupportedMinorVersions() {
    assert_eq!(
        hearth_config::validate::supported_versions(),
        "2.2.0, 2.3.0, 2.4.0, 3.0.0, 3.1.0, 3.2.0, 3.3.0, 3.4.0, 3.5.0"
    );
    for v in ["2.3.0", "2.4.0"] {
        load("v", "worker", json!({"config": ign(v, json!({}))}));
    }
}

// helpers_test.go TestIgnitionConverterGetSupportedMinorVersion: 3.5.0 is supported; 7.7.7 is
// not. The MCO's converter also maps 3.5.2 to 3.5; differs on purpose: hearth accepts exactly
// the versions the Ignition specification defines (Ignition itself refuses 3.5.2).
#[test]
fn mco_helpers_test__TestIgnitionConverterGetSupportedMinorVersion() {
    assert_eq!(
        SpecVersion::parse("3.5.0").map(SpecVersion::as_str),
        Some("3.5.0")
    );
    for refused in ["7.7.7", "3.5.2"] {
        let e = error_text(&manifest(
            "v",
            "worker",
            json!({"config": ign(refused, json!({}))}),
        ));
        assert!(e.contains(refused), "{refused}: {e}");
    }
}

// helpers_test.go TestIgnitionConverterConvert: a config with core's keys converts from 2.2 to
// 3.5 and from 3.5 down to 2.2, 3.4, 3.3, 3.2 and 3.1, each output declaring its version.
#[test]
fn mco_helpers_test__TestIgnitionConverterConvert() {
    let from_v2 = load(
        "v2",
        "worker",
        json!({"config": ign("2.2.0", core_keys(&["5678", "abc"]))}),
    );
    assert_eq!(
        from_v2.spec.config.passwd.users[0].ssh_authorized_keys,
        ["5678", "abc"]
    );
    let from_v3 = load("v3", "worker", v3(core_keys(&["5678", "abc"])));
    for target in ["2.2.0", "3.4.0", "3.3.0", "3.2.0", "3.1.0", "3.5.0"] {
        let v = SpecVersion::parse(target).unwrap();
        let out = from_v3.spec.config.to_version(v).unwrap();
        assert_eq!(out["ignition"]["version"], target);
        assert_eq!(
            out["passwd"]["users"][0]["sshAuthorizedKeys"],
            json!(["5678", "abc"]),
            "{target}"
        );
    }
}

// TestIgnitionConverterConvert: "Conversion not supported" (3.1 up to 3.5 is an error in the
// MCO's converter, which only converts down from 3.5). Differs on purpose: hearth translates every
// version it reads into one model, so a 3.1 config can be served as 3.5.
#[test]
fn mco_helpers_test__TestIgnitionConverterConvert_up_from_3_1() {
    let mc = load(
        "v31",
        "worker",
        json!({"config": ign("3.1.0", core_keys(&["5678"]))}),
    );
    let out = mc.spec.config.to_version(SpecVersion::V3_5).unwrap();
    assert_eq!(out["ignition"]["version"], "3.5.0");
}

// ---------------------------------------------------------------------------------------------
// TestParseAndConvert

// helpers_test.go TestParseAndConvert: a 2.2 config whose core user repeats a key converts to
// 3.x with each key once, in order (issue 15, item 2).
#[test]
fn mco_helpers_test__TestParseAndConvert_v2_duplicate_keys() {
    let mc = load(
        "v2",
        "worker",
        json!({"config": ign("2.2.0", core_keys(&["5678", "5678", "abc"]))}),
    );
    assert_eq!(
        mc.spec.config.passwd.users[0].ssh_authorized_keys,
        ["5678", "abc"]
    );
    // And so does the 3.x output of `hearth convert`.
    let out = mc.spec.config.to_version(SpecVersion::V3_5).unwrap();
    assert_eq!(
        out["passwd"]["users"][0]["sshAuthorizedKeys"],
        json!(["5678", "abc"])
    );
}

// TestParseAndConvert: 3.0, 3.1, 3.2 (the MCO's internal version), 3.3, 3.4 and 3.5 configs all
// parse to the same config.
#[test]
fn mco_helpers_test__TestParseAndConvert_v3_versions() {
    let want = load("v", "worker", v3(core_keys(&["5678", "abc"])))
        .spec
        .config;
    for v in ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"] {
        let got = load(
            "v",
            "worker",
            json!({"config": ign(v, core_keys(&["5678", "abc"]))}),
        );
        assert_eq!(got.spec.config.passwd, want.passwd, "{v}");
    }
}

// TestParseAndConvert: "Make a bad Ign3 cfg" (21.0.0) fails.
#[test]
fn mco_helpers_test__TestParseAndConvert_bad_version() {
    let e = error_text(&manifest(
        "v",
        "worker",
        json!({"config": ign("21.0.0", json!({}))}),
    ));
    assert!(e.contains("21.0.0"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// TestMergeMachineConfigs

// helpers_test.go TestMergeMachineConfigs: "a singular base config that sets FIPS also sets
// other defaults correctly": fips set, default kernel, no kernel arguments or extensions, and an
// Ignition version although the config had no Ignition content.
#[test]
fn mco_helpers_test__TestMergeMachineConfigs_single_fips_config() {
    let fips = load("fips", "worker", json!({"fips": true}));
    let spec = render("worker", &[fips]).unwrap();
    assert!(spec.fips);
    assert_eq!(spec.kernel_type, KernelType::Default);
    assert!(spec.kernel_arguments.is_empty() && spec.extensions.is_empty());
    assert_eq!(spec.config.ignition.version.as_deref(), Some("3.5.0"));
}

// TestMergeMachineConfigs: "Test that all other configs can also be set properly": the OS image
// can be overridden, kernel arguments concatenate, the realtime kernel and FIPS win, extensions
// are kept, core's keys merge in order and its password hash is kept; a 2.x config merges too.
#[test]
fn mco_helpers_test__TestMergeMachineConfigs_all_fields() {
    let configs = vec![
        load(
            "osimageurl",
            "worker",
            json!({"osImageURL": "registry.example/os@sha256:aa"}),
        ),
        load(
            "kargs",
            "worker",
            json!({"kernelArguments": ["testKarg", "kargFromIgnitionDowngrade"]}),
        ),
        load("kerneltype", "worker", json!({"kernelType": "realtime"})),
        load(
            "extension",
            "worker",
            json!({"extensions": ["testExtensions"]}),
        ),
        load("ssh-a", "worker", v3(core_keys(&["5678"]))),
        load("fips", "worker", json!({"fips": true})),
        load(
            "passwd",
            "worker",
            v3(json!({"passwd": {"users": [{"name": "core", "passwordHash": "testpass"}]}})),
        ),
        load("ssh-b", "worker", v3(core_keys(&["1234"]))),
        load("v2", "worker", json!({"config": ign("2.2.0", json!({}))})),
    ];
    let spec = render("worker", &configs).unwrap();
    assert_eq!(spec.os_image_url, "registry.example/os@sha256:aa");
    assert_eq!(
        spec.kernel_arguments,
        ["testKarg", "kargFromIgnitionDowngrade"]
    );
    assert_eq!(spec.kernel_type, KernelType::Realtime);
    assert!(spec.fips);
    assert_eq!(spec.extensions, ["testExtensions"]);
    let users = &spec.config.passwd.users;
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].ssh_authorized_keys, ["5678", "1234"]);
    assert_eq!(users[0].password_hash.as_deref(), Some("testpass"));
}

fn gzip_source(text: &str) -> String {
    let mut z = GzEncoder::new(Vec::new(), Compression::default());
    z.write_all(text.as_bytes()).unwrap();
    dataurl::encode(&z.finish().unwrap())
}

fn file(path: &str, source: &str, gzip: bool) -> Value {
    let mut contents = json!({"source": source});
    if gzip {
        contents["compression"] = json!("gzip");
    }
    json!({"storage": {"files": [{"path": path, "mode": 420, "contents": contents}]}})
}

// TestMergeMachineConfigs: "custom pool configuration can overwrite base pool configuration",
// and names order the rest: bbb overrides aaa; ccc (role infra) overrides ddd (role worker)
// despite its name, without inheriting ddd's compression; every file gets overwrite: true.
#[test]
fn mco_helpers_test__TestMergeMachineConfigs_custom_pool_overrides_worker() {
    let pool = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector:
    matchExpressions:
    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
  nodeSelector:
    matchLabels: {node-role.kubernetes.io/infra: ""}
"#;
    let (m, d) = read(pool);
    assert!(!d.iter().any(|d| d.is_error()), "{d:?}");
    let infra = &m.pools[0].item;
    let configs = vec![
        load("ccc", "infra", v3(file("/etc/test2", "data:,new", false))),
        load("aaa", "worker", v3(file("/etc/test1", "data:,old", false))),
        load("bbb", "worker", v3(file("/etc/test1", "data:,new", false))),
        load(
            "ddd",
            "worker",
            v3(file("/etc/test2", &gzip_source("old"), true)),
        ),
    ];
    let spec = render_pool(infra, &configs).unwrap().spec;
    let files = &spec.config.storage.files;
    assert_eq!(files.len(), 2);
    for (f, path) in files.iter().zip(["/etc/test1", "/etc/test2"]) {
        assert_eq!(f.path, path);
        assert_eq!(f.contents.source.as_deref(), Some("data:,new"), "{path}");
        assert_eq!(f.contents.compression, None, "{path}");
        assert_eq!(f.mode, Some(420));
        assert_eq!(f.overwrite, Some(true), "{path}");
    }
}

// MergeMachineConfigs (helpers.go) refuses the kernel-devel extension with a non-default kernel
// ("installing kernel-devel extension is not supported with kernelType"); no table entry tests
// it. hearth refuses it too (issue 15, item 7): in one config when reading it, and when two
// configs that are each fine alone combine at rendering.
#[test]
fn mco_helpers_test__TestMergeMachineConfigs_kernel_devel_needs_default_kernel() {
    for kt in ["realtime", "64k-pages"] {
        let e = error_text(&manifest(
            "rt-devel",
            "worker",
            json!({"kernelType": kt, "extensions": ["kernel-devel"]}),
        ));
        assert!(
            e.contains("spec.extensions[0]") && e.contains("kernel-devel") && e.contains(kt),
            "{kt}: {e}"
        );
    }
    let configs = vec![
        load(
            "50-devel",
            "worker",
            json!({"extensions": ["kernel-devel"]}),
        ),
        load("60-rt", "worker", json!({"kernelType": "realtime"})),
    ];
    let err = render("worker", &configs).unwrap_err();
    assert!(
        err.contains("kernel-devel") && err.contains("50-devel") && err.contains("60-rt"),
        "{err}"
    );
    // With the default kernel it renders.
    let spec = render("worker", &configs[..1]).unwrap();
    assert_eq!(spec.extensions, ["kernel-devel"]);
}

// ---------------------------------------------------------------------------------------------
// TestRemoveIgnDuplicateFilesAndUnits

// helpers_test.go TestRemoveIgnDuplicateFilesAndUnits: in a 2.x config, the last file with a path
// wins; for a unit defined three times the last contents win, and drop-ins of all definitions
// are kept, a later drop-in of the same name replacing an earlier one.
#[test]
fn mco_helpers_test__TestRemoveIgnDuplicateFilesAndUnits() {
    let v2 = json!({
        "storage": {"files": [
            {"filesystem": "root", "path": "/etc/testfileconfig", "mode": 420, "contents": {"source": "data:,old"}},
            {"filesystem": "root", "path": "/etc/testfileconfig", "mode": 420, "contents": {"source": "data:,new"}}
        ]},
        "systemd": {"units": [
            {"name": "test.service", "contents": "old", "dropins": [{"name": "one.conf", "contents": "old"}]},
            {"name": "test.service", "dropins": [{"name": "one.conf", "contents": "new"}]},
            {"name": "test.service", "contents": "new", "dropins": [{"name": "two.conf", "contents": "new"}]}
        ]}
    });
    let mc = load("dups", "worker", json!({"config": ign("2.2.0", v2)}));
    let c = &mc.spec.config;
    assert_eq!(c.storage.files.len(), 1);
    assert_eq!(
        c.storage.files[0].contents.source.as_deref(),
        Some("data:,new")
    );
    assert_eq!(c.systemd.units.len(), 1);
    let u = &c.systemd.units[0];
    assert_eq!(u.contents.as_deref(), Some("new"));
    let mut dropins: Vec<(&str, Option<&str>)> = u
        .dropins
        .iter()
        .map(|d| (d.name.as_str(), d.contents.as_deref()))
        .collect();
    dropins.sort();
    assert_eq!(
        dropins,
        [("one.conf", Some("new")), ("two.conf", Some("new"))]
    );
}

// ---------------------------------------------------------------------------------------------
// TestSetDefaultFileOverwrite

// helpers_test.go TestSetDefaultFileOverwrite: after the merge, a file without overwrite has
// overwrite: true; overwrite: false is kept (issue 15, item 1: without it Ignition refuses to
// replace a file the OS image has, and the first boot of a new node fails).
#[test]
fn mco_helpers_test__TestSetDefaultFileOverwrite() {
    let sections = json!({"storage": {"files": [
        {"path": "/etc/testfileconfig1", "mode": 420, "contents": {"source": "data:,test"}},
        {"path": "/etc/testfileconfig2", "mode": 420, "overwrite": false, "contents": {"source": "data:,test"}}
    ]}});
    let mc = load("overwrite", "worker", v3(sections));
    // Read as written: the default is applied when rendering, not when reading.
    assert_eq!(mc.spec.config.storage.files[0].overwrite, None);
    let spec = merge(&[&mc]).unwrap();
    let got: Vec<Option<bool>> = spec
        .config
        .storage
        .files
        .iter()
        .map(|f| f.overwrite)
        .collect();
    assert_eq!(got, [Some(true), Some(false)]);
    // A later config that leaves overwrite unset does not undo an earlier false.
    let later = load(
        "later",
        "worker",
        v3(file("/etc/testfileconfig2", "data:,again", false)),
    );
    let spec = merge(&[&mc, &later]).unwrap();
    assert_eq!(spec.config.storage.files[1].overwrite, Some(false));
}

// TestSetDefaultFileOverwrite, on a running node: a config rendered before hearth set the
// default (overwrite unset) and the same config rendered now (overwrite: true) differ in nothing
// the agent does, so upgrading hearth rewrites no file and reboots no node; an explicit change
// to false is still a change.
#[test]
fn mco_helpers_test__TestSetDefaultFileOverwrite_no_rewrite_on_upgrade() {
    let mc = load(
        "overwrite",
        "worker",
        v3(file("/etc/chrony.conf", "data:,server%20ntp", false)),
    );
    let now = merge(&[&mc]).unwrap();
    assert_eq!(now.config.storage.files[0].overwrite, Some(true));
    let mut before = now.clone();
    before.config.storage.files[0].overwrite = None;
    let p = plan_of(&before, &now);
    assert!(p.is_empty(), "{p}");
    let mut keep = now.clone();
    keep.config.storage.files[0].overwrite = Some(false);
    assert!(!plan_of(&now, &keep).is_empty());
}

// ---------------------------------------------------------------------------------------------
// TestIgnitionMergeCompressed

// helpers_test.go TestIgnitionMergeCompressed (butane issue 332): a gzip-compressed file merged
// with a later plain file of the same path has the later content, not gzip-decoded garbage.
#[test]
fn mco_helpers_test__TestIgnitionMergeCompressed() {
    let first = load(
        "a",
        "worker",
        v3(file(
            "/etc/testfileconfig",
            &gzip_source("compressed"),
            true,
        )),
    );
    let second = load(
        "b",
        "worker",
        v3(file("/etc/testfileconfig", "data:,hello%20hearth", false)),
    );
    let spec = merge(&[&first, &second]).unwrap();
    let f = &spec.config.storage.files[0];
    let bytes = dataurl::decode(
        f.contents.source.as_deref().unwrap(),
        f.contents.compression.as_deref(),
    )
    .unwrap();
    assert_eq!(bytes, b"hello hearth");
}

// ---------------------------------------------------------------------------------------------
// TestCalculateConfigFileDiffs

// helpers_test.go TestCalculateConfigFileDiffs: a changed file is a difference (one entry, its
// path); a config compared with itself has none.
#[test]
fn mco_helpers_test__TestCalculateConfigFileDiffs() {
    let old = spec_of(v3(file(
        "/etc/kubernetes/kubelet-ca.crt",
        "data:,oldcertificates",
        false,
    )));
    let new = spec_of(v3(file(
        "/etc/kubernetes/kubelet-ca.crt",
        "data:,newcertificates",
        false,
    )));
    let p = plan_of(&old, &new);
    let written: Vec<String> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            hearth_config::plan::Action::WriteFile { file } => Some(file.path.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(written, ["/etc/kubernetes/kubelet-ca.crt"]);
    assert!(plan_of(&old, &old).is_empty());
}

// ---------------------------------------------------------------------------------------------
// TestValidateMachineConfigExtensions

// helpers_test.go TestValidateMachineConfigExtensions: "Supported" extensions are accepted.
#[test]
fn mco_helpers_test__TestValidateMachineConfigExtensions_supported() {
    let mc = load(
        "ext",
        "worker",
        json!({"extensions": ["sysstat", "sandboxed-containers"]}),
    );
    assert_eq!(mc.spec.extensions, ["sysstat", "sandboxed-containers"]);
}

// TestValidateMachineConfigExtensions: "Unsupported" names are refused by the MCO, whose list is
// RHCOS's extensions. Differs on purpose: hearth runs fleets of other OS images whose extension
// repositories it does not know, so any well-formed name is accepted (and a node that cannot
// install it reports the failure); a malformed name is refused.
#[test]
fn mco_helpers_test__TestValidateMachineConfigExtensions_unsupported() {
    let mc = load(
        "ext",
        "worker",
        json!({"extensions": ["unsupported1", "unsupported2"]}),
    );
    assert_eq!(mc.spec.extensions, ["unsupported1", "unsupported2"]);
    let e = error_text(&manifest(
        "bad",
        "worker",
        json!({"extensions": ["not an extension"]}),
    ));
    assert!(e.contains("spec.extensions[0]"), "{e}");
}
