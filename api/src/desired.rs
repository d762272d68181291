//! The desired config: `GET /api/v1/agent/desired`, long-polled by the agent.

use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// `GET /api/v1/agent/desired` response (200; 304 when the agent's `known` config is still the
/// desired one after `wait` seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DesiredConfig {
    /// The rendered config's name (`rendered-<pool>-<hash>`).
    pub name: String,
    /// Its spec, in hearth's internal model (Ignition 3.5 plus the MachineConfig fields).
    #[schemars(schema_with = "spec_schema")]
    pub spec: MachineConfigSpec,
    /// The node-disruption policies in force.
    #[serde(default)]
    #[schemars(schema_with = "policies_schema")]
    pub policies: DisruptionPolicies,
}

/// `hearth_config::model::MachineConfigSpec` is read and checked by hearth-config (which has
/// no JSON Schema derive); the schema names it and leaves its shape to that reader.
fn spec_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "A rendered MachineConfig spec in hearth's model (hearth_config::model::MachineConfigSpec): config (Ignition 3.5), kernelArguments, kernelType, extensions, fips, osImageURL, ...",
    })
}

fn policies_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Node-disruption policies (hearth_config::model::DisruptionPolicies): files, units, sshKey with their actions.",
    })
}
