//! What [`plan`](crate::plan::plan) returns: the [`Plan`] (actions, disruption, unreconcilable
//! fields), the [`Unreconcilable`] fields and the error that lists them, and the plan written
//! for people.

use super::action::{plural, Action};
use crate::disruption::Disruption;
use serde::Serialize;
use std::fmt;

/// A changed field that cannot be applied to a running node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreconcilable {
    /// Field path in the MachineConfig (`spec.config.passwd.users[1]`), with the index in the
    /// desired config, or in the current one for removed entries.
    pub path: String,
    /// What changed and what to do instead.
    pub reason: String,
}

impl fmt::Display for Unreconcilable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// A plan that must not be applied: every field the node cannot take on day 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the node cannot be updated in place ({} unreconcilable {}): {}",
    .fields.len(),
    if .fields.len() == 1 { "change" } else { "changes" },
    .fields.iter().map(|u| u.to_string()).collect::<Vec<_>>().join("; "))]
pub struct UnreconcilableError {
    /// Every offending field.
    pub fields: Vec<Unreconcilable>,
}

/// What a node must do to go from one rendered config to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The steps, in execution order (see [`Action`]).
    pub actions: Vec<Action>,
    /// What the node must do once the actions are applied, and why.
    pub disruption: Disruption,
    /// Changed fields that cannot be applied on day 2 (empty for a plan the agent may run).
    pub unreconcilable: Vec<Unreconcilable>,
}

impl Plan {
    /// True when nothing changes: no action, no disruption decision, nothing unreconcilable.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
            && self.unreconcilable.is_empty()
            && self.disruption.decisions.is_empty()
    }

    /// True when the agent may apply the plan.
    pub fn is_reconcilable(&self) -> bool {
        self.unreconcilable.is_empty()
    }

    /// `Ok` when the agent may apply the plan, else every unreconcilable field.
    pub fn check_reconcilable(&self) -> Result<(), UnreconcilableError> {
        if self.unreconcilable.is_empty() {
            Ok(())
        } else {
            Err(UnreconcilableError {
                fields: self.unreconcilable.clone(),
            })
        }
    }

    /// The plan for people (the [`Display`](fmt::Display) form).
    pub fn summary(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Plan {
    /// One line per action, then the disruption with a reason per change, then the
    /// unreconcilable fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "no changes");
        }
        if self.actions.is_empty() {
            writeln!(f, "actions: none")?;
        } else {
            writeln!(f, "actions:")?;
            let width = self.actions.len().to_string().len();
            for (i, a) in self.actions.iter().enumerate() {
                writeln!(f, "  {:>width$}. {a}", i + 1)?;
            }
        }
        write!(f, "{}", self.disruption)?;
        if !self.unreconcilable.is_empty() {
            writeln!(
                f,
                "unreconcilable: the node cannot be updated in place ({}):",
                plural(self.unreconcilable.len(), "field", "fields")
            )?;
            for u in &self.unreconcilable {
                writeln!(f, "  - {u}")?;
            }
        }
        Ok(())
    }
}
