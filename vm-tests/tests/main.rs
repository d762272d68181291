//! the test-host harness' own tests in one binary, a module per file: one link
//! instead of one per file, the most of a fresh build's test time saved. Files that must run
//! alone are test targets of their own (Cargo.toml, `autotests = false`).

mod hosts;
mod kube_cluster;
mod kube_crds;
mod ostree_harness;
