//! Step 4 of a reconcile: garbage collection of rendered configs nothing refers to, beyond the
//! newest `retention` of each pool (and of each node with overlays).

use super::settings::Settings;
use crate::fleet::Fleet;
use crate::store::records::EventRecord;
use std::collections::{BTreeMap, HashSet};

pub fn referenced(fleet: &Fleet) -> HashSet<String> {
    let mut out = HashSet::new();
    for p in fleet.pools.values() {
        out.extend(p.value.status.target.iter().cloned());
        out.extend(p.value.status.configuration.iter().cloned());
    }
    for n in fleet.nodes.values() {
        let n = &n.value;
        out.extend(n.target.iter().cloned());
        out.extend(n.desired.iter().cloned());
        out.extend(n.pin.iter().map(|p| p.config.clone()));
        if let Some(r) = &n.report {
            out.extend(r.current.iter().cloned());
            out.extend(r.desired.iter().cloned());
        }
    }
    out
}

pub(super) fn collect_garbage(
    fleet: &mut Fleet,
    settings: &Settings,
    now: u64,
    events: &mut Vec<EventRecord>,
) {
    let keep = referenced(fleet);
    // Series: (pool, node); newest first (not yet stored counts as newest).
    type Series = BTreeMap<(String, Option<String>), Vec<(u64, String)>>;
    let mut series: Series = BTreeMap::new();
    for r in fleet.rendered.values() {
        let order = if r.create_revision == 0 {
            u64::MAX
        } else {
            r.create_revision
        };
        series
            .entry((r.value.pool.clone(), r.value.node.clone()))
            .or_default()
            .push((order, r.value.name.clone()));
    }
    let mut removed = Vec::new();
    for ((pool, node), mut list) in series {
        list.sort_by(|a, b| b.cmp(a));
        // A node that is gone keeps nothing beyond what is referenced.
        let retention = match &node {
            Some(n) if !fleet.nodes.contains_key(n) => 0,
            _ if !fleet.pools.contains_key(&pool) => 0,
            _ => settings.retention,
        };
        for (i, (_, name)) in list.into_iter().enumerate() {
            if i >= retention && !keep.contains(&name) {
                removed.push(name);
            }
        }
    }
    if removed.is_empty() {
        return;
    }
    removed.sort();
    for name in &removed {
        fleet.rendered.remove(name);
    }
    events.push(EventRecord::normal(
        now,
        "RenderedConfigs".into(),
        "Pruned",
        format!(
            "removed {} rendered config(s) no longer in use: {}",
            removed.len(),
            removed.join(", ")
        ),
    ));
}
