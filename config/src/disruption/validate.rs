//! Checking user node-disruption policies as the MCO's API does (`validate_policies`):
//! absolute paths, standalone `Reboot`/`None`, no `Special`, unit names, counts, duplicates.

use super::rules::normalize_rule_path;
use crate::model::{DisruptionPolicies, PolicyAction};
use std::collections::HashMap;

/// The index where `key` was first seen, or `None` (recording `i`) when this is the first time.
fn first_index<'a>(seen: &mut HashMap<&'a str, usize>, key: &'a str, i: usize) -> Option<usize> {
    match seen.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(i);
            None
        }
    }
}

/// A problem in user node-disruption policies (what the MCO's API validation refuses).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A file rule's path is not absolute.
    #[error("{field}: {path:?} is not an absolute path")]
    RelativePath {
        /// Field path (`spec.nodeDisruptionPolicy.files[0].path`).
        field: String,
        /// The path.
        path: String,
    },
    /// `Reboot` or `None` given with other actions.
    #[error("{field}: {action} can only be specified alone, as it overrides any other action")]
    NotStandalone {
        /// Field path (`...files[0].actions`).
        field: String,
        /// `Reboot` or `None`.
        action: &'static str,
    },
    /// `Special` given by the user.
    #[error("{field}: Special is reserved for the MCO's own default policies")]
    Special {
        /// Field path.
        field: String,
    },
    /// A unit or service name that is not `NAME.TYPE`.
    #[error(
        "{field}: invalid unit name {name:?}: expected NAME.TYPE, NAME of letters, digits and \
         \":-_.\\\", TYPE one of service, socket, device, mount, automount, swap, target, path, \
         timer, snapshot, slice, scope (at most 255 characters)"
    )]
    UnitName {
        /// Field path.
        field: String,
        /// The name.
        name: String,
    },
    /// Too many entries.
    #[error("{field}: at most {max} entries are allowed, found {found}")]
    TooMany {
        /// Field path.
        field: String,
        /// The limit.
        max: usize,
        /// How many were given.
        found: usize,
    },
    /// The same path or unit twice.
    #[error("{field}: duplicate rule for {key:?} (first at {first})")]
    Duplicate {
        /// Field path of the second rule.
        field: String,
        /// The path or name.
        key: String,
        /// Field path of the first rule.
        first: String,
    },
}

const UNIT_TYPES: [&str; 12] = [
    "service",
    "socket",
    "device",
    "mount",
    "automount",
    "swap",
    "target",
    "path",
    "timer",
    "snapshot",
    "slice",
    "scope",
];

/// Whether `name` is a unit name the MCO's API accepts for policies (`crio.service`).
pub fn is_valid_unit_name(name: &str) -> bool {
    if name.len() > 255 {
        return false;
    }
    let Some((stem, suffix)) = name.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && UNIT_TYPES.contains(&suffix)
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-' | '\\'))
}

/// Checks user policies against the MCO API's rules (`operator.openshift.io/v1`
/// `MachineConfiguration`): absolute paths, `Reboot` and `None` standalone, no `Special`, valid
/// unit names, at most 50 rules per list and 10 actions per rule, no duplicate path or name.
/// Field paths start at `spec.nodeDisruptionPolicy`.
pub fn validate_policies(policies: &DisruptionPolicies) -> Vec<PolicyError> {
    const BASE: &str = "spec.nodeDisruptionPolicy";
    let mut errors = Vec::new();
    let mut first_file: HashMap<&str, usize> = HashMap::new();
    let mut first_unit: HashMap<&str, usize> = HashMap::new();
    let check_actions = |field: String, actions: &[PolicyAction], errors: &mut Vec<PolicyError>| {
        if actions.len() > 10 {
            errors.push(PolicyError::TooMany {
                field: field.clone(),
                max: 10,
                found: actions.len(),
            });
        }
        for (standalone, name) in [
            (PolicyAction::Reboot, "Reboot"),
            (PolicyAction::None, "None"),
        ] {
            if actions.len() > 1 && actions.contains(&standalone) {
                errors.push(PolicyError::NotStandalone {
                    field: field.clone(),
                    action: name,
                });
            }
        }
        for (i, a) in actions.iter().enumerate() {
            match a {
                PolicyAction::Special => errors.push(PolicyError::Special {
                    field: format!("{field}[{i}]"),
                }),
                PolicyAction::Reload { service } | PolicyAction::Restart { service }
                    if !is_valid_unit_name(service) =>
                {
                    errors.push(PolicyError::UnitName {
                        field: format!("{field}[{i}].serviceName"),
                        name: service.clone(),
                    })
                }
                _ => {}
            }
        }
    };
    if policies.files.len() > 50 {
        errors.push(PolicyError::TooMany {
            field: format!("{BASE}.files"),
            max: 50,
            found: policies.files.len(),
        });
    }
    for (i, f) in policies.files.iter().enumerate() {
        let field = format!("{BASE}.files[{i}]");
        if !f.path.starts_with('/') {
            errors.push(PolicyError::RelativePath {
                field: format!("{field}.path"),
                path: f.path.clone(),
            });
        }
        if let Some(j) = first_index(&mut first_file, normalize_rule_path(&f.path), i) {
            errors.push(PolicyError::Duplicate {
                field: format!("{field}.path"),
                key: f.path.clone(),
                first: format!("{BASE}.files[{j}].path"),
            });
        }
        check_actions(format!("{field}.actions"), &f.actions, &mut errors);
    }
    if policies.units.len() > 50 {
        errors.push(PolicyError::TooMany {
            field: format!("{BASE}.units"),
            max: 50,
            found: policies.units.len(),
        });
    }
    for (i, u) in policies.units.iter().enumerate() {
        let field = format!("{BASE}.units[{i}]");
        if !is_valid_unit_name(&u.name) {
            errors.push(PolicyError::UnitName {
                field: format!("{field}.name"),
                name: u.name.clone(),
            });
        }
        if let Some(j) = first_index(&mut first_unit, u.name.as_str(), i) {
            errors.push(PolicyError::Duplicate {
                field: format!("{field}.name"),
                key: u.name.clone(),
                first: format!("{BASE}.units[{j}].name"),
            });
        }
        check_actions(format!("{field}.actions"), &u.actions, &mut errors);
    }
    if let Some(actions) = &policies.ssh_key {
        check_actions(format!("{BASE}.sshkey.actions"), actions, &mut errors);
    }
    errors
}
