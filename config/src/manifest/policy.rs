//! The MCO's `MachineConfiguration` object: its node-disruption policies (files, units, SSH
//! keys, each with its actions), and the overrides hearth refuses (see [`crate::mco`]).

use super::paths::{join, line_of};
use super::read::Reader;
use crate::de::decode_all;
use crate::diag::Diagnostic;
use crate::model::{DisruptionPolicies, FilePolicy, PolicyAction, Sourced, UnitPolicy};
use crate::node::Node;
use serde::Deserialize;

#[derive(Deserialize)]
struct ServiceRef {
    #[serde(rename = "serviceName")]
    service_name: String,
}

#[derive(Deserialize)]
struct ActionWire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    reload: Option<ServiceRef>,
    #[serde(default)]
    restart: Option<ServiceRef>,
}

#[derive(Deserialize)]
struct FilePolicyWire {
    path: String,
    actions: Vec<ActionWire>,
}

#[derive(Deserialize)]
struct UnitPolicyWire {
    name: String,
    actions: Vec<ActionWire>,
}

#[derive(Deserialize)]
struct SshPolicyWire {
    actions: Vec<ActionWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeDisruptionPolicyWire {
    #[serde(default)]
    files: Vec<FilePolicyWire>,
    #[serde(default)]
    units: Vec<UnitPolicyWire>,
    #[serde(default)]
    sshkey: Option<SshPolicyWire>,
}

impl Reader<'_> {
    pub(super) fn machine_configuration(&mut self, doc: &Node, base: &str, object: Option<String>) {
        if let Some(n) = doc
            .get("spec")
            .and_then(|s| s.get(crate::mco::OVERRIDES_FIELD))
            .filter(|n| crate::mco::asks_for_something(n))
        {
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(n.line),
                    &join(base, &format!("spec.{}", crate::mco::OVERRIDES_FIELD)),
                    crate::mco::OVERRIDES_REFUSED,
                )
                .with_object(object.clone()),
            );
        }
        let path = join(base, "spec.nodeDisruptionPolicy");
        let Some(node) = doc
            .get("spec")
            .and_then(|s| s.get("nodeDisruptionPolicy"))
            .filter(|n| !n.is_null())
        else {
            return;
        };
        let mut warnings = Vec::new();
        let wire: NodeDisruptionPolicyWire = match decode_all(node, &path, &mut warnings) {
            Ok(w) => w,
            Err(errors) => {
                self.decode_errors(errors, &object);
                return;
            }
        };
        self.push_warnings(&object, warnings);
        let mut failed = false;
        let mut convert = |field: String,
                           actions: Vec<ActionWire>,
                           this: &mut Self|
         -> Vec<PolicyAction> {
            let mut out = Vec::new();
            for (i, a) in actions.into_iter().enumerate() {
                let p = format!("{field}.actions[{i}]");
                let action = match (a.kind.as_str(), a.reload, a.restart) {
                    ("None", _, _) => Some(PolicyAction::None),
                    ("Reboot", _, _) => Some(PolicyAction::Reboot),
                    ("Drain", _, _) => Some(PolicyAction::Drain),
                    ("DaemonReload", _, _) => Some(PolicyAction::DaemonReload),
                    ("Special", _, _) => Some(PolicyAction::Special),
                    ("Reload", Some(r), _) => Some(PolicyAction::Reload {
                        service: r.service_name,
                    }),
                    ("Restart", _, Some(r)) => Some(PolicyAction::Restart {
                        service: r.service_name,
                    }),
                    ("Reload" | "Restart", _, _) => {
                        this.diags.push(
                            Diagnostic::error(
                                this.file,
                                Some(line_of(node, &p)),
                                &join(&path, &p),
                                format!(
                                    "a {} action needs {}: {{serviceName: ...}}",
                                    a.kind,
                                    a.kind.to_lowercase()
                                ),
                            )
                            .with_object(object.clone()),
                        );
                        None
                    }
                    (other, _, _) => {
                        this.diags.push(
                            Diagnostic::error(this.file, Some(line_of(node, &p)), &join(&path, &format!("{p}.type")), format!("unknown action type {other:?}; expected one of: None, Reboot, Drain, Reload, Restart, DaemonReload, Special"))
                                .with_object(object.clone()),
                        );
                        None
                    }
                };
                match action {
                    Some(a) => out.push(a),
                    None => failed = true,
                }
            }
            out
        };
        let mut policies = DisruptionPolicies::default();
        for (i, f) in wire.files.into_iter().enumerate() {
            let actions = convert(format!("files[{i}]"), f.actions, self);
            policies.files.push(FilePolicy {
                path: f.path,
                actions,
            });
        }
        for (i, u) in wire.units.into_iter().enumerate() {
            let actions = convert(format!("units[{i}]"), u.actions, self);
            policies.units.push(UnitPolicy {
                name: u.name,
                actions,
            });
        }
        if let Some(s) = wire.sshkey {
            policies.ssh_key = Some(convert("sshkey".to_string(), s.actions, self));
        }
        for (i, f) in policies.files.iter().enumerate() {
            if let Some(msg) = crate::mco::check_policy_path(&f.path) {
                let p = format!("files[{i}].path");
                self.diags.push(
                    Diagnostic::error(self.file, Some(line_of(node, &p)), &join(&path, &p), msg)
                        .with_object(object.clone()),
                );
                failed = true;
            }
        }
        if failed {
            return;
        }
        let origin = self.origin(doc);
        self.out.policies.push(Sourced {
            item: policies,
            origin,
        });
    }
}
