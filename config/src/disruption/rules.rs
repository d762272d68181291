//! The effective rule set: the MCO's defaults merged with the user's rules
//! ([`effective_policies`]), how a rule path covers a file ([`rule_match_len`]), and the index
//! that answers lookups in time linear in the looked-up path.

use super::defaults::mco_defaults;
use crate::model::{DisruptionPolicies, PolicyAction};
use serde::Serialize;
use std::collections::HashMap;

/// Whether a rule was written by the user or is one of the MCO's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RuleOrigin {
    /// From the `MachineConfiguration` object.
    User,
    /// The MCO's built-in default.
    McoDefault,
}

/// An effective file rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRule {
    /// File or directory path, as written.
    pub path: String,
    /// Actions, in order.
    pub actions: Vec<PolicyAction>,
    /// Who wrote it.
    pub origin: RuleOrigin,
}

/// An effective unit rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitRule {
    /// Unit name.
    pub name: String,
    /// Actions, in order.
    pub actions: Vec<PolicyAction>,
    /// Who wrote it.
    pub origin: RuleOrigin,
}

/// The effective rule for SSH keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SshKeyRule {
    /// Actions, in order.
    pub actions: Vec<PolicyAction>,
    /// Who wrote it.
    pub origin: RuleOrigin,
}

/// The MCO defaults merged with user rules: what the MCO shows in
/// `status.nodeDisruptionPolicyStatus.clusterPolicies`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EffectivePolicies {
    /// File rules: defaults first (user rules for the same path replace them in place), then the
    /// other user rules.
    pub files: Vec<FileRule>,
    /// Unit rules, merged the same way.
    pub units: Vec<UnitRule>,
    /// The SSH key rule.
    #[serde(rename = "sshkey")]
    pub ssh_key: SshKeyRule,
}

/// Merges `user` rules into the MCO defaults as the MCO's `MergeClusterPolicies` does. Paths are
/// compared after removing trailing slashes. When the user gives the same path (or unit name)
/// twice, the last one counts. An absent or empty user `sshkey` rule leaves the default.
pub fn effective_policies(user: &DisruptionPolicies) -> EffectivePolicies {
    let defaults = mco_defaults();
    let mut files: Vec<FileRule> = defaults
        .files
        .into_iter()
        .map(|f| FileRule {
            path: f.path,
            actions: f.actions,
            origin: RuleOrigin::McoDefault,
        })
        .collect();
    // Index by normalised path: merging stays linear in the number of user rules.
    let mut file_index: HashMap<String, usize> = files
        .iter()
        .enumerate()
        .map(|(i, r)| (normalize_rule_path(&r.path).to_string(), i))
        .collect();
    for f in &user.files {
        let rule = FileRule {
            path: f.path.clone(),
            actions: f.actions.clone(),
            origin: RuleOrigin::User,
        };
        match file_index.get(normalize_rule_path(&f.path)) {
            Some(&i) => files[i] = rule,
            None => {
                file_index.insert(normalize_rule_path(&f.path).to_string(), files.len());
                files.push(rule);
            }
        }
    }
    let mut units: Vec<UnitRule> = defaults
        .units
        .into_iter()
        .map(|u| UnitRule {
            name: u.name,
            actions: u.actions,
            origin: RuleOrigin::McoDefault,
        })
        .collect();
    let mut unit_index: HashMap<String, usize> = units
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.clone(), i))
        .collect();
    for u in &user.units {
        let rule = UnitRule {
            name: u.name.clone(),
            actions: u.actions.clone(),
            origin: RuleOrigin::User,
        };
        match unit_index.get(&u.name) {
            Some(&i) => units[i] = rule,
            None => {
                unit_index.insert(u.name.clone(), units.len());
                units.push(rule);
            }
        }
    }
    let ssh_key = match &user.ssh_key {
        Some(actions) if !actions.is_empty() => SshKeyRule {
            actions: actions.clone(),
            origin: RuleOrigin::User,
        },
        _ => SshKeyRule {
            actions: defaults.ssh_key.unwrap_or_default(),
            origin: RuleOrigin::McoDefault,
        },
    };
    EffectivePolicies {
        files,
        units,
        ssh_key,
    }
}
/// A rule path without trailing slashes (`/` stays `/`).
pub(super) fn normalize_rule_path(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() && path.starts_with('/') {
        "/"
    } else {
        trimmed
    }
}

/// How specific a match of `rule` on `file` is, or `None` when the rule does not cover the file:
/// the rule must equal the path or be one of its parent directories (a `/` boundary).
pub fn rule_match_len(rule: &str, file: &str) -> Option<usize> {
    let rule = normalize_rule_path(rule);
    if rule.is_empty() {
        return None;
    }
    if rule == "/" {
        return file.starts_with('/').then_some(1);
    }
    if file == rule {
        return Some(rule.len());
    }
    let rest = file.strip_prefix(rule)?;
    rest.starts_with('/').then_some(rule.len())
}

impl EffectivePolicies {
    /// The rule for a changed file: the longest matching path; the first such rule on a tie.
    pub fn file_rule(&self, path: &str) -> Option<&FileRule> {
        let mut best: Option<(&FileRule, usize)> = None;
        for rule in &self.files {
            if let Some(len) = rule_match_len(&rule.path, path) {
                if best.is_none_or(|(_, l)| len > l) {
                    best = Some((rule, len));
                }
            }
        }
        best.map(|(r, _)| r)
    }

    /// The rule for a changed unit (exact name).
    pub fn unit_rule(&self, name: &str) -> Option<&UnitRule> {
        self.units.iter().find(|r| r.name == name)
    }
}
/// The effective rules indexed for lookups in time linear in the looked-up path: file rules in a
/// trie of path components (a rule covers a file when its components start the file's), unit
/// rules by name. Gives the same answers as [`EffectivePolicies::file_rule`] and
/// [`EffectivePolicies::unit_rule`].
pub(super) struct RuleIndex<'a> {
    pub(super) policies: &'a EffectivePolicies,
    /// Trie nodes: children by component, and the rule ending here (the first one).
    nodes: Vec<(HashMap<&'a str, usize>, Option<usize>)>,
    /// The rule for `/`, which covers every absolute path.
    root: Option<usize>,
    units: HashMap<&'a str, usize>,
}

impl<'a> RuleIndex<'a> {
    pub(super) fn new(policies: &'a EffectivePolicies) -> Self {
        let mut index = RuleIndex {
            policies,
            nodes: vec![(HashMap::new(), None)],
            root: None,
            units: HashMap::new(),
        };
        for (i, rule) in policies.files.iter().enumerate() {
            let path = normalize_rule_path(&rule.path);
            if path.is_empty() {
                continue;
            }
            if path == "/" {
                index.root.get_or_insert(i);
                continue;
            }
            let mut node = 0;
            for comp in path.split('/') {
                node = match index.nodes[node].0.get(comp) {
                    Some(&n) => n,
                    None => {
                        let n = index.nodes.len();
                        index.nodes.push((HashMap::new(), None));
                        index.nodes[node].0.insert(comp, n);
                        n
                    }
                };
            }
            index.nodes[node].1.get_or_insert(i);
        }
        for (i, rule) in policies.units.iter().enumerate() {
            index.units.entry(rule.name.as_str()).or_insert(i);
        }
        index
    }

    pub(super) fn file_rule(&self, path: &str) -> Option<&'a FileRule> {
        let mut best = if path.starts_with('/') {
            self.root
        } else {
            None
        };
        let mut node = 0;
        for comp in path.split('/') {
            match self.nodes[node].0.get(comp) {
                Some(&n) => node = n,
                None => break,
            }
            if let Some(r) = self.nodes[node].1 {
                best = Some(r);
            }
        }
        best.map(|i| &self.policies.files[i])
    }

    pub(super) fn unit_rule(&self, name: &str) -> Option<&'a UnitRule> {
        self.units.get(name).map(|&i| &self.policies.units[i])
    }
}
