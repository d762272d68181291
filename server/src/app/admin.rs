//! The admin operations: apply and delete manifests, delete nodes, reset credentials, label
//! nodes, pause and resume pools, make bootstrap tokens. Each is one atomic commit.

use super::manifests::apply_manifests;
use super::manifests::read_manifests;
use super::state::{format_labels, meta_object, App};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::{put, update};
use crate::pki::{self};
use crate::store::records::{
    bootstrap_token_name, EventRecord, PoolRecord, TokenRecord, TokenScope,
};
use crate::time::now;
use hearth_api::admin::{ApplyFile, ApplyOutcome, PoolTarget};
use hearth_config::manifest::FieldValidation;
use std::collections::BTreeMap;
use std::time::Duration;

impl App {
    /// Applies manifests: all or nothing; an unknown field is an error.
    pub async fn apply(
        &self,
        files: &[ApplyFile],
        dry_run: bool,
    ) -> Result<ApplyOutcome, ApiError> {
        self.apply_as(files, dry_run, FieldValidation::Strict, None)
            .await
    }

    /// [`App::apply`] with what an unknown field is, by a named admin (a client certificate's
    /// CN): the events name them.
    pub async fn apply_as(
        &self,
        files: &[ApplyFile],
        dry_run: bool,
        validation: FieldValidation,
        by: Option<&str>,
    ) -> Result<ApplyOutcome, ApiError> {
        // An admin's change waits for the ones that arrived before it (a dry run changes
        // nothing and does not wait).
        let _turn = if dry_run {
            None
        } else {
            Some(self.admin_turn().await)
        };
        // Reading and validating is linear but can be long for big manifests: on a blocking
        // thread, so that it holds up no request of anyone else.
        let owned = files.to_vec();
        let (mut m, warnings) =
            tokio::task::spawn_blocking(move || read_manifests(&owned, validation))
                .await
                .map_err(|e| ApiError::internal(format!("reading the manifests failed: {e}")))??;
        // Tags to digests, before anything is written (outside every lock: a registry may be
        // slow).
        self.resolve_os_images(&mut m).await?;
        let results = self
            .mutate(Scope::Full, dry_run, |fleet, t| {
                Ok(apply_manifests(fleet, &m, t, by))
            })
            .await?;
        self.metrics.apply();
        let pools = if dry_run {
            Vec::new()
        } else {
            self.snapshot()
                .pools
                .values()
                .map(|p| PoolTarget {
                    name: p.value.metadata.name.clone(),
                    target: p.value.status.target.clone(),
                    render_error: p.value.status.render_error.clone(),
                })
                .collect()
        };
        Ok(ApplyOutcome {
            results,
            warnings: warnings.iter().map(Into::into).collect(),
            pools,
            dry_run,
        })
    }

    /// Resolves each MachineConfig's tag-only registry `osImageURL` to its manifest's digest,
    /// recorded in the config's [`RESOLVED_ANNOTATION`]; a tag that cannot be resolved refuses
    /// the apply, naming the manifest, the object, the field and what to do.
    ///
    /// [`RESOLVED_ANNOTATION`]: hearth_config::container::RESOLVED_ANNOTATION
    async fn resolve_os_images(
        &self,
        m: &mut hearth_config::manifest::Manifests,
    ) -> Result<(), ApiError> {
        use hearth_config::container::{ContainerImage, RESOLVED_ANNOTATION};
        let tag_only = |url: &str| match ContainerImage::parse(url) {
            Some(Ok(image)) if image.is_tag_only() => Some(image),
            _ => None,
        };
        if !m
            .machine_configs
            .iter()
            .any(|s| tag_only(s.item.spec.os_image_url.trim()).is_some())
        {
            return Ok(());
        }
        let default;
        let resolver = match &self.options.registry {
            Some(r) => r.as_ref(),
            None => {
                default = crate::registry::Resolver::new(None, None).map_err(ApiError::internal)?;
                &default
            }
        };
        for s in &mut m.machine_configs {
            let url = s.item.spec.os_image_url.trim().to_string();
            let Some(image) = tag_only(&url) else {
                continue;
            };
            let digest = resolver.digest(&image).await.map_err(|cause| {
                ApiError::invalid(
                    format!(
                        "{}: MachineConfig {} spec.osImageURL: {url} names a tag, and \
                         hearth-server could not resolve it to a digest: {cause} (pin the \
                         digest in osImageURL, or give hearth-server the registry's CA and \
                         credentials: --registry-ca, --registry-auth)",
                        s.origin,
                        s.item.name()
                    ),
                    Vec::new(),
                )
            })?;
            tracing::info!(config = s.item.name(), image = %url, %digest, "osImageURL tag resolved");
            s.item
                .metadata
                .annotations
                .insert(RESOLVED_ANNOTATION.to_string(), format!("{url}@{digest}"));
        }
        Ok(())
    }

    /// Deletes a MachineConfig.
    pub async fn delete_machine_config(&self, name: &str) -> Result<(), ApiError> {
        let _turn = self.admin_turn().await;
        self.mutate(Scope::Full, false, |fleet, t| {
            if fleet.mcs.remove(name).is_none() {
                return Err(ApiError::not_found(format!(
                    "MachineConfig {name:?} not found"
                )));
            }
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("MachineConfig", name),
                "Deleted",
                "deleted".into(),
            )]);
            Ok(())
        })
        .await
    }

    /// Deletes a pool (a built-in pool goes back to its built-in definition).
    pub async fn delete_pool(&self, name: &str, force: bool) -> Result<String, ApiError> {
        let _turn = self.admin_turn().await;
        let what = self.delete_pool_record(name, force).await?;
        if what.starts_with("deleted") {
            // Its bootstrap token went with it: so does the token's file.
            if let Some(dir) = &self.options.token_dir {
                let _ = std::fs::remove_file(dir.join(format!("{name}.token")));
            }
        }
        Ok(what)
    }

    async fn delete_pool_record(&self, name: &str, force: bool) -> Result<String, ApiError> {
        self.mutate(Scope::Full, false, |fleet, t| {
            let Some(existing) = fleet.pools.get(name).map(|p| p.value.clone()) else {
                return Err(ApiError::not_found(format!(
                    "MachineConfigPool {name:?} not found"
                )));
            };
            let what = if matches!(name, "master" | "worker") {
                if existing.builtin {
                    return Err(ApiError::conflict(format!(
                        "{name} is a built-in pool; it cannot be deleted"
                    )));
                }
                let mut b = PoolRecord::builtin(name, existing.created_at);
                b.status = existing.status.clone();
                put(&mut fleet.pools, name, b);
                "reset to its built-in definition".to_string()
            } else {
                // Where its nodes would go: the pool their labels select without it, or none.
                let others = hearth_config::render::with_builtin_pools(
                    &fleet
                        .pools
                        .values()
                        .filter(|p| p.value.name() != name)
                        .map(|p| p.value.to_model())
                        .collect::<Vec<_>>(),
                );
                let mut moves: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for n in fleet.nodes.values() {
                    if n.value.pool.as_deref() != Some(name) {
                        continue;
                    }
                    let to = hearth_config::render::pool_for_node(&others, &n.value.to_model())
                        .map(|p| format!("to {}", p.name()))
                        .unwrap_or_else(|_| {
                            "to no pool (no config until a pool selects them)".to_string()
                        });
                    moves.entry(to).or_default().push(n.value.name.clone());
                }
                let count: usize = moves.values().map(Vec::len).sum();
                let where_to = moves
                    .iter()
                    .map(|(to, nodes)| {
                        let shown = nodes.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                        let more = nodes.len().saturating_sub(5);
                        if more > 0 {
                            format!("{shown} and {more} more {to}")
                        } else {
                            format!("{shown} {to}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                if count > 0 && !force {
                    return Err(ApiError::conflict(format!(
                        "MachineConfigPool {name} has {count} node(s); deleting it moves \
                         {where_to} (which rolls that pool's config out to them), and its \
                         bootstrap token stops working for good (re-creating the pool does not \
                         bring it back: `hearth bootstrap-token {name}` makes a new one). Move \
                         the nodes first (`hearth label node NODE KEY-`), or delete it anyway \
                         with --force"
                    )));
                }
                fleet.pools.remove(name);
                fleet.tokens.remove(&bootstrap_token_name(name));
                // And the first-boot tokens of its nodes-to-be.
                let spent: Vec<String> = fleet
                    .tokens
                    .iter()
                    .filter(|(_, t)| {
                        matches!(&t.value.scope, TokenScope::Bootstrap { pool, .. } if pool == name)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in spent {
                    fleet.tokens.remove(&k);
                }
                if count > 0 {
                    format!(
                        "deleted; its {count} node(s) moved: {where_to}; its bootstrap token no \
                         longer works"
                    )
                } else {
                    "deleted; its bootstrap token no longer works".to_string()
                }
            };
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("MachineConfigPool", name),
                "Deleted",
                what.clone(),
            )]);
            Ok(what)
        })
        .await
    }

    /// Deletes a node (its credential stops working).
    pub async fn delete_node(&self, name: &str) -> Result<(), ApiError> {
        let _turn = self.admin_turn().await;
        self.mutate(Scope::Full, false, |fleet, t| {
            fleet
                .tokens
                .remove(&crate::store::records::node_bootstrap_token_name(name));
            if fleet.nodes.remove(name).is_none() {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            }
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("Node", name),
                "Deleted",
                "deleted; its credential no longer works".into(),
            )]);
            Ok(())
        })
        .await?;
        self.refused_claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(name);
        Ok(())
    }

    /// Revokes a node's credential (an admin's decision, for a node that lost it): its
    /// requests get 401 and it may enroll again with its pool's bootstrap token. The node keeps
    /// its labels, status and reboot slot. Answers whether it had one, and a warning when the
    /// reset hands the name to a second machine (claims of its name were refused lately while
    /// the node itself was heard from since they began).
    pub async fn reset_credential(&self, name: &str) -> Result<(bool, Option<String>), ApiError> {
        let _turn = self.admin_turn().await;
        let revoked = self.mutate(Scope::Rollout, false, |fleet, t| {
            let Some(node) = fleet.nodes.get(name).map(|n| n.value.clone()) else {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            };
            if node.credential_sha256.is_none() {
                return Ok(false);
            }
            update(&mut fleet.nodes, name, |n| n.credential_sha256 = None);
            fleet.record_events(vec![EventRecord::warning(
                t,
                meta_object("Node", name),
                "CredentialReset",
                "an admin revoked the node's credential; it may enroll again with its pool's bootstrap token".into(),
            )]);
            Ok(true)
        })
        .await?;
        Ok((revoked, self.reset_warning(name)))
    }

    /// See [`App::reset_credential`].
    fn reset_warning(&self, name: &str) -> Option<String> {
        let t = now();
        let claims = self
            .refused_claims
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let c = claims.recent(name, t)?;
        // The node itself heard from since the claims began: two machines use the name (a
        // reinstalled node is silent with its old credential, and claims the name itself).
        let seen = self
            .snapshot()
            .nodes
            .get(name)
            .and_then(|n| self.last_seen(&n.value))
            .filter(|s| *s > c.first)?;
        let heard = format!(
            "; the node itself was heard from {} s ago",
            t.saturating_sub(seen)
        );
        Some(format!(
            "{} refused claim(s) of this node's name by a machine without its credential, the \
             last {} s ago{} with pool {}'s bootstrap token{heard}: two machines use the name, \
             and it now goes to whichever enrolls first. Stop the other machine (or give it \
             another name) and reset again",
            c.count,
            t.saturating_sub(c.last),
            c.from
                .as_deref()
                .map(|f| format!(" from {f}"))
                .unwrap_or_default(),
            c.pool
        ))
    }

    /// Sets and removes labels of a node.
    pub async fn label_node(
        &self,
        name: &str,
        set: &BTreeMap<String, String>,
        remove: &[String],
        overwrite: bool,
    ) -> Result<BTreeMap<String, String>, ApiError> {
        let _turn = self.admin_turn().await;
        for k in set.keys().chain(remove.iter()) {
            if k.is_empty() || k.contains(char::is_whitespace) {
                return Err(ApiError::bad_request(format!("invalid label key {k:?}")));
            }
        }
        self.mutate(Scope::Full, false, |fleet, t| {
            let Some(node) = fleet.nodes.get(name).map(|n| n.value.clone()) else {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            };
            let mut labels = node.labels.clone();
            for (k, v) in set {
                if let Some(old) = labels.get(k) {
                    if old != v && !overwrite {
                        return Err(ApiError::conflict(format!(
                            "node {name} already has a value ({old:?}) for label {k}; use --overwrite to change it"
                        )));
                    }
                }
                labels.insert(k.clone(), v.clone());
            }
            for k in remove {
                labels.remove(k);
            }
            if labels != node.labels {
                update(&mut fleet.nodes, name, |n| n.labels = labels.clone());
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("Node", name),
                    "Labeled",
                    format!("labels are now {}", format_labels(&labels)),
                )]);
            }
            Ok(labels)
        })
        .await
    }

    /// Pauses or resumes a pool's rollouts.
    pub async fn set_paused(&self, pool: &str, paused: bool) -> Result<bool, ApiError> {
        let _turn = self.admin_turn().await;
        self.mutate(Scope::Rollout, false, |fleet, t| {
            let Some(p) = fleet.pools.get(pool) else {
                return Err(ApiError::not_found(format!(
                    "MachineConfigPool {pool:?} not found"
                )));
            };
            let changed = p.value.spec.paused != paused;
            if changed {
                update(&mut fleet.pools, pool, |p| p.spec.paused = paused);
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("MachineConfigPool", pool),
                    if paused { "Paused" } else { "Resumed" },
                    if paused {
                        "rollouts paused".into()
                    } else {
                        "rollouts resumed".into()
                    },
                )]);
            }
            Ok(changed)
        })
        .await
    }

    /// A new bootstrap token for a pool (replacing the old one): the token, when it expires,
    /// and whether it replaced one.
    pub async fn new_bootstrap_token(
        &self,
        pool: &str,
        ttl: Option<Duration>,
    ) -> Result<(String, Option<u64>, bool), ApiError> {
        let _turn = self.admin_turn().await;
        let token =
            pki::new_token(pki::BOOTSTRAP_PREFIX).map_err(|e| ApiError::internal(e.to_string()))?;
        let hash = pki::token_hash(&token);
        let (expires, replaced) = self
            .mutate(Scope::Rollout, false, |fleet, t| {
                if !fleet.pools.contains_key(pool) {
                    return Err(ApiError::not_found(format!(
                        "MachineConfigPool {pool:?} not found"
                    )));
                }
                let replaced = fleet.tokens.contains_key(&bootstrap_token_name(pool));
                let expires_at = ttl.map(|d| t.saturating_add(d.as_secs()));
                put(
                    &mut fleet.tokens,
                    &bootstrap_token_name(pool),
                    TokenRecord {
                        sha256: hash.clone(),
                        scope: TokenScope::Bootstrap {
                            pool: pool.to_string(),
                            node: None,
                        },
                        created_at: t,
                        expires_at,
                    },
                );
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("MachineConfigPool", pool),
                    "BootstrapTokenCreated",
                    format!(
                        "{}{}",
                        if replaced {
                            "a new bootstrap token replaces the old one"
                        } else {
                            "the pool's first bootstrap token"
                        },
                        match expires_at {
                            Some(e) => format!("; it expires at {}", crate::time::rfc3339(e)),
                            None => String::new(),
                        }
                    ),
                )]);
                Ok((expires_at, replaced))
            })
            .await?;
        if let Some(dir) = &self.options.token_dir {
            // The file keeps holding the pool's valid token (the old one no longer works).
            let path = dir.join(format!("{pool}.token"));
            pki::write_private(&path, format!("{token}\n").as_bytes()).map_err(|e| {
                ApiError::internal(format!(
                    "the new token works, but writing {} failed: {e:#}",
                    path.display()
                ))
            })?;
        }
        Ok((token, expires, replaced))
    }
}
