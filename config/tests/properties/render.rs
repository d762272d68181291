//! Rendering: deterministic, independent of input order, named by its content (and only by
//! what reaches the node), every key merged once.

use super::generators::{infra_pool, machine_configs};
use hearth_config::ignition::{File, Resource};
use hearth_config::model::{MachineConfig, MachineConfigPool};
use hearth_config::render::{configs_for_pool, merge, render_pool, spec_hash};
use proptest::prelude::*;
use std::collections::BTreeSet;

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
