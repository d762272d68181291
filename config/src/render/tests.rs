//! Pool choice, inheritance, the merge rules, overlays, masks and kinds, duplicate names.

use super::*;
use crate::ignition::{Dropin, File, Resource, Unit, User};
use crate::model::{
    KernelType, MachineConfig, MachineConfigPool, NodeInfo, ObjectMeta, ROLE_LABEL,
};
use crate::model::{LabelSelector, SelectorOperator, SelectorRequirement, NODE_LABEL};

fn mc(name: &str, role: &str) -> MachineConfig {
    let mut m = MachineConfig::default();
    m.metadata.name = name.into();
    m.metadata.labels.insert(ROLE_LABEL.into(), role.into());
    m
}

fn file(path: &str, src: &str) -> File {
    File {
        path: path.into(),
        contents: Resource {
            source: Some(src.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    let mut n = NodeInfo::default();
    n.metadata.name = name.into();
    for (k, v) in labels {
        n.metadata.labels.insert((*k).into(), (*v).into());
    }
    n
}

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

#[test]
fn pool_choice_follows_the_mco() {
    let pools = with_builtin_pools(&[infra_pool()]);
    let w = node("w", &[("node-role.kubernetes.io/worker", "")]);
    assert_eq!(pool_for_node(&pools, &w).unwrap().name(), "worker");
    let i = node(
        "i",
        &[
            ("node-role.kubernetes.io/worker", ""),
            ("node-role.kubernetes.io/infra", ""),
        ],
    );
    assert_eq!(pool_for_node(&pools, &i).unwrap().name(), "infra");
    let m = node(
        "m",
        &[
            ("node-role.kubernetes.io/master", ""),
            ("node-role.kubernetes.io/infra", ""),
        ],
    );
    assert_eq!(pool_for_node(&pools, &m).unwrap().name(), "master");
    let none = node("n", &[]);
    assert!(matches!(
        pool_for_node(&pools, &none),
        Err(RenderError::NoPool { .. })
    ));
    let mut other = infra_pool();
    other.metadata.name = "gpu".into();
    let pools = with_builtin_pools(&[infra_pool(), other]);
    assert!(matches!(
        pool_for_node(&pools, &i),
        Err(RenderError::TwoCustomPools { .. })
    ));
}

#[test]
fn custom_pool_inherits_and_overrides_worker() {
    let mut a = mc("50-infra", "infra");
    a.spec
        .config
        .storage
        .files
        .push(file("/etc/x", "data:,infra"));
    let mut b = mc("99-worker", "worker");
    b.spec
        .config
        .storage
        .files
        .push(file("/etc/x", "data:,worker"));
    b.spec
        .config
        .storage
        .files
        .push(file("/etc/y", "data:,worker"));
    let r = render_pool(&infra_pool(), &[a, b]).unwrap();
    let files = &r.spec.config.storage.files;
    assert_eq!(files.len(), 2);
    let x = files.iter().find(|f| f.path == "/etc/x").unwrap();
    assert_eq!(x.contents.source.as_deref(), Some("data:,infra"));
    assert!(r.name().starts_with("rendered-infra-"));
    assert_eq!(r.name().len(), "rendered-infra-".len() + 32);
}

#[test]
fn field_by_field_merge_but_contents_atomic() {
    let mut a = mc("00-a", "worker");
    let mut f = file("/etc/x", "data:;base64,H4sI");
    f.contents.compression = Some("gzip".into());
    f.mode = Some(0o600);
    a.spec.config.storage.files.push(f);
    a.spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        enabled: Some(true),
        dropins: vec![Dropin {
            name: "1.conf".into(),
            contents: Some("x".into()),
        }],
        ..Default::default()
    });
    a.spec.config.passwd.users.push(User {
        name: "core".into(),
        ssh_authorized_keys: vec!["k1".into()],
        ..Default::default()
    });
    let mut b = mc("10-b", "worker");
    b.spec
        .config
        .storage
        .files
        .push(file("/etc/x", "data:,plain"));
    b.spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        dropins: vec![Dropin {
            name: "2.conf".into(),
            contents: Some("y".into()),
        }],
        ..Default::default()
    });
    b.spec.config.passwd.users.push(User {
        name: "core".into(),
        ssh_authorized_keys: vec!["k2".into(), "k1".into()],
        ..Default::default()
    });
    let spec = merge(&[&a, &b]).unwrap();
    let f = &spec.config.storage.files[0];
    assert_eq!(f.mode, Some(0o600), "mode kept from the earlier config");
    assert_eq!(f.contents.source.as_deref(), Some("data:,plain"));
    assert_eq!(f.contents.compression, None, "contents replaced whole");
    let u = &spec.config.systemd.units[0];
    assert_eq!(u.enabled, Some(true));
    assert_eq!(u.dropins.len(), 2);
    assert_eq!(
        spec.config.passwd.users[0].ssh_authorized_keys,
        ["k1", "k2"]
    );
}

#[test]
fn spec_level_merge_rules() {
    let mut a = mc("00-a", "worker");
    a.spec.kernel_arguments = vec!["y=0".into(), "z=4".into()];
    a.spec.kernel_type = KernelType::Realtime;
    a.spec.os_image_url = "a".into();
    a.spec.extensions = vec!["usbguard".into()];
    let mut b = mc("10-b", "worker");
    b.spec.kernel_arguments = vec!["y=1".into(), "z=4".into()];
    b.spec.fips = true;
    b.spec.extensions = vec!["usbguard".into(), "kerberos".into()];
    let spec = merge(&[&a, &b]).unwrap();
    assert_eq!(spec.kernel_arguments, ["y=0", "z=4", "y=1", "z=4"]);
    assert_eq!(spec.kernel_type, KernelType::Realtime);
    assert_eq!(spec.os_image_url, "a");
    assert!(spec.fips);
    assert_eq!(spec.extensions, ["usbguard", "kerberos"]);
}

#[test]
fn node_overlays_apply_to_their_node_only() {
    let pools = with_builtin_pools(&[]);
    let base = mc("00-worker", "worker");
    let mut ov = mc("50-static-ip-w1", "worker");
    ov.metadata.labels.insert(NODE_LABEL.into(), "w1".into());
    ov.spec
        .config
        .storage
        .files
        .push(file("/etc/ip", "data:,10.0.0.1"));
    let configs = vec![base, ov];
    let nodes = vec![
        node("w1", &[("node-role.kubernetes.io/worker", "")]),
        node("w2", &[("node-role.kubernetes.io/worker", "")]),
    ];
    let r1 = render_node(&pools, &configs, &nodes, "w1").unwrap();
    let r2 = render_node(&pools, &configs, &nodes, "w2").unwrap();
    assert_eq!(r1.config.spec.config.storage.files.len(), 1);
    assert!(r1.config.name().starts_with("rendered-worker-w1-"));
    assert!(r2.config.spec.config.storage.files.is_empty());
    let pool = render_pool(&pools[1], &configs).unwrap();
    assert_eq!(pool.name(), r2.config.name(), "w2 gets the pool's render");
}

#[test]
fn owners_and_masks_take_the_later_choice_and_kinds_cannot_collide() {
    use crate::ignition::{Directory, NodeOwner};
    let mut a = mc("00-a", "worker");
    let mut f = file("/etc/x", "data:,a");
    f.user = NodeOwner {
        id: Some(0),
        name: None,
    };
    a.spec.config.storage.files.push(f);
    a.spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        enabled: Some(true),
        ..Default::default()
    });
    a.spec.config.systemd.units.push(Unit {
        name: "b.service".into(),
        mask: Some(true),
        ..Default::default()
    });
    let mut b = mc("10-b", "worker");
    let mut f = file("/etc/x", "data:,b");
    f.user = NodeOwner {
        id: None,
        name: Some("root".into()),
    };
    b.spec.config.storage.files.push(f);
    b.spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        mask: Some(true),
        ..Default::default()
    });
    b.spec.config.systemd.units.push(Unit {
        name: "b.service".into(),
        enabled: Some(true),
        ..Default::default()
    });
    let spec = merge(&[&a, &b]).unwrap();
    let f = &spec.config.storage.files[0];
    assert_eq!(
        f.user,
        NodeOwner {
            id: None,
            name: Some("root".into())
        }
    );
    let ua = spec
        .config
        .systemd
        .units
        .iter()
        .find(|u| u.name == "a.service")
        .unwrap();
    assert_eq!((ua.mask, ua.enabled), (Some(true), None));
    let ub = spec
        .config
        .systemd
        .units
        .iter()
        .find(|u| u.name == "b.service")
        .unwrap();
    assert_eq!((ub.mask, ub.enabled), (None, Some(true)));

    let mut c = mc("20-c", "worker");
    c.spec.config.storage.directories.push(Directory {
        path: "/etc/x".into(),
        ..Default::default()
    });
    let err = merge(&[&a, &c]).unwrap_err();
    assert!(matches!(err, RenderError::PathConflict { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("\"00-a\"") && msg.contains("\"20-c\"") && msg.contains("directory"),
        "{msg}"
    );
}

#[test]
fn duplicate_names_are_refused() {
    let configs = vec![mc("a", "worker"), mc("a", "worker")];
    assert_eq!(
        render_pool(&MachineConfigPool::builtin("worker"), &configs),
        Err(RenderError::DuplicateName("a".into()))
    );
}
