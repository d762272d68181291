//! the `hearth` CLI's integration tests in one binary, a module per file: one link
//! instead of one per file, the most of a fresh build's test time saved. Files that must run
//! alone are test targets of their own (Cargo.toml, `autotests = false`).

mod common;

mod conventions;
mod describe_actions;
mod failover;
mod offline;
mod pages;
mod remote;
mod state;
