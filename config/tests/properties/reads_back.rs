//! A rendered config reads back as the agent reads it (`read_machine_config`), and the bugs that
//! property found, kept as regression tests named after the bug (`rendered_*_is_refused`).

use super::generators::{infra_pool, machine_configs};
use hearth_config::ignition::{Directory, File, NodeOwner, Resource, Unit};
use hearth_config::manifest::read_machine_config;
use hearth_config::model::{MachineConfig, MachineConfigPool, ROLE_LABEL};
use hearth_config::render::{render_pool, spec_hash};
use proptest::prelude::*;

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
