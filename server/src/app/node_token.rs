//! A node's own bootstrap token (`hearth bootstrap-token POOL --node NAME`): the credential of a
//! zero-touch first boot whose config must be right from the first boot (static addresses in a
//! per-node overlay). It serves `/config/<pool>` as the node's own render (its pool's configs
//! plus its overlays) and enrolls that one name only; it stands beside the pool's token, which
//! it does not replace.
//!
//! The node is registered when the token is made (as an applied `Node` manifest would), with
//! its existing labels or the pool's `nodeSelector.matchLabels`, so that the controller renders
//! its target before the machine first asks for it.

use super::state::{format_labels, meta_object, App};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::put;
use crate::pki;
use crate::store::records::{
    node_bootstrap_token_name, EventRecord, NodeRecord, TokenRecord, TokenScope,
};
use hearth_config::manifest::check_object_name;
use std::time::Duration;

impl App {
    /// A new bootstrap token bound to node `node` of pool `pool` (replacing that node's previous
    /// one), made by admin `by`. Returns the token and its expiry.
    pub async fn new_node_bootstrap_token(
        &self,
        pool: &str,
        node: &str,
        ttl: Option<Duration>,
        by: &str,
    ) -> Result<(String, Option<u64>), ApiError> {
        let _turn = self.admin_turn().await;
        if let Some(msg) = check_object_name(node) {
            return Err(ApiError::bad_request(format!("node: {msg}")));
        }
        let token =
            pki::new_token(pki::BOOTSTRAP_PREFIX).map_err(|e| ApiError::internal(e.to_string()))?;
        let hash = pki::token_hash(&token);
        // A new node changes what is rendered (its overlays): a full reconcile.
        let expires = self
            .mutate(Scope::Full, false, |fleet, t| {
                let Some(pool_rec) = fleet.pools.get(pool) else {
                    return Err(ApiError::not_found(format!(
                        "MachineConfigPool {pool:?} not found"
                    )));
                };
                let existing = fleet.nodes.get(node).map(|n| n.value.clone());
                if existing
                    .as_ref()
                    .is_some_and(|n| n.credential_sha256.is_some())
                {
                    return Err(ApiError::conflict(format!(
                        "node {node} has enrolled already: a first-boot token is for a machine \
                         that has not; to reinstall it, reset its credential first \
                         (`hearth node reset-credential {node}`)"
                    )));
                }
                let labels = match &existing {
                    Some(n) if !n.labels.is_empty() => n.labels.clone(),
                    _ => pool_rec.value.spec.node_selector.match_labels.clone(),
                };
                let belongs = super::agent::pool_of(fleet, node, &labels)
                    .map_err(|e| ApiError::conflict(format!("node {node}: {e}")))?;
                if belongs != pool {
                    return Err(ApiError::conflict(format!(
                        "node {node} with labels {} belongs to pool {belongs}, not {pool}: make \
                         the token for pool {belongs}, or change the node's labels",
                        format_labels(&labels)
                    )));
                }
                if existing.is_none() {
                    put(
                        &mut fleet.nodes,
                        node,
                        NodeRecord {
                            name: node.to_string(),
                            labels,
                            created_at: t,
                            ..Default::default()
                        },
                    );
                }
                let expires_at = ttl.map(|d| t.saturating_add(d.as_secs()));
                put(
                    &mut fleet.tokens,
                    &node_bootstrap_token_name(node),
                    TokenRecord {
                        sha256: hash.clone(),
                        scope: TokenScope::Bootstrap {
                            pool: pool.to_string(),
                            node: Some(node.to_string()),
                        },
                        created_at: t,
                        expires_at,
                    },
                );
                let until = match expires_at {
                    Some(e) => format!("; it expires at {}", crate::time::rfc3339(e)),
                    None => String::new(),
                };
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("Node", node),
                    "BootstrapTokenCreated",
                    format!(
                        "{by} made a first-boot token for this node in pool {pool} (it replaces \
                         the node's previous one){until}"
                    ),
                )]);
                Ok(expires_at)
            })
            .await?;
        Ok((token, expires))
    }
}
