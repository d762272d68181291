//! `hearth-agent run --kubernetes`: the agent following a Kubernetes control plane, as the
//! MCO's daemon does. Everything that knows Kubernetes is here; the rest of the agent gets a
//! [`crate::journal::NamedConfig`] (parsed by [`crate::source`]) and gives back an outcome.
//!
//! - [`annotations`]: the Node annotations (`desiredConfig` in; `currentConfig`, `state`,
//!   `reason` out) and what they should say, from the journal (pure).
//! - [`mcn`]: the node's MachineConfigNode status (pure).
//! - [`policy`]: the cluster's node-disruption policy (`MachineConfiguration` `cluster`, pure).
//! - [`client`]: the calls to the API server, bounded in time and size.
//! - `run`: the loop (`Daemon::follow_kubernetes`).
//!
//! See `docs/kubernetes.md` (`## The agent`).

pub mod annotations;
pub mod client;
pub mod mcn;
pub mod policy;
mod run;

pub use client::Kube;
