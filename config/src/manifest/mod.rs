//! Reading manifests as `oc apply -f` reads them: YAML (several documents, `kind: List`) or
//! JSON, holding MachineConfigs, MachineConfigPools, Nodes (a stand-in with name and labels for
//! offline rendering) and the MCO's `MachineConfiguration` (for node-disruption policies).
//!
//! Every problem becomes a [`Diagnostic`] naming the file, the line, the object and the field.
//! An object with an error is left out of the result; the others are kept, so one bad manifest
//! never hides the problems of the next one.
//!
//! Rooms (imports run one way, down this list; `mod.rs` only re-exports):
//! - `object`: one document: its kind, `kind: List`, unsubstituted Template parameters.
//! - `machine_config`: MachineConfigs: the spec fields and the Ignition config by its version.
//! - `pool`: MachineConfigPools: selectors, `maxUnavailable`, maintenance windows.
//! - `policy`: the MCO's `MachineConfiguration`: node-disruption policies.
//! - `meta`: `metadata` (names, labels, annotations) and Nodes, which are nothing else.
//! - `read`: the entry points ([`read_str`], [`read_machine_config`]), their size limits, what
//!   was read ([`Manifests`]) and the reader that carries one file's state. `object` and the
//!   kind files add methods to that reader (`impl Reader` spans them); they import it, it does
//!   not import them.
//! - `paths`: field paths (`spec.config.storage.files[2].path`) to nodes and lines.
//! - `validation`: what an unknown field is ([`FieldValidation`]: an error, a warning, nothing).
//!
//! [`Diagnostic`]: crate::diag::Diagnostic

mod machine_config;
mod meta;
mod object;
mod paths;
mod policy;
mod pool;
mod read;
mod validation;

pub use meta::check_object_name;
pub use paths::node_at;
pub use read::{
    read_machine_config, read_str, read_str_with, Manifests, MAX_MANIFEST_BYTES, MAX_RENDERED_BYTES,
};
pub use validation::FieldValidation;

#[cfg(test)]
mod tests;
