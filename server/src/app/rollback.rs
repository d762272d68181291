//! `hearth rollback mcp POOL`: an admin moves a pool back to its previous rendered config,
//! rolled out like any change (under `maxUnavailable`, pause and maintenance windows), until the
//! pool's configs render to something new.

use super::state::{meta_object, App};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::update;
use crate::store::records::{EventRecord, Hold, PoolRollback};
use hearth_api::admin::RollbackAnswer;

impl App {
    /// Rolls pool `name` back to the rendered config before its current target (by when the
    /// server first stored them) on behalf of `by`. Again while rolled back: one further back.
    pub async fn rollback_pool(&self, name: &str, by: &str) -> Result<RollbackAnswer, ApiError> {
        let _turn = self.admin_turn().await;
        self.mutate(Scope::Full, false, |fleet, t| {
            let Some(pool) = fleet.pools.get(name).map(|p| p.value.clone()) else {
                return Err(ApiError::not_found(format!("pool {name:?} not found")));
            };
            let Some(current) = pool.status.target.clone() else {
                return Err(ApiError::conflict(format!(
                    "pool {name} has no rendered config to roll back from"
                )));
            };
            // The pool's own renders (not its nodes' overlays), oldest first.
            let mut series: Vec<(u64, &str)> = fleet
                .rendered
                .values()
                .filter(|r| r.value.pool == name && r.value.node.is_none())
                .map(|r| (r.create_revision, r.value.name.as_str()))
                .collect();
            series.sort();
            let Some(i) = series.iter().position(|(_, n)| *n == current) else {
                return Err(ApiError::conflict(format!(
                    "pool {name}'s target {current} is not among its stored rendered configs"
                )));
            };
            let Some(&(_, previous)) = i.checked_sub(1).and_then(|i| series.get(i)) else {
                return Err(ApiError::conflict(format!(
                    "pool {name} has no rendered config older than {current} (the server keeps the \
                     newest --retention of each pool; `hearth get mc` lists them)"
                )));
            };
            let previous = previous.to_string();
            // Rolled back again: the configs still render to the first `from`.
            let from = pool
                .status
                .rollback
                .as_ref()
                .map_or(current.clone(), |rb| rb.from.clone());
            update(&mut fleet.pools, name, |p| {
                p.status.rollback = Some(PoolRollback {
                    to: previous.clone(),
                    from: from.clone(),
                    hold: Hold {
                        by: by.to_string(),
                        at: t,
                    },
                })
            });
            fleet.record_events(vec![EventRecord::warning(
                t,
                meta_object("MachineConfigPool", name),
                "RolledBack",
                format!(
                    "rolled back to {previous} from {current} by {by}: rolled out like any change; \
                     the next change to the pool's configs ends the rollback"
                ),
            )]);
            Ok(RollbackAnswer {
                kind: "MachineConfigPool".into(),
                name: name.to_string(),
                to: previous,
                from: current,
            })
        })
        .await
    }
}
