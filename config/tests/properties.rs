//! Property tests of the config crate: rendering is deterministic, order-independent and
//! content-addressed; a rendered config reads back as the agent reads it; Ignition 2.x <-> 3.x
//! translation keeps content; a MachineConfig survives `to_manifest` -> `read_str`; and
//! `read_str` never panics, whatever the text.
//!
//! Bugs found here are kept as regression tests named after the bug (`rendered_*_is_refused`).
//!
//! Case counts are kept modest (64-256) so the suite runs in seconds; raise them locally with
//! `PROPTEST_CASES=10000 cargo test -p hearth-config --test properties`.

use base64::Engine;
use hearth_config::ignition::{
    Config, Directory, Dropin, File, Group, NodeOwner, Resource, SpecVersion, Timeouts, Unit, User,
    V2Config, V2Ignition, V2Node, V2Passwd, V2Storage, V2Systemd, V2Unit, V2User, Verification,
};
use hearth_config::manifest::{read_machine_config, read_str};
use hearth_config::model::{
    KernelType, LabelSelector, MachineConfig, MachineConfigPool, MachineConfigSpec, ObjectMeta,
    SelectorOperator, SelectorRequirement, ROLE_LABEL,
};
use hearth_config::render::{configs_for_pool, merge, render_pool, spec_hash};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use sha2::{Digest, Sha512};
use std::collections::BTreeSet;

// ---------------------------------------------------------------------------------------------
// Generators. Keys (paths, unit names, drop-in names, kernel arguments) come from small sets so
// that configs collide and merging does real work.
// ---------------------------------------------------------------------------------------------

const PATHS: [&str; 6] = [
    "/etc/a.conf",
    "/etc/b.conf",
    "/etc/sysconfig/c",
    "/usr/local/bin/d",
    "/etc/e",
    "/var/lib/f/g",
];
const DIR_PATHS: [&str; 3] = ["/etc/dir-a", "/var/lib/dir-b", "/opt/dir-c"];
const LINK_PATHS: [&str; 3] = ["/etc/link-a", "/usr/local/bin/link-b", "/etc/link-c"];
const UNITS: [&str; 4] = ["a.service", "b.service", "c.timer", "d.socket"];
const DROPINS: [&str; 3] = ["10-a.conf", "20-b.conf", "30-c.conf"];
const KARGS: [&str; 5] = ["nosmt", "a=1", "a=2", "quiet", "mitigations=off"];
const EXTENSIONS: [&str; 4] = [
    "usbguard",
    "kerberos",
    // Not kernel-devel: with a non-default kernel type it is refused (mco_helpers_test.rs).
    "sysstat",
    "sandboxed-containers",
];
const SSH_KEYS: [&str; 4] = [
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1 alice@example",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2 bob@example",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC3 carol@example",
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAI4 dave@example",
];
const MODES: [i64; 4] = [0o644, 0o600, 0o755, 0o400];
const OS_IMAGES: [&str; 3] = [
    "",
    "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123456789abcdef",
    "registry.example:5000/rhcos:4.16",
];

/// A `data:` URL, percent-encoded or base64, with arbitrary content.
fn data_url() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}".prop_map(|t| format!("data:,{}", utf8_percent_encode(&t, NON_ALPHANUMERIC))),
        vec(any::<u8>(), 0..80).prop_map(|b| format!(
            "data:;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        )),
    ]
}

/// Text for unit and drop-in contents: printable text, new lines, some non-ASCII.
fn unit_text() -> impl Strategy<Value = String> {
    "[ -~\n\té€]{0,60}"
}

fn owner() -> impl Strategy<Value = NodeOwner> {
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

fn file() -> impl Strategy<Value = File> {
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

fn dropin() -> impl Strategy<Value = Dropin> {
    (select(&DROPINS[..]), prop::option::of(unit_text())).prop_map(|(name, contents)| Dropin {
        name: name.to_string(),
        contents,
    })
}

fn unit() -> impl Strategy<Value = Unit> {
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
fn dedup_by<T, K: Ord>(items: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
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

fn spec() -> impl Strategy<Value = MachineConfigSpec> {
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
            }
        })
}

/// A MachineConfig with the given name and a role of `worker` or `infra`.
fn machine_config() -> impl Strategy<Value = (String, MachineConfig)> {
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
fn machine_configs() -> impl Strategy<Value = Vec<MachineConfig>> {
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
fn infra_pool() -> MachineConfigPool {
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

fn assert_rendered_name(name: &str, pool: &str) {
    let prefix = format!("rendered-{pool}-");
    let hash = name
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{name:?} does not start with {prefix:?}"));
    assert_eq!(
        hash.len(),
        32,
        "{name:?}: the hash part must be 32 hex digits"
    );
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
        "{name:?}: the hash part must be lower-case hex"
    );
}

// ---------------------------------------------------------------------------------------------
// Rendering.
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The same inputs give the same rendered name and spec, every time.
    #[test]
    fn rendering_is_deterministic(mcs in machine_configs()) {
        let pool = infra_pool();
        let a = render_pool(&pool, &mcs).unwrap();
        let b = render_pool(&pool, &mcs.clone()).unwrap();
        prop_assert_eq!(a.name(), b.name());
        prop_assert_eq!(&a.spec, &b.spec);
        prop_assert_eq!(&a, &b);
    }

    /// The order in which manifests are given (file order, `-f` order) does not matter.
    #[test]
    fn rendering_ignores_input_order(
        (mcs, shuffled) in machine_configs()
            .prop_flat_map(|m| (Just(m.clone()), Just(m).prop_shuffle()))
    ) {
        for pool in [infra_pool(), MachineConfigPool::builtin("worker")] {
            let a = render_pool(&pool, &mcs);
            let b = render_pool(&pool, &shuffled);
            match (a, b) {
                (Ok(a), Ok(b)) => {
                    prop_assert_eq!(a.name(), b.name());
                    prop_assert_eq!(&a.spec, &b.spec);
                    prop_assert_eq!(&a.metadata, &b.metadata);
                }
                (a, b) => prop_assert_eq!(a, b),
            }
        }
    }

    /// The rendered name is `rendered-<pool>-<32 hex>`, the prefix of the spec's content hash.
    #[test]
    fn rendered_name_is_the_content_address(mcs in machine_configs()) {
        let pool = infra_pool();
        let r = render_pool(&pool, &mcs).unwrap();
        assert_rendered_name(r.name(), "infra");
        let hash = spec_hash(&r.spec);
        prop_assert_eq!(&r.name()["rendered-infra-".len()..], &hash[..32]);
        // Re-rendering the rendered config alone reproduces the name (it is a fixed point).
        let mut again = r.clone();
        again.metadata.name = "00-from-render".into();
        let r2 = render_pool(&pool, &[again]).unwrap();
        prop_assert_eq!(r2.name(), r.name());
    }

    /// Changing the content that wins a merge changes the rendered name (a new rollout), and
    /// the rendered config carries the new content.
    #[test]
    fn rendered_name_changes_when_content_changes(
        mcs in machine_configs(),
        pick in any::<prop::sample::Index>(),
        karg_target in any::<prop::sample::Index>(),
    ) {
        let pool = infra_pool();
        let base = render_pool(&pool, &mcs).unwrap();

        // (a) A file's source, in the config that wins for that path.
        let files = &base.spec.config.storage.files;
        if !files.is_empty() {
            let path = files[pick.index(files.len())].path.clone();
            let order: Vec<String> =
                configs_for_pool(&pool, &mcs).iter().map(|m| m.name().to_string()).collect();
            let winner = order
                .iter()
                .rev()
                .find(|n| {
                    let mc = mcs.iter().find(|m| m.name() == n.as_str()).unwrap();
                    mc.spec.config.storage.files.iter().any(|f| f.path == path)
                })
                .unwrap()
                .clone();
            let new_source = "data:,hearth-property-test-changed".to_string();
            let mut changed = mcs.clone();
            let mc = changed.iter_mut().find(|m| m.name() == winner).unwrap();
            let f = mc.spec.config.storage.files.iter_mut().find(|f| f.path == path).unwrap();
            prop_assert_ne!(f.contents.source.as_deref(), Some(new_source.as_str()));
            f.contents.source = Some(new_source.clone());
            let r = render_pool(&pool, &changed).unwrap();
            prop_assert_ne!(r.name(), base.name(), "changing {}'s {} must change the name", winner, path);
            let rf = r.spec.config.storage.files.iter().find(|f| f.path == path).unwrap();
            prop_assert_eq!(rf.contents.source.as_deref(), Some(new_source.as_str()));
        }

        // (b) A kernel argument added to any config.
        let mut changed = mcs.clone();
        let i = karg_target.index(changed.len());
        changed[i].spec.kernel_arguments.push("hearth.test=1".into());
        let r = render_pool(&pool, &changed).unwrap();
        prop_assert_ne!(r.name(), base.name());

        // (c) A new file in any config.
        let mut changed = mcs.clone();
        changed[i].spec.config.storage.files.push(File {
            path: "/etc/hearth-property-test-new".into(),
            contents: Resource { source: Some("data:,".into()), ..Default::default() },
            ..Default::default()
        });
        let r = render_pool(&pool, &changed).unwrap();
        prop_assert_ne!(r.name(), base.name());
    }

    /// The name depends on content only: changing a file that a later config replaces whole, or
    /// renaming configs without changing their merge order, keeps the name (no needless rollout).
    #[test]
    fn rendered_name_ignores_what_does_not_reach_the_node(
        mcs in machine_configs(),
        pick in any::<prop::sample::Index>(),
    ) {
        let pool = infra_pool();
        let base = render_pool(&pool, &mcs).unwrap();

        // Renaming every config with a common prefix keeps the merge order.
        let mut renamed = mcs.clone();
        for m in &mut renamed {
            m.metadata.name = format!("zz-{}", m.metadata.name);
        }
        let r = render_pool(&pool, &renamed).unwrap();
        prop_assert_eq!(r.name(), base.name());

        // A file's source in a config that a later config overrides for the same path.
        let order: Vec<&MachineConfig> = configs_for_pool(&pool, &mcs);
        let mut shadowed = Vec::new();
        for (i, mc) in order.iter().enumerate() {
            for f in &mc.spec.config.storage.files {
                let overridden = order[i + 1..]
                    .iter()
                    .any(|later| later.spec.config.storage.files.iter().any(|g| g.path == f.path));
                if overridden {
                    shadowed.push((mc.name().to_string(), f.path.clone()));
                }
            }
        }
        if !shadowed.is_empty() {
            let (name, path) = &shadowed[pick.index(shadowed.len())];
            let mut changed = mcs.clone();
            let mc = changed.iter_mut().find(|m| m.name() == name).unwrap();
            let f = mc.spec.config.storage.files.iter_mut().find(|f| &f.path == path).unwrap();
            f.contents.source = Some("data:,shadowed".into());
            let r = render_pool(&pool, &changed).unwrap();
            prop_assert_eq!(r.name(), base.name());
            prop_assert_eq!(&r.spec, &base.spec);
        }
    }

    /// Merge rules that hold for any input: the rendered config has one entry per file path and
    /// unit name, kernel arguments are the concatenation (duplicates kept) in merge order, and
    /// `fips` is set when any config sets it.
    #[test]
    fn merge_keeps_every_key_once(mcs in machine_configs()) {
        let pool = infra_pool();
        let order = configs_for_pool(&pool, &mcs);
        let spec = merge(&order).unwrap();
        let want_paths: BTreeSet<&str> = order
            .iter()
            .flat_map(|m| m.spec.config.storage.files.iter().map(|f| f.path.as_str()))
            .collect();
        let got_paths: Vec<&str> = spec.config.storage.files.iter().map(|f| f.path.as_str()).collect();
        prop_assert_eq!(got_paths.len(), want_paths.len());
        prop_assert_eq!(got_paths.iter().copied().collect::<BTreeSet<_>>(), want_paths);
        let want_units: BTreeSet<&str> = order
            .iter()
            .flat_map(|m| m.spec.config.systemd.units.iter().map(|u| u.name.as_str()))
            .collect();
        prop_assert_eq!(spec.config.systemd.units.len(), want_units.len());
        let want_kargs: Vec<&String> =
            order.iter().flat_map(|m| m.spec.kernel_arguments.iter()).collect();
        prop_assert_eq!(spec.kernel_arguments.iter().collect::<Vec<_>>(), want_kargs);
        prop_assert_eq!(spec.fips, order.iter().any(|m| m.spec.fips));
        // Every path's contents come from the last config that defines it.
        for f in &spec.config.storage.files {
            let last = order
                .iter()
                .rev()
                .find_map(|m| m.spec.config.storage.files.iter().find(|g| g.path == f.path))
                .unwrap();
            prop_assert_eq!(&f.contents, &last.contents);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ignition 2.2 -> 3.x -> 2.2.
// ---------------------------------------------------------------------------------------------

fn v2_resource() -> impl Strategy<Value = Resource> {
    (
        data_url(),
        prop::option::of(Just("gzip".to_string())),
        any::<bool>(),
    )
        .prop_map(|(source, compression, hashed)| Resource {
            verification: Verification {
                hash: hashed.then(|| format!("sha512-{}", hex::encode(Sha512::digest(&source)))),
            },
            source: Some(source),
            compression,
            http_headers: Vec::new(),
        })
}

fn v2_file() -> impl Strategy<Value = V2Node> {
    (
        select(&PATHS[..]),
        prop::option::of(v2_resource()),
        prop::option::of(any::<bool>()),
        prop::option::of(select(&MODES[..])),
        prop::option::of(any::<bool>()),
        prop::option::of(owner()),
        prop::option::of(owner()),
    )
        .prop_map(
            |(path, contents, append, mode, overwrite, user, group)| V2Node {
                filesystem: Some("root".into()),
                path: path.into(),
                append,
                contents,
                mode,
                overwrite,
                user,
                group,
                target: None,
                hard: None,
            },
        )
}

fn v2_directory() -> impl Strategy<Value = V2Node> {
    (
        select(&DIR_PATHS[..]),
        prop::option::of(select(&MODES[..])),
        prop::option::of(any::<bool>()),
        prop::option::of(owner()),
    )
        .prop_map(|(path, mode, overwrite, user)| V2Node {
            filesystem: Some("root".into()),
            path: path.into(),
            mode,
            overwrite,
            user,
            ..Default::default()
        })
}

fn v2_link() -> impl Strategy<Value = V2Node> {
    (
        select(&LINK_PATHS[..]),
        select(&PATHS[..]),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(path, target, hard, overwrite)| V2Node {
            filesystem: Some("root".into()),
            path: path.into(),
            target: Some(target.into()),
            hard,
            overwrite,
            ..Default::default()
        })
}

fn v2_unit() -> impl Strategy<Value = V2Unit> {
    (
        select(&UNITS[..]),
        prop::option::of(unit_text()),
        vec(dropin(), 0..3),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, contents, dropins, enable, enabled, mask)| V2Unit {
            name: name.into(),
            contents,
            dropins: dedup_by(dropins, |d| d.name.clone()),
            enable,
            enabled,
            mask,
        })
}

fn v2_user() -> impl Strategy<Value = V2User> {
    (
        select(&["core", "alice", "bob"][..]),
        vec(select(&SSH_KEYS[..]), 0..4),
        prop::option::of(select(&["/bin/bash", "/sbin/nologin"][..])),
        prop::option::of(1000i64..2000),
        vec(select(&["wheel", "sudo", "docker"][..]), 0..3),
        prop::option::of("[A-Za-z ]{0,12}"),
    )
        .prop_map(|(name, keys, shell, uid, groups, gecos)| V2User {
            name: name.into(),
            ssh_authorized_keys: keys.into_iter().map(String::from).collect(),
            shell: shell.map(String::from),
            uid,
            groups: groups.into_iter().map(String::from).collect(),
            gecos,
            ..Default::default()
        })
}

/// A 2.2 config without duplicate keys (duplicates are merged on the way in, by design, so they
/// cannot round-trip).
fn v2_config() -> impl Strategy<Value = V2Config> {
    (
        vec(v2_file(), 0..6),
        vec(v2_directory(), 0..3),
        vec(v2_link(), 0..3),
        vec(v2_unit(), 0..4),
        vec(v2_user(), 0..3),
        vec(
            (
                select(&["wheel", "hearth"][..]),
                prop::option::of(100i64..200),
            ),
            0..2,
        ),
        prop::option::of((prop::option::of(1i64..60), prop::option::of(1i64..600))),
    )
        .prop_map(|(files, dirs, links, units, users, groups, timeouts)| {
            let mut c = V2Config {
                ignition: V2Ignition {
                    version: Some("2.2.0".into()),
                    ..Default::default()
                },
                storage: V2Storage {
                    files: dedup_by(files, |f| f.path.clone()),
                    directories: dedup_by(dirs, |d| d.path.clone()),
                    links: dedup_by(links, |l| l.path.clone()),
                    ..Default::default()
                },
                systemd: V2Systemd {
                    units: dedup_by(units, |u| u.name.clone()),
                },
                passwd: V2Passwd {
                    users: dedup_by(users, |u| u.name.clone()),
                    groups: dedup_by(
                        groups
                            .into_iter()
                            .map(|(name, gid)| Group {
                                name: name.into(),
                                gid,
                                ..Default::default()
                            })
                            .collect(),
                        |g| g.name.clone(),
                    ),
                },
                ..Default::default()
            };
            if let Some((headers, total)) = timeouts {
                c.ignition.timeouts = Timeouts {
                    http_response_headers: headers,
                    http_total: total,
                };
            }
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// 2.x -> 3.x -> 2.x -> 3.x gives the same 3.x config: writing a config back in the MCO's
    /// old format (and reading it again) loses nothing.
    #[test]
    fn v2_to_v3_and_back_keeps_content(v2 in v2_config()) {
        let v3 = v2.clone().into_v3().unwrap();

        // The translation kept what was written.
        prop_assert_eq!(v3.storage.files.len(), v2.storage.files.len());
        for (f2, f3) in v2.storage.files.iter().zip(&v3.storage.files) {
            prop_assert_eq!(&f2.path, &f3.path);
            prop_assert_eq!(f2.mode, f3.mode);
            prop_assert_eq!(f3.overwrite, Some(f2.overwrite.unwrap_or(true)));
            let content = f2.contents.clone().unwrap_or_default();
            if f2.append == Some(true) {
                prop_assert_eq!(&f3.append, &vec![content]);
            } else {
                prop_assert_eq!(&f3.contents, &content);
            }
        }
        prop_assert_eq!(v3.storage.directories.len(), v2.storage.directories.len());
        prop_assert_eq!(v3.storage.links.len(), v2.storage.links.len());
        prop_assert_eq!(v3.systemd.units.len(), v2.systemd.units.len());
        for (u2, u3) in v2.systemd.units.iter().zip(&v3.systemd.units) {
            prop_assert_eq!(&u2.name, &u3.name);
            prop_assert_eq!(&u2.contents, &u3.contents);
            prop_assert_eq!(&u2.dropins, &u3.dropins);
            prop_assert_eq!(u2.mask, u3.mask);
        }
        prop_assert_eq!(v3.passwd.users.len(), v2.passwd.users.len());
        for (a, b) in v2.passwd.users.iter().zip(&v3.passwd.users) {
            // Each key once, first occurrence first (the MCO's dedupePasswdUserSSHKeys).
            let mut once = a.ssh_authorized_keys.clone();
            hearth_config::mco::dedup_ssh_keys(&mut once);
            prop_assert_eq!(&once, &b.ssh_authorized_keys);
        }

        for version in [SpecVersion::V2_2, SpecVersion::V2_3, SpecVersion::V2_4] {
            let json = v3.to_version(version).unwrap();
            prop_assert_eq!(json["ignition"]["version"].as_str(), Some(version.as_str()));
            let back: V2Config = serde_json::from_value(json).unwrap();
            let v3_again = back.into_v3().unwrap();
            prop_assert_eq!(&v3_again, &v3, "through {}", version);
        }
    }

    /// A config that needs no newer feature survives 3.5 -> 3.x -> 3.5 for every 3.x.
    #[test]
    fn v3_down_and_up_keeps_content(v2 in v2_config()) {
        let v3 = v2.into_v3().unwrap();
        for version in SpecVersion::ALL.into_iter().filter(|v| !v.is_v2()) {
            let json = v3.to_version(version).unwrap();
            prop_assert_eq!(json["ignition"]["version"].as_str(), Some(version.as_str()));
            let mut back: Config = serde_json::from_value(json).unwrap();
            back.ignition.version = v3.ignition.version.clone();
            prop_assert_eq!(&back, &v3, "through {}", version);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Manifest round trip.
// ---------------------------------------------------------------------------------------------

fn named_machine_config() -> impl Strategy<Value = MachineConfig> {
    (
        "[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?",
        machine_config(),
        prop::option::of(("[a-z]{1,8}", any::<String>())),
        prop::option::of(any::<String>()),
        // Kernel arguments: any printable text without an unbalanced quote (refused).
        vec("[\\PC&&\\S&&[^\"]]{1,12}", 0..3),
        prop::option::of(any::<String>()),
    )
        .prop_filter("a DNS-1123 name", |(name, ..)| {
            name.split('.')
                .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'))
        })
        .prop_map(
            |(name, (_, mut mc), annotation, os_image, kargs, unit_text)| {
                // Arbitrary text wherever the manifest allows any string, to exercise escaping.
                mc.metadata.name = name;
                if let Some((k, v)) = annotation {
                    mc.metadata
                        .annotations
                        .insert(format!("example.com/{k}"), v);
                }
                if let Some(os_image) = os_image {
                    mc.spec.os_image_url = os_image;
                }
                mc.spec.kernel_arguments.extend(kargs);
                if let (Some(text), Some(u)) = (unit_text, mc.spec.config.systemd.units.first_mut())
                {
                    u.contents = Some(text);
                }
                mc
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `to_manifest()` written as JSON reads back as the same MachineConfig, with no error.
    #[test]
    fn manifest_round_trip(mc in named_machine_config(), pretty in any::<bool>()) {
        let manifest = mc.to_manifest();
        let text = if pretty {
            serde_json::to_string_pretty(&manifest).unwrap()
        } else {
            serde_json::to_string(&manifest).unwrap()
        };
        let (m, diags) = read_str("round-trip.json", &text);
        let errors: Vec<String> =
            diags.iter().filter(|d| d.is_error()).map(ToString::to_string).collect();
        prop_assert!(errors.is_empty(), "errors reading back {}:\n{}", text, errors.join("\n"));
        prop_assert_eq!(m.machine_configs.len(), 1);
        let back = &m.machine_configs[0].item;
        prop_assert_eq!(&back.metadata, &mc.metadata);
        let mut want = mc.spec.config.clone();
        want.ignition.version = Some(SpecVersion::LATEST.as_str().to_string());
        prop_assert_eq!(&back.spec.config, &want);
        prop_assert_eq!(&back.spec.kernel_arguments, &mc.spec.kernel_arguments);
        prop_assert_eq!(back.spec.kernel_type, mc.spec.kernel_type);
        prop_assert_eq!(back.spec.fips, mc.spec.fips);
        prop_assert_eq!(&back.spec.os_image_url, &mc.spec.os_image_url);
        prop_assert_eq!(&back.spec.extensions, &mc.spec.extensions);
        prop_assert_eq!(back.spec.source_version, Some(SpecVersion::LATEST));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A rendered config, written out as `hearth render` writes it (`to_manifest`), is read back
    /// by `read_machine_config` (what the agent and `hearth plan` use) with the same spec.
    #[test]
    fn rendered_config_reads_back(mcs in machine_configs()) {
        let r = render_pool(&infra_pool(), &mcs).unwrap();
        let text = serde_json::to_string_pretty(&r.to_manifest()).unwrap();
        let (back, _warnings) = read_machine_config("rendered.json", &text).map_err(|diags| {
            TestCaseError::fail(format!(
                "the rendered config is refused:\n{}\n{text}",
                diags.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
            ))
        })?;
        prop_assert_eq!(back.name(), r.name());
        prop_assert_eq!(&back.spec.config, &r.spec.config);
        prop_assert_eq!(&back.spec.kernel_arguments, &r.spec.kernel_arguments);
        prop_assert_eq!(spec_hash(&back.spec), spec_hash(&r.spec));
    }
}

fn worker_config(name: &str) -> MachineConfig {
    let mut mc = MachineConfig::default();
    mc.metadata.name = name.into();
    mc.metadata
        .labels
        .insert(ROLE_LABEL.into(), "worker".into());
    mc
}

/// Renders `configs` for the worker pool and, if rendering succeeds, writes the result as
/// `hearth render` does and reads it back as the agent and `hearth plan` do
/// (`read_machine_config`): rendering must either refuse the inputs or produce a config that
/// hearth itself accepts.
fn assert_render_refuses_or_reads_back(configs: &[MachineConfig]) {
    let Ok(r) = render_pool(&MachineConfigPool::builtin("worker"), configs) else {
        return;
    };
    let text = serde_json::to_string_pretty(&r.to_manifest()).unwrap();
    if let Err(diags) = read_machine_config("rendered.json", &text) {
        let problems: Vec<String> = diags.iter().map(ToString::to_string).collect();
        panic!(
            "render_pool accepted the inputs but hearth refuses its output:\n{}",
            problems.join("\n")
        );
    }
}

fn data_file(path: &str, owner: NodeOwner) -> File {
    File {
        path: path.into(),
        user: owner,
        contents: Resource {
            source: Some("data:,x".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

// Regression (found by `rendered_config_reads_back`, fixed): one config gives /etc/x's owner by id, a later
// one by name. The field-by-field merge keeps both (`user: {id: 0, name: "root"}`), validation
// refuses that ("files[0].user: set either id or name, not both"), so the agent and
// `hearth plan` refuse the config `hearth render` produced. The same holds for `group`, and for
// directories and links.
// Expected: the later owner replaces the earlier one whole (as `contents` does), or rendering
// refuses the inputs with a clear error.
#[test]
fn rendered_file_owner_id_then_name_is_refused() {
    let mut a = worker_config("00-a");
    let by_id = NodeOwner {
        id: Some(0),
        name: None,
    };
    a.spec.config.storage.files.push(data_file("/etc/x", by_id));
    let mut b = worker_config("10-b");
    let by_name = NodeOwner {
        id: None,
        name: Some("root".into()),
    };
    b.spec
        .config
        .storage
        .files
        .push(data_file("/etc/x", by_name));
    assert_render_refuses_or_reads_back(&[a, b]);
}

// Regression (found by `rendered_config_reads_back`, fixed): one config enables a.service, a later one masks
// it. The merge gives `{enabled: true, mask: true}`, which validation refuses
// ("units[0].enabled: a masked unit cannot be enabled"), so the rendered config cannot be read
// back by the agent.
// Expected: the later `mask: true` wins and the unit is not also enabled, or rendering refuses
// the inputs with a clear error.
#[test]
fn rendered_unit_enabled_then_masked_is_refused() {
    let mut a = worker_config("00-a");
    a.spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        enabled: Some(true),
        ..Default::default()
    });
    let mut b = worker_config("10-b");
    b.spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        mask: Some(true),
        ..Default::default()
    });
    assert_render_refuses_or_reads_back(&[a, b]);
}

// Regression (found while checking the one above, fixed): one config writes a file at /etc/x, another a
// directory at the same path. Rendering succeeds, but the rendered config is refused
// ("directories[0].path: \"/etc/x\" is already defined at spec.config.storage.files[0].path").
// Expected: rendering refuses the inputs, naming both configs, instead of producing a config
// no node will take.
#[test]
fn rendered_path_as_file_and_directory_is_refused() {
    let mut a = worker_config("00-a");
    a.spec
        .config
        .storage
        .files
        .push(data_file("/etc/x", NodeOwner::default()));
    let mut b = worker_config("10-b");
    b.spec.config.storage.directories.push(Directory {
        path: "/etc/x".into(),
        ..Default::default()
    });
    assert_render_refuses_or_reads_back(&[a, b]);
}

// ---------------------------------------------------------------------------------------------
// read_str never panics.
// ---------------------------------------------------------------------------------------------

/// A typical manifest (YAML, several documents), the starting point of the mutations.
const VALID: &str = r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  labels:
    machineconfiguration.openshift.io/role: worker
  name: 99-worker-chrony
spec:
  config:
    ignition:
      version: 3.2.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys:
        - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1 alice@example
    storage:
      files:
      - contents:
          source: data:,server%20clock.example%20iburst%0A
        mode: 0644
        overwrite: true
        path: /etc/chrony.conf
      - contents:
          compression: ""
          source: data:text/plain;charset=utf-8;base64,aGVsbG8K
        mode: 420
        path: /etc/hello
        user: {name: root}
    systemd:
      units:
      - name: chronyd.service
        enabled: true
        dropins:
        - name: 10-hearth.conf
          contents: |
            [Service]
            Restart=always
  kernelArguments:
  - nosmt
  - "a=1 a=2"
  kernelType: realtime
  extensions: [usbguard]
  osImageURL: ""
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-old
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 2.2.0}
    storage:
      files:
      - filesystem: root
        path: /etc/old
        contents: {source: "data:,old"}
        mode: 0600
    systemd:
      units:
      - {name: old.service, enable: true, contents: "[Unit]\n"}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: infra
spec:
  machineConfigSelector:
    matchExpressions:
    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/infra: ""
  maxUnavailable: 25%
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, labels: {node-role.kubernetes.io/infra: ""}}
"#;

/// Everything a caller does with what `read_str` returns: merge, render and write every version.
fn read_and_use(text: &str) {
    let (m, _diags) = read_str("fuzz.yaml", text);
    let configs: Vec<MachineConfig> = m.machine_configs.into_iter().map(|s| s.item).collect();
    for mc in &configs {
        if let Ok(spec) = merge(&[mc]) {
            for v in SpecVersion::ALL {
                let _ = spec.config.to_version(v);
            }
        }
    }
    let _ = render_pool(&infra_pool(), &configs);
}

#[test]
fn the_mutation_seed_is_valid() {
    let (m, diags) = read_str("valid.yaml", VALID);
    assert!(!diags.iter().any(|d| d.is_error()), "{diags:?}");
    assert_eq!(m.machine_configs.len(), 2);
    assert_eq!(m.pools.len(), 1);
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(
        m.machine_configs[0].item.spec.kernel_arguments,
        ["nosmt", "a=1 a=2"],
        "entries are kept as written"
    );
    assert_eq!(
        m.machine_configs[0].item.spec.config.storage.files[0].mode,
        Some(0o644)
    );
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(prop::sample::Index),
    FlipByte(prop::sample::Index, u8),
    Indent(prop::sample::Index, i8),
    DeleteLine(prop::sample::Index),
    DuplicateLine(prop::sample::Index),
    Insert(prop::sample::Index, &'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let index = any::<prop::sample::Index>;
    prop_oneof![
        index().prop_map(Mutation::Truncate),
        (index(), 1u8..=255).prop_map(|(i, m)| Mutation::FlipByte(i, m)),
        (index(), -4i8..=4).prop_map(|(i, d)| Mutation::Indent(i, d)),
        index().prop_map(Mutation::DeleteLine),
        index().prop_map(Mutation::DuplicateLine),
        (
            index(),
            select(
                &[
                    ": ",
                    "- ",
                    "{",
                    "}",
                    "[",
                    "]",
                    "\"",
                    "'",
                    "&a ",
                    "*a",
                    "<<: *a\n",
                    "!!binary ",
                    "!tag ",
                    "---\n",
                    "...\n",
                    "\t",
                    "#",
                    "|",
                    ">-\n",
                    "? ",
                    "%YAML 1.2\n",
                    "\0",
                    "null",
                    "~",
                    "0x",
                    "0o7777777777777777777777",
                    "-9223372036854775809",
                    "\u{feff}",
                    "é",
                    "${{X}}",
                ][..],
            ),
        )
            .prop_map(|(i, s)| Mutation::Insert(i, s)),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for m in mutations {
        let mut lines: Vec<Vec<u8>> = bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        match m {
            Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len() + 1)),
            Mutation::FlipByte(i, mask) if !bytes.is_empty() => {
                let at = i.index(bytes.len());
                bytes[at] ^= mask;
            }
            Mutation::Insert(i, s) => {
                let at = i.index(bytes.len() + 1);
                bytes.splice(at..at, s.bytes());
            }
            Mutation::Indent(i, delta) => {
                let at = i.index(lines.len());
                let line = &mut lines[at];
                if *delta >= 0 {
                    line.splice(0..0, std::iter::repeat_n(b' ', *delta as usize));
                } else {
                    let lead = line.iter().take_while(|b| **b == b' ').count();
                    line.drain(..lead.min(delta.unsigned_abs() as usize));
                }
                bytes = lines.join(&b'\n');
            }
            Mutation::DeleteLine(i) => {
                lines.remove(i.index(lines.len()));
                bytes = lines.join(&b'\n');
            }
            Mutation::DuplicateLine(i) => {
                let at = i.index(lines.len());
                let copy = lines[at].clone();
                lines.insert(at, copy);
                bytes = lines.join(&b'\n');
            }
            Mutation::FlipByte(..) => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn read_str_never_panics_on_arbitrary_text(text in any::<String>()) {
        read_and_use(&text);
    }

    #[test]
    fn read_str_never_panics_on_yaml_like_text(
        text in "([ a-z0-9:{}\\[\\],\"'&*!|>#%@`~.-]|\n|\t|  ){0,200}"
    ) {
        read_and_use(&text);
    }

    #[test]
    fn read_str_never_panics_on_mutated_manifests(mutations in vec(mutation(), 1..6)) {
        read_and_use(&apply(VALID, &mutations));
    }

    /// A truncated manifest is either read or refused with a diagnostic; never silently empty
    /// when the text still holds a complete object's header.
    #[test]
    fn truncation_never_panics_and_reports(at in 0..VALID.len()) {
        let text = &VALID[..at];
        let (m, diags) = read_str("cut.yaml", text);
        let objects = m.machine_configs.len() + m.pools.len() + m.nodes.len();
        if text.contains("kind: MachineConfig\n") {
            prop_assert!(objects > 0 || !diags.is_empty(), "nothing read and nothing said for {:?}", text);
        }
    }
}
