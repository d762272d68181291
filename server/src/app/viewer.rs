//! Viewer tokens: the dashboard's (and any read-only client's) role. A viewer reads what an
//! admin reads through the admin API (pools, nodes, configs, events, the live watch) and
//! changes nothing. Admins make them (`hearth viewer-token create`) and revoke them by name.

use super::state::{meta_object, App};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::put;
use crate::pki;
use crate::store::records::{EventRecord, TokenRecord, TokenScope};
use std::time::Duration;

/// The prefix of a viewer token (`hearth-viewer-<64 hex>`).
pub const VIEWER_PREFIX: &str = "hearth-viewer-";
/// The store names of viewer tokens start with this.
const NAME_PREFIX: &str = "viewer-";
/// At most this many viewer tokens exist at once.
pub const MAX_VIEWER_TOKENS: usize = 64;

impl App {
    /// A new viewer token made by `by`: (its name, the token, its expiry).
    pub async fn new_viewer_token(
        &self,
        ttl: Option<Duration>,
        by: &str,
    ) -> Result<(String, String, Option<u64>), ApiError> {
        let _turn = self.admin_turn().await;
        let token = pki::new_token(VIEWER_PREFIX).map_err(|e| ApiError::internal(e.to_string()))?;
        let hash = pki::token_hash(&token);
        // The name shows the token's first hex digits, as a key id: enough to tell them apart.
        let name = format!("{NAME_PREFIX}{}", &hash[..12]);
        let expires = self
            .mutate(Scope::Rollout, false, |fleet, t| {
                let count = fleet
                    .tokens
                    .values()
                    .filter(|t| t.value.scope == TokenScope::Viewer)
                    .count();
                if count >= MAX_VIEWER_TOKENS {
                    return Err(ApiError::conflict(format!(
                        "{count} viewer tokens exist, the most there may be: revoke one \
                         (`hearth viewer-token delete NAME`)"
                    )));
                }
                let expires_at = ttl.map(|d| t.saturating_add(d.as_secs()));
                put(
                    &mut fleet.tokens,
                    &name,
                    TokenRecord {
                        sha256: hash.clone(),
                        scope: TokenScope::Viewer,
                        created_at: t,
                        expires_at,
                    },
                );
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("ViewerToken", &name),
                    "ViewerTokenCreated",
                    format!("{by} made a viewer token (read-only)"),
                )]);
                Ok(expires_at)
            })
            .await?;
        Ok((name, token, expires))
    }

    /// Revokes the viewer token `name`.
    pub async fn delete_viewer_token(&self, name: &str, by: &str) -> Result<(), ApiError> {
        let _turn = self.admin_turn().await;
        self.mutate(Scope::Rollout, false, |fleet, t| {
            let is_viewer = fleet
                .tokens
                .get(name)
                .is_some_and(|r| r.value.scope == TokenScope::Viewer);
            if !is_viewer {
                return Err(ApiError::not_found(format!(
                    "viewer token {name:?} not found"
                )));
            }
            fleet.tokens.remove(name);
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("ViewerToken", name),
                "ViewerTokenRevoked",
                format!("{by} revoked it"),
            )]);
            Ok(())
        })
        .await
    }
}
