//! The desired config: `GET /api/v1/agent/desired`, long-polled by the agent.

use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use hearth_config::trial::TrialPolicy;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// The header of a 200 answer that names the rendered config it carries.
pub const DESIRED_HEADER: &str = "x-hearth-desired";

/// The query parameter (`defer=true`) by which an agent says it holds its status reports when
/// an answer asks it to ([`REPORT_AFTER_HEADER`]). An agent that does not send it is paced the
/// older way: its answer waits until the server has room for its report.
pub const DEFER_PARAM: &str = "defer";

/// The header of a 200 answer, to an agent that sent [`DEFER_PARAM`], during an apply to many
/// nodes at once: milliseconds (a decimal integer) the agent waits before its next status
/// report. The agent applies the config at once; only its reports wait, so that a burst of
/// answers does not come back as a burst of reports. Absent: report at once.
pub const REPORT_AFTER_HEADER: &str = "x-hearth-report-after";

/// The longest a server asks an agent to hold its reports ([`REPORT_AFTER_HEADER`]); an agent
/// holds them no longer, whatever the header says.
pub const MAX_REPORT_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// A [`REPORT_AFTER_HEADER`] value: whole milliseconds, at least 1, at most
/// [`MAX_REPORT_AFTER`] (a longer wait is written as that).
pub fn report_after_value(after: std::time::Duration) -> u64 {
    let ms = after.min(MAX_REPORT_AFTER).as_millis();
    u64::try_from(ms).unwrap_or(u64::MAX).max(1)
}

/// The wait a [`REPORT_AFTER_HEADER`] value asks for: at most [`MAX_REPORT_AFTER`] whatever it
/// says; `None` for zero or anything but a decimal integer (no wait).
pub fn report_after(value: &str) -> Option<std::time::Duration> {
    let ms: u64 = value.trim().parse().ok()?;
    (ms > 0).then(|| std::time::Duration::from_millis(ms).min(MAX_REPORT_AFTER))
}

/// `GET /api/v1/agent/desired` response (200; 304 when the agent's `known` config is still the
/// desired one after `wait` seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DesiredConfig {
    /// The rendered config's name (`rendered-<pool>-<hash>`).
    pub name: String,
    /// Its spec, in hearth's internal model (`hearth_config::model::MachineConfigSpec`): the
    /// Ignition config in spec 3.5, and the MachineConfig's own fields.
    #[schemars(schema_with = "spec_schema")]
    pub spec: MachineConfigSpec,
    /// The node-disruption policies in force (`hearth_config::model::DisruptionPolicies`, read
    /// from the MCO's `MachineConfiguration` objects).
    #[serde(default)]
    #[schemars(schema_with = "policies_schema")]
    pub policies: DisruptionPolicies,
    /// The admin's requests to this node it has not reported done (`hearth node force`,
    /// `restore-file`), oldest first; only sent to an agent that says which it did (the
    /// `done` query parameter).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<crate::request::NodeRequest>,
    /// The pool's trial policy (`hearth_config::trial::TrialPolicy`, from the pool's
    /// `hearth.io/trial` and `hearth.io/trial-seconds` annotations): which changes the agent
    /// applies on trial and its deadline. Absent: the agent applies nothing on trial (an older
    /// server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "trial_schema")]
    pub trial: Option<TrialPolicy>,
}

// hearth-config's model has no JSON Schema derive (it is read and checked by hearth-config's
// own manifest reader); these name its fields and leave the Ignition config to Ignition's spec.

fn spec_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "config": { "type": "object", "description": "An Ignition 3.5.0 config." },
            "kernelArguments": { "type": "array", "items": { "type": "string" } },
            "kernelType": { "enum": ["default", "realtime", "64k-pages"] },
            "fips": { "type": "boolean" },
            "osImageURL": { "type": "string" },
            "extensions": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["config", "kernelArguments", "kernelType", "fips", "osImageURL", "extensions"]
    })
}

fn trial_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "mode": { "enum": ["network", "always", "never"] },
            "seconds": { "type": "integer", "minimum": 10, "maximum": 3600 }
        },
        "required": ["mode", "seconds"]
    })
}

fn policies_schema(_: &mut SchemaGenerator) -> Schema {
    let actions = json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "type": {
                    "enum": ["None", "DaemonReload", "Reload", "Restart", "Drain", "Special", "Reboot"]
                },
                "serviceName": { "type": "string" }
            },
            "required": ["type"]
        }
    });
    json_schema!({
        "type": "object",
        "properties": {
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": { "path": { "type": "string" }, "actions": actions },
                    "required": ["path", "actions"]
                }
            },
            "units": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": { "name": { "type": "string" }, "actions": actions },
                    "required": ["name", "actions"]
                }
            },
            "ssh_key": { "anyOf": [actions, { "type": "null" }] }
        },
        "required": ["files", "units"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// What the server writes the agent reads back the same, from a millisecond to the
    /// longest wait; a shorter wait is written as a millisecond, a longer one as the longest.
    #[test]
    fn a_report_time_reads_back_as_written_and_stays_bounded() {
        for ms in [1, 999, 60_000] {
            let d = Duration::from_millis(ms);
            assert_eq!(report_after(&report_after_value(d).to_string()), Some(d));
        }
        assert_eq!(report_after_value(Duration::from_micros(10)), 1);
        assert_eq!(report_after_value(Duration::from_secs(3600)), 60_000);
        assert_eq!(report_after("86400000"), Some(MAX_REPORT_AFTER));
        for none in ["0", "-5", "soon", "1.5", ""] {
            assert_eq!(report_after(none), None, "{none:?}");
        }
    }
}
