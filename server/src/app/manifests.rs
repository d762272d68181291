//! Manifests: reading an apply's files (all or nothing, with every diagnostic) and putting
//! the objects they hold into a fleet copy.

use super::state::meta_object;
use crate::error::ApiError;
use crate::fleet::{put, update, Fleet, POLICIES_NAME};
use crate::store::records::{EventRecord, McRecord, NodeRecord, PoliciesRecord, PoolRecord};
use hearth_api::admin::{ApplyFile, ApplyResult};
use hearth_config::diag::Diagnostic;
use hearth_config::manifest::{read_str_with, FieldValidation, Manifests};
use std::collections::HashMap;

/// Reads every file; refuses the whole apply on any error (422 with every diagnostic), an
/// unknown field one unless `validation` says otherwise.
pub fn read_manifests(
    files: &[ApplyFile],
    validation: FieldValidation,
) -> Result<(Manifests, Vec<Diagnostic>), ApiError> {
    let mut all = Manifests::default();
    let mut diags = Vec::new();
    for f in files {
        let (m, d) = read_str_with(&f.name, &f.text, validation);
        all.extend(m);
        diags.extend(d);
    }
    // The same object twice in one apply.
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    let mut dup = |kind: &str, name: &str, origin: &hearth_config::model::Origin| {
        let key = (kind.to_string(), name.to_string());
        match seen.get(&key) {
            Some(first) => Some(
                Diagnostic::error(
                    &origin.file,
                    Some(origin.line),
                    "metadata.name",
                    format!("{kind} {name:?} is given twice in this apply (first at {first}); names must be unique"),
                )
                .with_object(Some(format!("{kind}/{name}"))),
            ),
            None => {
                seen.insert(key, origin.to_string());
                None
            }
        }
    };
    let mut dups = Vec::new();
    for s in &all.machine_configs {
        dups.extend(dup("MachineConfig", s.item.name(), &s.origin));
    }
    for s in &all.pools {
        dups.extend(dup("MachineConfigPool", s.item.name(), &s.origin));
    }
    for s in &all.nodes {
        dups.extend(dup("Node", &s.item.metadata.name, &s.origin));
    }
    diags.extend(dups);
    let count = all.machine_configs.len() + all.pools.len() + all.nodes.len() + all.policies.len();
    if diags.iter().any(Diagnostic::is_error) {
        let errors = diags.iter().filter(|d| d.is_error()).count();
        return Err(ApiError::invalid(
            format!("{errors} error(s) in the manifests; nothing was applied"),
            diags,
        ));
    }
    if count == 0 {
        return Err(ApiError::invalid(
            "no objects to apply (hearth takes MachineConfig, MachineConfigPool, Node and MachineConfiguration)",
            diags,
        ));
    }
    Ok((all, diags))
}

pub(crate) fn apply_manifests(
    fleet: &mut Fleet,
    m: &Manifests,
    t: u64,
    by: Option<&str>,
) -> Vec<ApplyResult> {
    let mut results = Vec::new();
    let mut events = Vec::new();
    let mut record = |kind: &str,
                      name: &str,
                      action: &str,
                      note: Option<&str>,
                      events: &mut Vec<EventRecord>| {
        results.push(ApplyResult {
            kind: kind.into(),
            name: name.into(),
            action: action.into(),
            note: note.map(Into::into),
        });
        if action != "unchanged" {
            events.push(EventRecord::normal(
                t,
                meta_object(kind, name),
                if action == "created" {
                    "Created"
                } else {
                    "Configured"
                },
                match by {
                    Some(who) => format!("{action} by apply (admin {who})"),
                    None => format!("{action} by apply"),
                },
            ));
        }
    };
    for s in &m.machine_configs {
        let mc = &s.item;
        let mut spec = mc.spec.clone();
        spec.source_version = None;
        let existing = fleet.mcs.get(mc.name()).map(|r| r.value.clone());
        let new = McRecord {
            metadata: mc.metadata.clone(),
            spec,
            source_version: mc.spec.source_version.map(|v| v.as_str().to_string()),
            created_at: existing.as_ref().map(|e| e.created_at).unwrap_or(t),
            updated_at: t,
        };
        let action = match &existing {
            Some(e) if e.same_content(&new) => "unchanged",
            Some(_) => "configured",
            None => "created",
        };
        if action != "unchanged" {
            put(&mut fleet.mcs, mc.name(), new);
        }
        record("MachineConfig", mc.name(), action, None, &mut events);
    }
    for s in &m.pools {
        let p = &s.item;
        let existing = fleet.pools.get(p.name()).map(|r| r.value.clone());
        let mut new = PoolRecord::from_model(p, false, t);
        if let Some(e) = &existing {
            new.created_at = e.created_at;
            new.status = e.status.clone();
            // Pools are paused and resumed with `hearth pause`/`resume`: a manifest that does
            // not name `paused` keeps the pool's pause, one that does sets it.
            if p.paused.is_none() {
                new.spec.paused = e.spec.paused;
            }
        }
        let flipped = existing
            .as_ref()
            .filter(|e| e.spec.paused != new.spec.paused)
            .map(|_| new.spec.paused);
        let action = match &existing {
            Some(e) if e.metadata == new.metadata && e.spec == new.spec && !e.builtin => {
                "unchanged"
            }
            Some(_) => "configured",
            None => "created",
        };
        if action != "unchanged" {
            put(&mut fleet.pools, p.name(), new);
        }
        let flip = flipped.map(|paused| {
            if paused {
                ("Paused", "paused: the manifest says paused: true")
            } else {
                (
                    "Resumed",
                    "resumed: the manifest says paused: false; its held changes roll out",
                )
            }
        });
        record(
            "MachineConfigPool",
            p.name(),
            action,
            flip.map(|f| f.1),
            &mut events,
        );
        if let Some((reason, note)) = flip {
            events.push(EventRecord::normal(
                t,
                meta_object("MachineConfigPool", p.name()),
                reason,
                match by {
                    Some(who) => format!("rollouts {note} (apply by admin {who})"),
                    None => format!("rollouts {note} (apply)"),
                },
            ));
        }
    }
    for s in &m.nodes {
        let n = &s.item.metadata;
        let action = match fleet.nodes.get(&n.name).map(|r| r.value.clone()) {
            Some(e) if e.labels == n.labels => "unchanged",
            Some(_) => {
                update(&mut fleet.nodes, &n.name, |x| x.labels = n.labels.clone());
                "configured"
            }
            None => {
                put(
                    &mut fleet.nodes,
                    &n.name,
                    NodeRecord {
                        name: n.name.clone(),
                        labels: n.labels.clone(),
                        created_at: t,
                        ..Default::default()
                    },
                );
                "created"
            }
        };
        record("Node", &n.name, action, None, &mut events);
    }
    if !m.policies.is_empty() {
        let policies = m.disruption_policies();
        let action = match fleet.policies.get(POLICIES_NAME) {
            Some(p) if p.value.policies == policies => "unchanged",
            Some(_) => "configured",
            None => "created",
        };
        if action != "unchanged" {
            put(
                &mut fleet.policies,
                POLICIES_NAME,
                PoliciesRecord {
                    policies,
                    updated_at: t,
                },
            );
        }
        record(
            "MachineConfiguration",
            POLICIES_NAME,
            action,
            None,
            &mut events,
        );
    }
    fleet.record_events(events);
    results
}
