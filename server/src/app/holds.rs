//! An admin's holds on a node, each one atomic commit and an event naming the admin: pin it on
//! a rendered config (`hearth node pin`), unpin it, take it out of rollouts (`hearth node
//! exclude`, hardware under repair), and put it back (`include`).

use super::state::{meta_object, App};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::update;
use crate::store::records::{EventRecord, Hold, Pin};
use hearth_api::admin::HoldAnswer;

/// What a hold operation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldChange {
    /// Hold the node on this rendered config.
    Pin(String),
    /// Drop the pin: the node follows its pool again.
    Unpin,
    /// Take the node out of rollouts.
    Exclude,
    /// Put it back.
    Include,
}

impl App {
    /// Applies `change` to node `name` on behalf of `by` (the admin, as events name them).
    /// A pin must name a rendered config of the node's pool (or of its own overlays).
    pub async fn hold_node(
        &self,
        name: &str,
        change: HoldChange,
        by: &str,
    ) -> Result<HoldAnswer, ApiError> {
        let _turn = self.admin_turn().await;
        // A pin changes the node's target: a full reconcile; the others only the rollout.
        let scope = match change {
            HoldChange::Pin(_) | HoldChange::Unpin => Scope::Full,
            HoldChange::Exclude | HoldChange::Include => Scope::Rollout,
        };
        self.mutate(scope, false, |fleet, t| {
            let Some(node) = fleet.nodes.get(name).map(|n| n.value.clone()) else {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            };
            let hold = Hold {
                by: by.to_string(),
                at: t,
            };
            let object = meta_object("Node", name);
            let (action, event) = match &change {
                HoldChange::Pin(config) => {
                    let Some(rendered) = fleet.rendered.get(config) else {
                        return Err(ApiError::not_found(format!(
                            "rendered config {config:?} not found (pin of node {name}); \
                             `hearth get mc` lists the rendered configs"
                        )));
                    };
                    let pool = node.pool.as_deref().unwrap_or("");
                    let own = rendered.value.node.as_deref();
                    if rendered.value.pool != pool || own.is_some_and(|n| n != name) {
                        return Err(ApiError::conflict(format!(
                            "rendered config {config} is {}, node {name} is in pool {}: pin it \
                             to one of its own pool's rendered configs",
                            match own {
                                Some(n) => format!("node {n}'s own render"),
                                None => format!("pool {}'s", rendered.value.pool),
                            },
                            if pool.is_empty() { "none" } else { pool },
                        )));
                    }
                    if node.pin.as_ref().is_some_and(|p| &p.config == config) {
                        ("unchanged", None)
                    } else {
                        update(&mut fleet.nodes, name, |n| {
                            n.pin = Some(Pin {
                                config: config.clone(),
                                hold: hold.clone(),
                            })
                        });
                        let event = EventRecord::normal(
                            t,
                            object,
                            "Pinned",
                            format!("pinned to {config} by {by}: it stays there, whatever its pool renders, until unpinned"),
                        );
                        ("pinned", Some(event))
                    }
                }
                HoldChange::Unpin => match &node.pin {
                    None => ("unchanged", None),
                    Some(p) => {
                        update(&mut fleet.nodes, name, |n| n.pin = None);
                        let event = EventRecord::normal(
                            t,
                            object,
                            "Unpinned",
                            format!("unpinned from {} by {by}: it follows its pool again", p.config),
                        );
                        ("unpinned", Some(event))
                    }
                },
                HoldChange::Exclude => {
                    if node.excluded.is_some() {
                        ("unchanged", None)
                    } else {
                        update(&mut fleet.nodes, name, |n| n.excluded = Some(hold.clone()));
                        let event = EventRecord::warning(
                            t,
                            object,
                            "Excluded",
                            format!("excluded from rollouts by {by}: it gets no new desired config and counts for nothing in its pool's rollout until included"),
                        );
                        ("excluded", Some(event))
                    }
                }
                HoldChange::Include => {
                    if node.excluded.is_none() {
                        ("unchanged", None)
                    } else {
                        update(&mut fleet.nodes, name, |n| n.excluded = None);
                        let event = EventRecord::normal(
                            t,
                            object,
                            "Included",
                            format!("included in rollouts again by {by}"),
                        );
                        ("included", Some(event))
                    }
                }
            };
            fleet.record_events(event.into_iter().collect());
            let now = &fleet.nodes[name].value;
            Ok(HoldAnswer {
                kind: "Node".into(),
                name: name.to_string(),
                action: action.into(),
                pinned: now.pin.as_ref().map(|p| p.config.clone()),
                excluded: now.excluded.is_some(),
            })
        })
        .await
    }
}
