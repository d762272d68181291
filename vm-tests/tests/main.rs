//! The test-host harness' own tests (hosts, Kubernetes, ostree) in one binary named `harness`,
//! a module per file: one link instead of one per file. The QEMU tier, `vm_*`, runs alone
//! (Cargo.toml, `autotests = false`), so `--test 'vm_*'` names only it.

mod hosts;
mod kube_cluster;
mod kube_crds;
mod ostree_harness;
