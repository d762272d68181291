//! hearth-agent's integration tests in one binary, a module per file: one link
//! instead of one per file, the most of a fresh build's test time saved. Files that must run
//! alone are test targets of their own (Cargo.toml, `autotests = false`).

mod common;

mod crash;
mod drift;
mod drift_policy;
mod firstboot_adopt;
mod host_apply;
mod journal_upgrade;
mod kube_e2e;
mod kube_follow;
mod links_libc_only;
mod missing_unit;
mod one_keeper;
mod os_host;
mod own_state;
mod plain_host;
mod plain_output;
mod pool_move;
mod recheck;
mod requests;
mod run_once_actions;
mod step_failure;
mod syscall_counts;
mod trial;
mod watchdog;
