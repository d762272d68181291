//! Planning: what the agent must do to take a node from one rendered config (`current`) to
//! another (`desired`), what that disrupts, and what cannot be done on a running node.
//!
//! [`plan`] compares the two specs field by field and returns a [`Plan`]:
//!
//! * [`Plan::actions`]: the steps, in the order the agent runs them (see [`Action`] for the
//!   phases);
//! * [`Plan::disruption`]: what the node must do afterwards (nothing, service steps, or reboot),
//!   with a reason for every change (see [`crate::disruption`]);
//! * [`Plan::unreconcilable`]: every changed field the MCO cannot apply on day 2. Such a plan still
//!   lists its actions, but [`Plan::is_reconcilable`] is false and the agent must not run it.
//!
//! The plan is pure data: it carries everything the agent needs (a file write carries the whole
//! Ignition file entry) and serialises to JSON for `hearth plan -o json`. See `docs/plan.md`.
//!
//! Rooms (imports run one way, down this list; `mod.rs` only re-exports):
//! - `compare`: [`plan`] itself: files, the core user, the OS, and the changes disruption is
//!   decided for.
//! - `units`: systemd units and drop-ins: files, masks, enablement.
//! - `unreconcilable`: what a running node cannot take (users, groups, disks, first-boot fields).
//! - `output`: what [`plan`] returns ([`Plan`], [`Unreconcilable`]) and how it is written.
//! - `action`: the steps ([`Action`]), their order, and how each is written for people.
//! - `entries`: Ignition entries compared by key (the last of a name wins), contents, masks.

mod action;
mod compare;
mod entries;
mod output;
mod units;
mod unreconcilable;

pub use crate::kargs::{
    apply_kernel_argument_ops, diff_kernel_arguments, split_kernel_arguments, KernelArgumentsDiff,
};
pub use action::{Action, CORE_USER, SYSTEMD_UNIT_DIR};
pub use compare::plan;
pub use output::{Plan, Unreconcilable, UnreconcilableError};

#[cfg(test)]
mod tests;
