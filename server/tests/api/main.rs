//! The server over real TLS: first start, apply, validation, enrollment, long-polls,
//! authorization, first-boot Ignition, status reports and pool counts, rollouts, reboot slots
//! and garbage collection. Each test starts its own server in-process on 127.0.0.1:0.
//!
//! One test binary, one module per concern: `manifests` (first start, apply, validation,
//! deletion), `access` (enrollment, long-polls, authorization, first boot), `rollout` (status
//! reports, pool counts, rollouts, reboot slots, FleetLock, garbage collection), `windows`
//! (maintenance windows), `holds` (an admin's pins and exclusions of nodes), `rollback` (a
//! pool back to its previous rendered config), `requests` (an admin's force and restore-file
//! requests to a node), `actions` (run-once actions: in the desired config, reported runs in
//! the node view), `reports` (a node's whole report, read back from the store to be shown), `trial` (the pool's trial policy in the desired answer), `firstboot_node` and
//! `firstboot_cache` (kept first-boot answers never outlive their inputs).

#[path = "../common/mod.rs"]
mod common;

mod access;
mod actions;
mod events;
mod firstboot_cache;
mod firstboot_node;
mod holds;
mod image_tags;
mod manifests;
mod reports;
mod requests;
mod rollback;
mod rollout;
mod trial;
mod windows;
