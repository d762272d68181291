//! Step 1 of a reconcile: rendering every pool (and every node with overlays) into content-addressed
//! rendered configs, each node's pool and target, and a failed render keeping the last good target.

use crate::controller::memo::{Inputs, RenderMemo};
use crate::fleet::{put, update, Fleet};
use crate::store::records::{EventRecord, RenderedRecord};
use hearth_config::model::{MachineConfig, MachineConfigPool};
use hearth_config::render::{self, RenderError};
use std::collections::BTreeMap;

pub(super) fn render_all(
    fleet: &mut Fleet,
    now: u64,
    events: &mut Vec<EventRecord>,
    memo: &mut RenderMemo,
) {
    let inputs = Inputs::of(fleet);
    let configs: Vec<MachineConfig> = fleet.mcs.values().map(|r| r.value.to_model()).collect();
    let pools: Vec<MachineConfigPool> = render::with_builtin_pools(
        &fleet
            .pools
            .values()
            .map(|p| p.value.to_model())
            .collect::<Vec<_>>(),
    );

    // Membership first: a pool with no nodes and no configs is not a problem.
    let mut membership: BTreeMap<String, Result<String, RenderError>> = BTreeMap::new();
    let mut members: BTreeMap<String, usize> = BTreeMap::new();
    for n in fleet.nodes.values() {
        let r = render::pool_for_node(&pools, &n.value.to_model()).map(|p| p.name().to_string());
        if let Ok(p) = &r {
            *members.entry(p.clone()).or_default() += 1;
        }
        membership.insert(n.value.name.clone(), r);
    }

    let pool_names: Vec<String> = fleet.pools.keys().cloned().collect();
    for name in pool_names {
        let Some(model) = pools.iter().find(|p| p.name() == name) else {
            continue;
        };
        let old = fleet.pools[&name].value.status.clone();
        let mut status = old.clone();
        status.selects_no_node = members.get(&name).copied().unwrap_or(0) == 0;
        if status.selects_no_node && !old.selects_no_node && !fleet.pools[&name].value.builtin {
            events.push(EventRecord::normal(
                now,
                format!("MachineConfigPool/{name}"),
                "SelectsNoNode",
                format!(
                    "{}: its nodeSelector matches none of the fleet's nodes (it updates \
                     nothing; Updated stays True, as the MCO's pools do)",
                    hearth_api::views::SELECTS_NO_NODE
                ),
            ));
        }
        let Some(rendered) = memo.pool(&inputs, &fleet.pools[&name].value, model, &configs) else {
            return;
        };
        match rendered {
            Ok(mc) => {
                let rec = RenderedRecord::from_model(&mc, &name, None, now);
                status.source = rec.rendered_from.clone();
                status.target = Some(rec.name.clone());
                status.render_error = None;
                // An admin's rollback holds the pool on the earlier render while its configs
                // still render to the one rolled back from; a change to them ends it.
                match &old.rollback {
                    Some(rb) if rb.from == rec.name => {
                        if let Some(to) = fleet.rendered.get(&rb.to) {
                            status.source = to.value.rendered_from.clone();
                            status.target = Some(rb.to.clone());
                        }
                    }
                    Some(rb) => {
                        events.push(EventRecord::normal(
                            now,
                            format!("MachineConfigPool/{name}"),
                            "RollbackEnded",
                            format!(
                                "the pool's configs render to {} now: the rollback to {} ({}) ends",
                                rec.name, rb.to, rb.hold.by
                            ),
                        ));
                        status.rollback = None;
                    }
                    None => {}
                }
                if !fleet.rendered.contains_key(&rec.name) {
                    put(&mut fleet.rendered, &rec.name.clone(), rec);
                }
            }
            Err(RenderError::NoConfigs(_)) if members.get(&name).copied().unwrap_or(0) == 0 => {
                status.render_error = None;
            }
            Err(e) => status.render_error = Some(e.to_string()),
        }
        if status.target != old.target {
            if let Some(t) = &status.target {
                events.push(EventRecord::normal(
                    now,
                    format!("MachineConfigPool/{name}"),
                    "Rendered",
                    format!(
                        "target config is now {t} (from {})",
                        status.source.join(", ")
                    ),
                ));
            }
        }
        if status.render_error != old.render_error {
            if let Some(e) = &status.render_error {
                events.push(EventRecord::warning(
                    now,
                    format!("MachineConfigPool/{name}"),
                    "RenderFailed",
                    format!("{e}; the pool keeps its last good target"),
                ));
            }
        }
        if status != old {
            update(&mut fleet.pools, &name, |p| p.status = status);
        }
    }

    let node_names: Vec<String> = fleet.nodes.keys().cloned().collect();
    for name in node_names {
        let node = fleet.nodes[&name].value.clone();
        let (pool, target, error) = match membership.remove(&name) {
            Some(Ok(p)) => {
                let overlays = render::overlays_for_node(&name, &configs);
                if overlays.is_empty() {
                    let t = fleet
                        .pools
                        .get(&p)
                        .and_then(|r| r.value.status.target.clone());
                    (Some(p), t, None)
                } else {
                    let Some(rendered) = memo.node(&inputs, &pools, &configs, &node.to_model())
                    else {
                        return;
                    };
                    match rendered {
                        Ok(r) => {
                            let rec = RenderedRecord::from_model(&r, &p, Some(&name), now);
                            let t = rec.name.clone();
                            if !fleet.rendered.contains_key(&t) {
                                put(&mut fleet.rendered, &t, rec);
                            }
                            (Some(p), Some(t), None)
                        }
                        Err(e) => (
                            Some(p),
                            node.target.clone(),
                            Some(format!(
                                "rendering the node's overlays failed: {e}; it keeps its last good target"
                            )),
                        ),
                    }
                }
            }
            Some(Err(e)) => (None, None, Some(e.to_string())),
            None => (node.pool.clone(), node.target.clone(), node.error.clone()),
        };
        // An admin's pin holds the node on its config, whatever its pool renders (the pinned
        // config is kept by garbage collection while pinned: `referenced`).
        let target = match &node.pin {
            Some(pin) if fleet.rendered.contains_key(&pin.config) => Some(pin.config.clone()),
            _ => target,
        };
        if error != node.error {
            if let Some(e) = &error {
                events.push(EventRecord::warning(
                    now,
                    format!("Node/{name}"),
                    "NoConfig",
                    e.clone(),
                ));
            }
        }
        if pool != node.pool || target != node.target || error != node.error {
            update(&mut fleet.nodes, &name, |n| {
                n.pool = pool;
                n.target = target;
                n.error = error;
            });
        }
    }
}
