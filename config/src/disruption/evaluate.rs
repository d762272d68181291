//! Deciding: each change against the effective rules ([`evaluate`]), then the decisions
//! combined into one outcome (reboot wins; otherwise drain, daemon-reload, then the unit steps).

use super::defaults::CRIO;
use super::outcome::{describe_actions, Change, Decision, Disruption, Outcome, Rule, ServiceStep};
use super::rules::{effective_policies, normalize_rule_path, RuleIndex, RuleOrigin};
use crate::model::{DisruptionPolicies, PolicyAction};
use std::collections::HashSet;

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
pub(super) fn combine(decisions: &[Decision]) -> Outcome {
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
