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
//!
//! Rooms (imports run one way, down this list; `mod.rs` only re-exports):
//! - `validate`: checks of user policies as the MCO's API checks them ([`validate_policies`]).
//! - `evaluate`: deciding each change and combining the decisions ([`evaluate`]).
//! - `outcome`: what is decided: changes, rules, decisions, service steps, the outcome.
//! - `rules`: the effective rule set ([`effective_policies`]), path matching, the lookup index.
//! - `defaults`: the MCO's default rules, as data.
//!
//! [`DisruptionPolicies`]: crate::model::DisruptionPolicies

mod defaults;
mod evaluate;
mod outcome;
mod rules;
mod validate;

pub use defaults::{
    mco_defaults, DefaultAction, MCO_DEFAULTS_SOURCE, MCO_DEFAULT_FILES, MCO_DEFAULT_SSH_KEY,
    MCO_DEFAULT_UNITS,
};
pub use evaluate::evaluate;
pub use outcome::{describe_actions, Change, Decision, Disruption, Outcome, Rule, ServiceStep};
pub use rules::{
    effective_policies, rule_match_len, EffectivePolicies, FileRule, RuleOrigin, SshKeyRule,
    UnitRule,
};
pub use validate::{is_valid_unit_name, validate_policies, PolicyError};

#[cfg(test)]
mod tests;
