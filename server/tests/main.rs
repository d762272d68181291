//! hearth-server's integration tests in one binary, a module per file: one link
//! instead of one per file, the most of a fresh build's test time saved. Files that must run
//! alone are test targets of their own (Cargo.toml, `autotests = false`).

mod common;
#[path = "../src/store/etcd/test_cluster.rs"]
mod test_cluster;

mod actions_e2e;
mod agent_e2e;
mod client_cert;
mod dashboard;
mod etcd;
mod etcd_partition;
mod etcd_server;
mod failover;
mod firstboot_ignition;
mod fleet;
mod fleet_replicas;
mod group_commit;
mod hatches_e2e;
mod hostile_manifests;
mod kube_controller;
mod ostree_repo;
mod restart;
mod trial_e2e;
mod unit;
mod wire;
