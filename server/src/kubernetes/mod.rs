//! Kubernetes mode: hearth's controller on a Kubernetes API server instead of its own store.
//!
//! MachineConfigs, MachineConfigPools and the node-disruption `MachineConfiguration` are
//! custom resources (`config/kubernetes/crds/`), nodes are Kubernetes `Node`s, and the agents
//! report through the MCO's node annotations (`currentConfig`, `state`, `reason`). The
//! controller reads them into a [`crate::fleet::Fleet`] with the reader `hearth apply` uses,
//! runs the same reconcile as the embedded server ([`crate::controller::reconcile`]: render,
//! rollout under `maxUnavailable`, pause and maintenance windows, garbage collection of unused
//! renders), and writes back what changed: rendered MachineConfigs
//! (`rendered-<pool>-<hash>`, owned by their pool, never deleted while a pool or node refers to
//! them), each pool's target (`spec.configuration`) and status (the MCO's counts and
//! conditions), and each node's `desiredConfig` annotation.
//!
//! Files: `annotations.rs` (the names on nodes and pools), `resources.rs` (the API's resources),
//! `observe.rs` (pure: objects to fleet, fleet to writes), `decide.rs` (pure: one decision,
//! keeping renders and counts from one to the next), `drain.rs` and `drain_run.rs` (draining a
//! node before a disruptive update), `events.rs` (Kubernetes Events), `lease.rs` (one
//! controller at a time), `run.rs` (the client, the watches and the loop).

mod annotations;
mod decide;
mod drain;
mod drain_run;
mod events;
mod lease;
mod observe;
mod resources;
mod run;

pub use annotations::{CURRENT_CONFIG, DESIRED_CONFIG, REASON, STATE};
pub use decide::{Decider, Decision};
pub use lease::{check_name, LEASE_DURATION};
pub use observe::{is_rendered, Observed, Read, Writes};
pub use resources::{configurations, machine_configs, nodes, pools};
pub use run::{run, KubeOptions, TICK};

#[cfg(test)]
mod tests;
