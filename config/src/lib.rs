//! `hearth-config`: the MachineConfig model, pure (no I/O, no global state, but for one read:
//! a maintenance window's named time zone comes from the system's zoneinfo, see [`window`],
//! through `jiff`'s cached database). Everything a
//! manifest controls is bounded (size, depth, alias expansion, decoded contents) and no work
//! grows faster than `n log n` in it (`config/tests/growth.rs`).
//!
//! Reading, in order:
//! - [`node`]: YAML/JSON text into a tree that remembers lines (alias and merge keys, limits).
//! - [`de`]: that tree into typed structures, with the field path and line of every error.
//! - [`manifest`]: manifests as `oc apply -f` reads them (documents, `kind: List`, kinds):
//!   `read` (entry points, limits), `object` (one document), a file per kind (`meta`,
//!   `machine_config`, `pool`, `policy`), `paths` (field paths to lines).
//! - [`validate`]: what the shape cannot say (paths, contents, modes, units, users).
//! - [`finding`]: one problem with one field (error or warning), as every rule set reports it.
//! - [`unit_name`]: systemd's unit-name grammar (also used by hostops' offline enablement).
//! - [`dataurl`]: `data:` URLs (base64, percent-encoded, gzip), decoded within a budget.
//! - [`diag`]: diagnostics with file, line, object and field.
//!
//! The model and what is done with it:
//! - [`model`]: MachineConfigs, pools, nodes, node-disruption policies.
//! - [`ignition`]: Ignition 2.2–3.5: the internal model, the 2.x wire, translations both ways.
//! - [`render`]: pools, which configs a pool takes, the merge into `rendered-<pool>-<hash>`:
//!   `rendered`, `pools`, `merge`, `value_merge` (Ignition's merge rules), `hash`, `error`.
//! - [`plan`]: what a node does to go from one rendered config to another: `compare`,
//!   `units`, `unreconcilable`, `output` (the `Plan`), `action`, `entries`.
//! - [`kargs`]: kernel-argument entries, the kernel's quoting rules, the diff the agent applies.
//! - [`disruption`]: what a plan disrupts, with the MCO's node-disruption policies:
//!   `validate`, `evaluate`, `outcome`, `rules`, `defaults`.
//! - [`mco`]: rules taken from the MCO that no Ignition field implies (force file, `overwrite`).
//! - [`own`]: what the agent owns on a node (state, binaries, unit), which no config may write.
//! - [`window`]: maintenance windows.
//! - [`trial`]: changes on trial ("commit confirmed"): which, and the deadline.
//! - [`time`]: RFC 3339 times, shared by the agent and the server.
//!
//! The directory modules (`ignition`, `manifest`, `render`, `plan`, `disruption`) hold one
//! concept per file and re-export what callers use from `mod.rs`, so callers name
//! `hearth_config::<module>::<item>` whichever file holds it; imports between the files of a
//! module run one way (see each `mod.rs` and `docs/architecture.md`).
//!
//! See `docs/config-model.md` and `docs/plan.md`.
pub mod actions;
pub mod container;
pub mod dataurl;
pub mod de;
pub mod diag;
pub mod digest;
pub mod disruption;
pub mod finding;
mod gzip;
pub mod ignition;
pub mod kargs;
pub mod manifest;
pub mod mco;
pub mod model;
pub mod node;
pub mod own;
pub mod paths;
pub mod plan;
pub mod render;
pub mod time;
pub mod trial;
pub mod unit_name;
pub mod validate;
pub mod window;
