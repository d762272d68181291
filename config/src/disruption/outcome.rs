//! What is decided: the changes of a plan that may disrupt the node ([`Change`]), the rule
//! that decided each ([`Rule`], [`Decision`]), the steps short of a reboot ([`ServiceStep`]) and
//! the outcome ([`Outcome`], [`Disruption`]), with how each is written for people.

use super::defaults::CRIO;
use super::rules::RuleOrigin;
use crate::model::{KernelType, PolicyAction};
use serde::Serialize;
use std::fmt;

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
