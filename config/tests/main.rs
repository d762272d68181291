//! hearth-config's integration tests in one binary, a module per file: one link
//! instead of one per file, the most of a fresh build's test time saved. Files that must run
//! alone are test targets of their own (Cargo.toml, `autotests = false`).

#[path = "mco_support/mod.rs"]
mod mco_support;
#[path = "plan_support.rs"]
mod plan_support;

mod corpus;
mod hostile_input;
mod mco_daemon_test;
mod mco_helpers_test;
mod mco_modes_kargs;
mod mco_reconcile_test;
mod mco_render_controller_test;
mod mco_update_test;
mod plan_actions;
mod plan_disruption;
mod plan_kargs;
mod plan_props;
mod plan_unreconcilable;
mod run_once_actions;
