//! Node disruption: what a node must do once a plan's actions are applied (nothing, drain,
//! daemon-reload, reload or restart named units, or reboot), decided as the MCO's node-disruption
//! policies decide it.
//!
//! The rules, as in the MCO (`pkg/daemon/update.go`,
//! `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`):
//!
//! * The effective rule set is the MCO's defaults ([`MCO_DEFAULT_FILES`], [`MCO_DEFAULT_UNITS`],
//!   [`MCO_DEFAULT_SSH_KEY`]) merged with the user's rules ([`DisruptionPolicies`], read from the
//!   `MachineConfiguration` object): a user rule for the same path (or unit name) replaces the
//!   default in place, other user rules are added ([`effective_policies`]).
//! * A changed file takes the rule with the longest path that equals the file's path or is one of
//!   its parent directories (a `/` boundary: `/etc/foo` covers `/etc/foo/bar`, not `/etc/foobar`).
//!   No rule: reboot.
//! * A changed unit (its unit file, a drop-in, its enablement or mask) takes the rule with exactly
//!   its name. No rule: reboot.
//! * Changed SSH keys take the user's `sshkey` rule, else the default (none). A changed password
//!   hash needs nothing.
//! * Kernel arguments, kernel type, extensions, the OS image and FIPS always need a reboot.
//! * Reboot wins over everything. Otherwise the node runs the collected service steps; `None`
//!   alongside other actions is dropped.

use crate::model::{DisruptionPolicies, FilePolicy, KernelType, PolicyAction, UnitPolicy};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Where the MCO defaults below come from.
pub const MCO_DEFAULTS_SOURCE: &str =
    "openshift/machine-config-operator, pkg/apihelpers/apihelpers.go \
     (defaultClusterPolicies) with paths from pkg/daemon/constants/constants.go, at commit \
     7ff337a4ffac8e7562692181178ede61e4b2eec5";

/// A policy action in a `const` table (the [`PolicyAction`] equivalents without owned strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultAction {
    /// [`PolicyAction::None`].
    None,
    /// [`PolicyAction::DaemonReload`].
    DaemonReload,
    /// [`PolicyAction::Reload`].
    Reload(&'static str),
    /// [`PolicyAction::Restart`].
    Restart(&'static str),
    /// [`PolicyAction::Special`].
    Special,
}

impl DefaultAction {
    /// The owned form.
    pub fn to_policy_action(self) -> PolicyAction {
        match self {
            DefaultAction::None => PolicyAction::None,
            DefaultAction::DaemonReload => PolicyAction::DaemonReload,
            DefaultAction::Reload(s) => PolicyAction::Reload {
                service: s.to_string(),
            },
            DefaultAction::Restart(s) => PolicyAction::Restart {
                service: s.to_string(),
            },
            DefaultAction::Special => PolicyAction::Special,
        }
    }
}

const CRIO: &str = "crio.service";
const KUBELET: &str = "kubelet.service";
const UPDATE_CA_TRUST: &str = "coreos-update-ca-trust.service";
const IRI_REGISTRY: &str = "iri-registry.service";

/// The MCO's default file rules, in the MCO's order (see [`MCO_DEFAULTS_SOURCE`]).
pub const MCO_DEFAULT_FILES: &[(&str, &[DefaultAction])] = &[
    // constants.KubeletAuthFile
    ("/var/lib/kubelet/config.json", &[DefaultAction::None]),
    // constants.GPGNoRebootPath
    (
        "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
        &[DefaultAction::Reload(CRIO)],
    ),
    // constants.ContainerRegistryPolicyPath
    (
        "/etc/containers/policy.json",
        &[DefaultAction::Reload(CRIO)],
    ),
    // constants.ContainerRegistryConfPath
    ("/etc/containers/registries.conf", &[DefaultAction::Special]),
    // constants.SigstoreRegistriesConfigDir
    (
        "/etc/containers/registries.d",
        &[DefaultAction::Reload(CRIO)],
    ),
    // constants.CrioPoliciesDir
    ("/etc/crio/policies", &[DefaultAction::Reload(CRIO)]),
    // constants.OpenShiftNMStateConfigDir (first-boot only configuration)
    ("/etc/nmstate/openshift", &[DefaultAction::None]),
    // constants.UserCABundlePath
    (
        "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        &[
            DefaultAction::Restart(UPDATE_CA_TRUST),
            DefaultAction::Restart(CRIO),
        ],
    ),
    // constants.KubernetesCredentialProvidersDir
    (
        "/etc/kubernetes/credential-providers",
        &[DefaultAction::Restart(KUBELET)],
    ),
    // constants.KubeletCrioImageCredProviderConfPath
    (
        "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
        &[DefaultAction::DaemonReload, DefaultAction::Restart(KUBELET)],
    ),
    // constants.IRIRegistryConfigPath
    ("/etc/iri-registry", &[DefaultAction::Restart(IRI_REGISTRY)]),
    // constants.IRILoadImageScriptPath
    (
        "/usr/local/bin/load-registry-image.sh",
        &[DefaultAction::Restart(IRI_REGISTRY)],
    ),
    // constants.IRIRootCAPath
    (
        "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
        &[DefaultAction::Restart(UPDATE_CA_TRUST)],
    ),
];

/// The MCO's default unit rules (see [`MCO_DEFAULTS_SOURCE`]).
pub const MCO_DEFAULT_UNITS: &[(&str, &[DefaultAction])] = &[(
    IRI_REGISTRY,
    &[
        DefaultAction::DaemonReload,
        DefaultAction::Restart(IRI_REGISTRY),
    ],
)];

/// The MCO's default rule for SSH key changes.
pub const MCO_DEFAULT_SSH_KEY: &[DefaultAction] = &[DefaultAction::None];

/// The MCO's defaults as [`DisruptionPolicies`].
pub fn mco_defaults() -> DisruptionPolicies {
    let owned = |actions: &[DefaultAction]| actions.iter().map(|a| a.to_policy_action()).collect();
    DisruptionPolicies {
        files: MCO_DEFAULT_FILES
            .iter()
            .map(|(path, actions)| FilePolicy {
                path: path.to_string(),
                actions: owned(actions),
            })
            .collect(),
        units: MCO_DEFAULT_UNITS
            .iter()
            .map(|(name, actions)| UnitPolicy {
                name: name.to_string(),
                actions: owned(actions),
            })
            .collect(),
        ssh_key: Some(owned(MCO_DEFAULT_SSH_KEY)),
    }
}

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
fn normalize_rule_path(path: &str) -> &str {
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
struct RuleIndex<'a> {
    policies: &'a EffectivePolicies,
    /// Trie nodes: children by component, and the rule ending here (the first one).
    nodes: Vec<(HashMap<&'a str, usize>, Option<usize>)>,
    /// The rule for `/`, which covers every absolute path.
    root: Option<usize>,
    units: HashMap<&'a str, usize>,
}

impl<'a> RuleIndex<'a> {
    fn new(policies: &'a EffectivePolicies) -> Self {
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

    fn file_rule(&self, path: &str) -> Option<&'a FileRule> {
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

    fn unit_rule(&self, name: &str) -> Option<&'a UnitRule> {
        self.units.get(name).map(|&i| &self.policies.units[i])
    }
}

/// One thing a plan changes that may disrupt the node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Change {
    /// A file was written or removed.
    File {
        /// Path.
        path: String,
        /// True when the file was removed.
        removed: bool,
    },
    /// A unit's file, drop-ins, enablement or mask changed.
    Unit {
        /// Unit name.
        name: String,
    },
    /// The SSH keys of user `core` changed.
    SshKeys,
    /// The password hash of user `core` changed.
    PasswordHash,
    /// Kernel arguments changed.
    KernelArguments,
    /// The kernel type changed.
    KernelType {
        /// Before.
        from: KernelType,
        /// After.
        to: KernelType,
    },
    /// Extensions changed.
    Extensions,
    /// The OS image changed.
    OsImage,
    /// FIPS mode changed.
    Fips,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::File {
                path,
                removed: false,
            } => write!(f, "{path} changed"),
            Change::File {
                path,
                removed: true,
            } => write!(f, "{path} removed"),
            Change::Unit { name } => write!(f, "unit {name} changed"),
            Change::SshKeys => f.write_str("SSH keys of user core changed"),
            Change::PasswordHash => f.write_str("password hash of user core changed"),
            Change::KernelArguments => f.write_str("kernel arguments changed"),
            Change::KernelType { from, to } => write!(f, "kernel type changed ({from} -> {to})"),
            Change::Extensions => f.write_str("extensions changed"),
            Change::OsImage => f.write_str("OS image changed"),
            Change::Fips => f.write_str("FIPS mode changed"),
        }
    }
}

/// Which rule decided a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Rule {
    /// A file rule (the user's or the MCO's) with this path.
    File {
        /// The rule's path.
        path: String,
        /// Who wrote it.
        origin: RuleOrigin,
    },
    /// A unit rule.
    Unit {
        /// The rule's unit name.
        name: String,
        /// Who wrote it.
        origin: RuleOrigin,
    },
    /// The SSH key rule.
    SshKey {
        /// Who wrote it.
        origin: RuleOrigin,
    },
    /// No rule covers the change: the MCO's default, reboot.
    NoRule,
    /// The change always needs the same thing (kernel arguments, OS image...: reboot; the
    /// password hash: nothing).
    Fixed,
}

/// The decision for one change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// What changed.
    pub change: Change,
    /// What the node must do for it.
    pub actions: Vec<PolicyAction>,
    /// The rule that said so.
    pub rule: Rule,
    /// The decision in words: `reboot: /etc/chrony.conf changed and no policy covers it
    /// (default: reboot)`.
    pub reason: String,
}

/// A step of a disruption that needs no reboot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type")]
pub enum ServiceStep {
    /// Drain the node. Always first; performed before the plan's actions are applied.
    Drain,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// `systemctl reload UNIT`.
    Reload {
        /// Unit.
        unit: String,
    },
    /// `systemctl restart UNIT`.
    Restart {
        /// Unit.
        unit: String,
    },
}

impl fmt::Display for ServiceStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceStep::Drain => f.write_str("drain"),
            ServiceStep::DaemonReload => f.write_str("daemon-reload"),
            ServiceStep::Reload { unit } => write!(f, "reload {unit}"),
            ServiceStep::Restart { unit } => write!(f, "restart {unit}"),
        }
    }
}

/// What the node must do in the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum Outcome {
    /// Nothing.
    None,
    /// Service steps, in order (a `Drain` is first and happens before the actions are applied;
    /// the other steps run after them).
    Services {
        /// Steps.
        steps: Vec<ServiceStep>,
    },
    /// Drain, apply, reboot.
    Reboot,
}

/// The disruption of a plan: the outcome and the decision for every change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disruption {
    /// What the node must do.
    pub outcome: Outcome,
    /// One decision per change, in plan order.
    pub decisions: Vec<Decision>,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            outcome: Outcome::None,
            decisions: Vec::new(),
        }
    }
}

impl Disruption {
    /// True when the node must reboot.
    pub fn reboot(&self) -> bool {
        self.outcome == Outcome::Reboot
    }

    /// True when the node must be drained before the actions are applied (always before a
    /// reboot).
    pub fn drain(&self) -> bool {
        match &self.outcome {
            Outcome::None => false,
            Outcome::Reboot => true,
            Outcome::Services { steps } => steps.contains(&ServiceStep::Drain),
        }
    }

    /// The decisions that ask for a reboot.
    pub fn reboot_reasons(&self) -> impl Iterator<Item = &Decision> {
        self.decisions
            .iter()
            .filter(|d| d.actions.contains(&PolicyAction::Reboot))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::None => f.write_str("none"),
            Outcome::Reboot => f.write_str("reboot"),
            Outcome::Services { steps } => {
                let parts: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
                f.write_str(&parts.join(", "))
            }
        }
    }
}

impl fmt::Display for Disruption {
    /// `disruption: reboot` and one indented line per decision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "disruption: {}", self.outcome)?;
        for d in &self.decisions {
            writeln!(f, "  - {}", d.reason)?;
        }
        Ok(())
    }
}

/// `none`, `reboot`, `reload crio.service, restart kubelet.service`...
pub fn describe_actions(actions: &[PolicyAction]) -> String {
    if actions.is_empty() {
        return "none".to_string();
    }
    let parts: Vec<String> = actions
        .iter()
        .map(|a| match a {
            PolicyAction::None => "none".to_string(),
            PolicyAction::DaemonReload => "daemon-reload".to_string(),
            PolicyAction::Reload { service } => format!("reload {service}"),
            PolicyAction::Restart { service } => format!("restart {service}"),
            PolicyAction::Drain => "drain".to_string(),
            PolicyAction::Special => format!("drain and reload {CRIO}"),
            PolicyAction::Reboot => "reboot".to_string(),
        })
        .collect();
    parts.join(", ")
}

fn origin_words(origin: RuleOrigin) -> &'static str {
    match origin {
        RuleOrigin::User => "user policy",
        RuleOrigin::McoDefault => "MCO default policy",
    }
}

/// Decides one change.
fn decide(change: &Change, index: &RuleIndex<'_>) -> Decision {
    let policies = index.policies;
    let reboot = || vec![PolicyAction::Reboot];
    let (actions, rule, reason) = match change {
        Change::File { path, .. } => match index.file_rule(path) {
            Some(r) => {
                let why = if normalize_rule_path(&r.path) == path {
                    origin_words(r.origin).to_string()
                } else {
                    format!("{} for {}", origin_words(r.origin), r.path)
                };
                let extra = if r.actions.contains(&PolicyAction::Special) {
                    "; hearth cannot tell a registries.conf change the MCO applies without \
                     draining, so it drains"
                } else {
                    ""
                };
                (
                    r.actions.clone(),
                    Rule::File {
                        path: r.path.clone(),
                        origin: r.origin,
                    },
                    format!("{}: {change} ({why}{extra})", describe_actions(&r.actions)),
                )
            }
            None => (
                reboot(),
                Rule::NoRule,
                format!("reboot: {change} and no policy covers it (default: reboot)"),
            ),
        },
        Change::Unit { name } => match index.unit_rule(name) {
            Some(r) => (
                r.actions.clone(),
                Rule::Unit {
                    name: r.name.clone(),
                    origin: r.origin,
                },
                format!(
                    "{}: {change} ({})",
                    describe_actions(&r.actions),
                    origin_words(r.origin)
                ),
            ),
            None => (
                reboot(),
                Rule::NoRule,
                format!("reboot: {change} and no policy covers it (default: reboot)"),
            ),
        },
        Change::SshKeys => {
            let r = &policies.ssh_key;
            (
                r.actions.clone(),
                Rule::SshKey { origin: r.origin },
                format!(
                    "{}: {change} ({} for SSH keys)",
                    describe_actions(&r.actions),
                    origin_words(r.origin)
                ),
            )
        }
        Change::PasswordHash => (
            vec![PolicyAction::None],
            Rule::Fixed,
            format!("none: {change} (applied without disruption)"),
        ),
        Change::KernelArguments
        | Change::KernelType { .. }
        | Change::Extensions
        | Change::OsImage
        | Change::Fips => (
            reboot(),
            Rule::Fixed,
            format!("reboot: {change} (always needs a reboot)"),
        ),
    };
    Decision {
        change: change.clone(),
        actions,
        rule,
        reason,
    }
}

/// Decides every change with the MCO defaults merged with `user` rules, and combines the
/// decisions: any reboot makes the outcome [`Outcome::Reboot`]; otherwise the service steps of
/// every decision in order, without duplicates, with `Drain` first and `DaemonReload` next
/// (so that restarted units run their new unit files), and without a `Reload` of a unit that is
/// also restarted. `Special` (the MCO's handling of `/etc/containers/registries.conf`) becomes a
/// drain and a reload of `crio.service`: the MCO skips the drain for some registries.conf changes
/// (added digest-only mirrors), which hearth does not try to recognise.
pub fn evaluate(changes: &[Change], user: &DisruptionPolicies) -> Disruption {
    let policies = effective_policies(user);
    let index = RuleIndex::new(&policies);
    let decisions: Vec<Decision> = changes.iter().map(|c| decide(c, &index)).collect();
    let outcome = combine(&decisions);
    Disruption { outcome, decisions }
}

fn combine(decisions: &[Decision]) -> Outcome {
    let all = || decisions.iter().flat_map(|d| d.actions.iter());
    if all().any(|a| *a == PolicyAction::Reboot) {
        return Outcome::Reboot;
    }
    let mut drain = false;
    let mut daemon_reload = false;
    let mut rest: Vec<ServiceStep> = Vec::new();
    let mut seen: HashSet<ServiceStep> = HashSet::new();
    for action in all() {
        let step = match action {
            // `Reboot` cannot occur here: it returned above.
            PolicyAction::None | PolicyAction::Reboot => continue,
            PolicyAction::Drain => {
                drain = true;
                continue;
            }
            PolicyAction::DaemonReload => {
                daemon_reload = true;
                continue;
            }
            PolicyAction::Special => {
                drain = true;
                ServiceStep::Reload {
                    unit: CRIO.to_string(),
                }
            }
            PolicyAction::Reload { service } => ServiceStep::Reload {
                unit: service.clone(),
            },
            PolicyAction::Restart { service } => ServiceStep::Restart {
                unit: service.clone(),
            },
        };
        if seen.insert(step.clone()) {
            rest.push(step);
        }
    }
    let restarted: HashSet<String> = rest
        .iter()
        .filter_map(|s| match s {
            ServiceStep::Restart { unit } => Some(unit.clone()),
            _ => None,
        })
        .collect();
    rest.retain(|s| !matches!(s, ServiceStep::Reload { unit } if restarted.contains(unit)));
    let mut steps = Vec::new();
    if drain {
        steps.push(ServiceStep::Drain);
    }
    if daemon_reload {
        steps.push(ServiceStep::DaemonReload);
    }
    steps.extend(rest);
    if steps.is_empty() {
        Outcome::None
    } else {
        Outcome::Services { steps }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, actions: Vec<PolicyAction>) -> FilePolicy {
        FilePolicy {
            path: path.into(),
            actions,
        }
    }

    #[test]
    fn rule_paths_match_at_slash_boundaries() {
        assert_eq!(rule_match_len("/etc/foo", "/etc/foo"), Some(8));
        assert_eq!(rule_match_len("/etc/foo", "/etc/foo/bar"), Some(8));
        assert_eq!(rule_match_len("/etc/foo/", "/etc/foo/bar"), Some(8));
        assert_eq!(rule_match_len("/etc/foo", "/etc/foobar"), None);
        assert_eq!(rule_match_len("/etc/foo/bar", "/etc/foo"), None);
        assert_eq!(rule_match_len("/", "/etc/x"), Some(1));
        assert_eq!(rule_match_len("", "/etc/x"), None);
    }

    #[test]
    fn the_rule_index_answers_as_the_rules_do() {
        let user = DisruptionPolicies {
            files: vec![
                file("/", vec![PolicyAction::Drain]),
                file("/etc/containers", vec![PolicyAction::None]),
                file("/etc/foo/", vec![PolicyAction::None]),
                file("/etc/foo", vec![PolicyAction::DaemonReload]),
                file("relative/x", vec![PolicyAction::None]),
            ],
            units: vec![UnitPolicy {
                name: "a.service".into(),
                actions: vec![PolicyAction::None],
            }],
            ..Default::default()
        };
        for policies in [
            effective_policies(&user),
            effective_policies(&Default::default()),
        ] {
            let index = RuleIndex::new(&policies);
            for path in [
                "/etc/containers/policy.json",
                "/etc/containers/storage.conf",
                "/etc/containers",
                "/etc/foo",
                "/etc/foo/bar/baz",
                "/etc/foobar",
                "/usr/local/bin/load-registry-image.sh",
                "/x",
                "relative/x",
                "",
            ] {
                assert_eq!(index.file_rule(path), policies.file_rule(path), "{path}");
            }
            for unit in ["a.service", "iri-registry.service", "b.service"] {
                assert_eq!(index.unit_rule(unit), policies.unit_rule(unit), "{unit}");
            }
        }
    }

    #[test]
    fn user_rule_replaces_default_of_same_path_in_place() {
        let user = DisruptionPolicies {
            files: vec![file(
                "/etc/containers/policy.json/",
                vec![PolicyAction::None],
            )],
            ..Default::default()
        };
        let eff = effective_policies(&user);
        assert_eq!(eff.files.len(), MCO_DEFAULT_FILES.len());
        let r = eff.file_rule("/etc/containers/policy.json").unwrap();
        assert_eq!(r.origin, RuleOrigin::User);
        assert_eq!(r.actions, vec![PolicyAction::None]);
        assert_eq!(eff.files[2].origin, RuleOrigin::User);
    }

    #[test]
    fn more_specific_default_beats_user_directory_rule_as_in_the_mco() {
        let user = DisruptionPolicies {
            files: vec![file("/etc/containers", vec![PolicyAction::None])],
            ..Default::default()
        };
        let eff = effective_policies(&user);
        let r = eff.file_rule("/etc/containers/policy.json").unwrap();
        assert_eq!(r.origin, RuleOrigin::McoDefault);
        let r = eff.file_rule("/etc/containers/storage.conf").unwrap();
        assert_eq!(r.origin, RuleOrigin::User);
    }

    #[test]
    fn empty_user_ssh_rule_keeps_default() {
        let user = DisruptionPolicies {
            ssh_key: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(
            effective_policies(&user).ssh_key.origin,
            RuleOrigin::McoDefault
        );
    }

    #[test]
    fn combine_orders_drain_then_daemon_reload_and_drops_subsumed_reload() {
        let d = |actions: Vec<PolicyAction>| Decision {
            change: Change::OsImage,
            actions,
            rule: Rule::Fixed,
            reason: String::new(),
        };
        let out = combine(&[
            d(vec![PolicyAction::Reload {
                service: "crio.service".into(),
            }]),
            d(vec![PolicyAction::None]),
            d(vec![
                PolicyAction::DaemonReload,
                PolicyAction::Restart {
                    service: "crio.service".into(),
                },
            ]),
            d(vec![PolicyAction::Special]),
        ]);
        assert_eq!(
            out,
            Outcome::Services {
                steps: vec![
                    ServiceStep::Drain,
                    ServiceStep::DaemonReload,
                    ServiceStep::Restart {
                        unit: "crio.service".into()
                    },
                ]
            }
        );
        assert_eq!(combine(&[d(vec![PolicyAction::None])]), Outcome::None);
        assert_eq!(
            combine(&[d(vec![PolicyAction::Drain]), d(vec![PolicyAction::Reboot])]),
            Outcome::Reboot
        );
    }

    #[test]
    fn validation_reports_every_problem() {
        let p = DisruptionPolicies {
            files: vec![
                file("etc/x", vec![PolicyAction::Reboot, PolicyAction::Drain]),
                file("/etc/y", vec![PolicyAction::Special]),
                file("/etc/y/", vec![PolicyAction::None]),
            ],
            units: vec![UnitPolicy {
                name: "crio".into(),
                actions: vec![PolicyAction::Restart {
                    service: "bad name.service".into(),
                }],
            }],
            ssh_key: Some(vec![PolicyAction::None, PolicyAction::Drain]),
        };
        let errors = validate_policies(&p);
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 7, "{text:#?}");
        assert!(
            matches!(&errors[0], PolicyError::RelativePath { field, .. } if field == "spec.nodeDisruptionPolicy.files[0].path")
        );
        assert!(matches!(
            &errors[1],
            PolicyError::NotStandalone {
                action: "Reboot",
                ..
            }
        ));
        assert!(
            matches!(&errors[2], PolicyError::Special { field } if field == "spec.nodeDisruptionPolicy.files[1].actions[0]")
        );
        assert!(
            matches!(&errors[3], PolicyError::Duplicate { first, .. } if first == "spec.nodeDisruptionPolicy.files[1].path")
        );
        assert!(matches!(&errors[4], PolicyError::UnitName { name, .. } if name == "crio"));
        assert!(
            matches!(&errors[5], PolicyError::UnitName { field, .. } if field.ends_with("units[0].actions[0].serviceName"))
        );
        assert!(
            matches!(&errors[6], PolicyError::NotStandalone { action: "None", field } if field.ends_with("sshkey.actions"))
        );
        assert!(validate_policies(&mco_defaults_without_special()).is_empty());
    }

    fn mco_defaults_without_special() -> DisruptionPolicies {
        let mut d = mco_defaults();
        d.files
            .retain(|f| !f.actions.contains(&PolicyAction::Special));
        d
    }

    #[test]
    fn unit_names() {
        assert!(is_valid_unit_name("crio.service"));
        assert!(is_valid_unit_name("dev-disk-by\\x2duuid.swap"));
        // The MCO's API refuses template instances too.
        assert!(!is_valid_unit_name("getty@tty1.service"));
        assert!(is_valid_unit_name("var-lib.mount"));
        assert!(!is_valid_unit_name(".service"));
        assert!(!is_valid_unit_name("crio.conf"));
        assert!(!is_valid_unit_name("a b.service"));
    }
}
