//! Generators shared by the property families. Keys (paths, unit names, drop-in names, kernel
//! arguments) come from small sets so that configs collide and merging does real work.

use base64::Engine;
use hearth_config::ignition::{Config, Dropin, File, NodeOwner, Resource, Unit, User};
use hearth_config::model::{
    KernelType, LabelSelector, MachineConfig, MachineConfigPool, MachineConfigSpec, ObjectMeta,
    SelectorOperator, SelectorRequirement, ROLE_LABEL,
};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::BTreeSet;

pub(crate) const PATHS: [&str; 6] = [
    "/etc/a.conf",
    "/etc/b.conf",
    "/etc/sysconfig/c",
    "/usr/local/bin/d",
    "/etc/e",
    "/var/lib/f/g",
];
pub(crate) const DIR_PATHS: [&str; 3] = ["/etc/dir-a", "/var/lib/dir-b", "/opt/dir-c"];
pub(crate) const LINK_PATHS: [&str; 3] = ["/etc/link-a", "/usr/local/bin/link-b", "/etc/link-c"];
pub(crate) const UNITS: [&str; 4] = ["a.service", "b.service", "c.timer", "d.socket"];
const DROPINS: [&str; 3] = ["10-a.conf", "20-b.conf", "30-c.conf"];
const KARGS: [&str; 5] = ["nosmt", "a=1", "a=2", "quiet", "mitigations=off"];
const EXTENSIONS: [&str; 4] = [
    "usbguard",
    "kerberos",
    // Not kernel-devel: with a non-default kernel type it is refused (mco_helpers_test.rs).
    "sysstat",
    "sandboxed-containers",
];
pub(crate) const SSH_KEYS: [&str; 4] = [
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1 alice@example",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2 bob@example",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC3 carol@example",
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAI4 dave@example",
];
pub(crate) const MODES: [i64; 4] = [0o644, 0o600, 0o755, 0o400];
const OS_IMAGES: [&str; 3] = [
    "",
    "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123456789abcdef",
    "registry.example:5000/rhcos:4.16",
];

/// A `data:` URL, percent-encoded or base64, with arbitrary content.
pub(crate) fn data_url() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}".prop_map(|t| format!("data:,{}", utf8_percent_encode(&t, NON_ALPHANUMERIC))),
        vec(any::<u8>(), 0..80).prop_map(|b| format!(
            "data:;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        )),
    ]
}

/// Text for unit and drop-in contents: printable text, new lines, some non-ASCII.
pub(crate) fn unit_text() -> impl Strategy<Value = String> {
    "[ -~\n\té€]{0,60}"
}

pub(crate) fn owner() -> impl Strategy<Value = NodeOwner> {
    prop_oneof![
        Just(NodeOwner::default()),
        (0i64..70000).prop_map(|id| NodeOwner {
            id: Some(id),
            name: None
        }),
        select(&["root", "core", "nobody"][..]).prop_map(|n| NodeOwner {
            id: None,
            name: Some(n.to_string())
        }),
    ]
}

pub(crate) fn file() -> impl Strategy<Value = File> {
    (
        select(&PATHS[..]),
        data_url(),
        prop::option::of(select(&MODES[..])),
        owner(),
        owner(),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(path, source, mode, user, group, overwrite)| File {
            path: path.to_string(),
            overwrite,
            user,
            group,
            append: Vec::new(),
            contents: Resource {
                source: Some(source),
                ..Default::default()
            },
            mode,
        })
}

pub(crate) fn dropin() -> impl Strategy<Value = Dropin> {
    (select(&DROPINS[..]), prop::option::of(unit_text())).prop_map(|(name, contents)| Dropin {
        name: name.to_string(),
        contents,
    })
}

pub(crate) fn unit() -> impl Strategy<Value = Unit> {
    (
        select(&UNITS[..]),
        prop::option::of(unit_text()),
        vec(dropin(), 0..3),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, contents, dropins, enabled, mask)| Unit {
            name: name.to_string(),
            contents,
            dropins: dedup_by(dropins, |d| d.name.clone()),
            // A masked unit cannot also be enabled (validation refuses it).
            enabled: if mask == Some(true) && enabled == Some(true) {
                None
            } else {
                enabled
            },
            mask,
        })
}

/// Keeps the first item of each key, so that one config never defines a key twice (as
/// validation requires); collisions happen between configs instead.
pub(crate) fn dedup_by<T, K: Ord>(items: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    let mut seen = BTreeSet::new();
    items.into_iter().filter(|i| seen.insert(key(i))).collect()
}

fn ignition_config() -> impl Strategy<Value = Config> {
    (
        vec(file(), 0..5),
        vec(unit(), 0..3),
        prop::option::of(vec(select(&SSH_KEYS[..]), 0..4)),
    )
        .prop_map(|(files, units, core_keys)| {
            let mut c = Config::default();
            c.storage.files = dedup_by(files, |f| f.path.clone());
            c.systemd.units = dedup_by(units, |u| u.name.clone());
            if let Some(keys) = core_keys {
                c.passwd.users.push(User {
                    name: "core".into(),
                    // A 3.x config may not repeat a key (Ignition refuses it).
                    ssh_authorized_keys: dedup_by(keys, |k| k.to_string())
                        .into_iter()
                        .map(String::from)
                        .collect(),
                    ..Default::default()
                });
            }
            c
        })
}

pub(crate) fn spec() -> impl Strategy<Value = MachineConfigSpec> {
    (
        ignition_config(),
        vec(select(&KARGS[..]), 0..5),
        select(
            &[
                KernelType::Default,
                KernelType::Realtime,
                KernelType::Pages64k,
            ][..],
        ),
        any::<bool>(),
        select(&OS_IMAGES[..]),
        vec(select(&EXTENSIONS[..]), 0..3),
    )
        .prop_map(|(config, kargs, kernel_type, fips, os_image, extensions)| {
            MachineConfigSpec {
                config,
                source_version: None,
                kernel_arguments: kargs.into_iter().map(String::from).collect(),
                kernel_type,
                fips,
                os_image_url: os_image.to_string(),
                extensions: extensions.into_iter().map(String::from).collect(),
                actions: Vec::new(),
            }
        })
}

/// A MachineConfig with the given name and a role of `worker` or `infra`.
pub(crate) fn machine_config() -> impl Strategy<Value = (String, MachineConfig)> {
    (select(&["worker", "infra"][..]), spec()).prop_map(|(role, spec)| {
        let mut mc = MachineConfig {
            metadata: ObjectMeta::default(),
            spec,
        };
        mc.metadata.labels.insert(ROLE_LABEL.into(), role.into());
        (role.to_string(), mc)
    })
}

/// 1 to 8 MachineConfigs with unique names whose sort order is unrelated to their position.
pub(crate) fn machine_configs() -> impl Strategy<Value = Vec<MachineConfig>> {
    vec(("[0-9]{2}", machine_config()), 1..8).prop_map(|items| {
        items
            .into_iter()
            .enumerate()
            .map(|(i, (prefix, (role, mut mc)))| {
                mc.metadata.name = format!("{prefix}-{role}-{i}");
                mc
            })
            .collect()
    })
}

/// The pool `infra`: selects `worker` and `infra` configs, as a custom pool does in the MCO.
pub(crate) fn infra_pool() -> MachineConfigPool {
    MachineConfigPool {
        metadata: ObjectMeta {
            name: "infra".into(),
            ..Default::default()
        },
        machine_config_selector: LabelSelector {
            match_expressions: vec![SelectorRequirement {
                key: ROLE_LABEL.into(),
                operator: SelectorOperator::In,
                values: vec!["worker".into(), "infra".into()],
            }],
            ..Default::default()
        },
        node_selector: LabelSelector::label("node-role.kubernetes.io/infra", ""),
        ..Default::default()
    }
}
