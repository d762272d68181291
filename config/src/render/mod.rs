//! Pools and rendering: which pool a node belongs to, which MachineConfigs a pool takes, and how
//! they merge into one rendered MachineConfig with a content-addressed name.
//!
//! The rules follow the MCO (see `docs/config-model.md`):
//! - a node's pool is chosen by the pools' `nodeSelector`s; `master` wins over anything else, a
//!   custom pool beats `worker`, two matching custom pools are an error;
//! - a pool takes the MachineConfigs its `machineConfigSelector` selects; they merge in order:
//!   `worker`-role configs by name, then all others by name, so a custom pool that selects
//!   `worker` and its own role overrides the worker configs it inherits;
//! - Ignition content merges as Ignition merges configs (files and links by path, units and
//!   drop-ins and users by name, field by field, later wins), except that a file's `contents` is
//!   replaced as a whole (never a new `source` with a stale `compression` or hash);
//! - kernel arguments concatenate in order (duplicates kept), `fips` is OR-ed, `kernelType` is the
//!   last non-default one, `osImageURL` the last non-empty one, extensions are a union;
//! - per-node overlays (configs labelled [`NODE_LABEL`](crate::model::NODE_LABEL)) are never part of a pool; they merge
//!   after the pool's configs for their node only.
//!
//! Rooms (imports run one way, down this list; `mod.rs` only re-exports):
//! - `rendered`: rendering a pool or a node into a named, annotated rendered MachineConfig.
//! - `pools`: which pool a node belongs to, which configs a pool takes, a node's overlays.
//! - `merge`: MachineConfigs merged into one spec, and the merged config checked.
//! - `value_merge`: Ignition's merge of one JSON value into another, with its list indexes.
//! - `hash`: the content address ([`spec_hash`]): canonical JSON and its sha256.
//! - `error`: [`RenderError`].

mod error;
mod hash;
mod merge;
mod pools;
mod rendered;
mod value_merge;

pub use error::RenderError;
pub use hash::{canonical_json, spec_hash};
pub use merge::merge;
pub use pools::{configs_for_pool, overlays_for_node, pool_for_node, with_builtin_pools};
pub use rendered::{render_node, render_pool, RenderedNode};

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;
