//! `hearth-server`: the fleet's config server and rollout controller.
//!
//! It will store MachineConfigs, pools and nodes in an embedded crash-safe store (with an etcd
//! backend later), render pools with `hearth-config`, serve Ignition to first-booting machines
//! and desired configs to agents over authenticated TLS, and roll changes out under
//! `maxUnavailable`, pauses and maintenance windows. It is built in the server issue; for now it
//! only fixes the crate's place in the workspace.
