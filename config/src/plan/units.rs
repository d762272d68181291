//! Planning systemd units and their drop-ins: unmask, disable before a rewrite, write or delete
//! drop-ins and unit files (phase 2 of [`Action`]), then enablement and masks (phase 4).

use super::action::{dropin_path, unit_path, Action};
use super::entries::{content, keyed, masked};
use crate::ignition::{Config, Dropin};
use std::collections::HashSet;

fn enablement_action(name: &str, enabled: Option<bool>) -> Action {
    let name = name.to_string();
    match enabled {
        Some(true) => Action::EnableUnit { name },
        Some(false) => Action::DisableUnit { name },
        None => Action::PresetUnit { name },
    }
}
pub(super) struct UnitPlan {
    /// Phase 2: unit files and drop-ins (with unmask and pre-write disables).
    pub(super) files: Vec<Action>,
    /// Phase 4: enablement and masks.
    pub(super) state: Vec<Action>,
}

pub(super) fn plan_units(cur: &Config, des: &Config, desired_files: &HashSet<&str>) -> UnitPlan {
    let cur_units = keyed(&cur.systemd.units, |u| u.name.as_str());
    let des_units = keyed(&des.systemd.units, |u| u.name.as_str());
    let mut files = Vec::new();
    let mut state = Vec::new();
    // Deleting a path that a desired `storage.files` entry writes would undo that write.
    let may_delete = |path: String| !desired_files.contains(path.as_str());

    for (name, (_, d)) in &des_units {
        let name = name.to_string();
        let c = cur_units.get(name.as_str()).map(|(_, u)| *u);
        let cur_masked = c.is_some_and(masked);
        let des_masked = masked(d);
        let cur_content = c.and_then(|c| content(&c.contents));
        let des_content = content(&d.contents);
        // A unit file hearth wrote is on disk (a masked unit's path is the /dev/null link).
        let file_on_disk = !cur_masked && cur_content.is_some();

        if cur_masked && !des_masked {
            files.push(Action::UnmaskUnit { name: name.clone() });
        }
        let write =
            !des_masked && des_content.is_some() && (cur_masked || cur_content != des_content);
        let delete =
            !des_masked && des_content.is_none() && file_on_disk && may_delete(unit_path(&name));
        let pre_disable =
            (write || delete) && file_on_disk && c.is_some_and(|c| c.enabled == Some(true));
        if pre_disable {
            files.push(Action::DisableUnit { name: name.clone() });
        }

        let empty = Vec::new();
        let cur_dropins = keyed(c.map_or(&empty, |c| &c.dropins), |d: &Dropin| {
            d.name.as_str()
        });
        let des_dropins = keyed(&d.dropins, |d: &Dropin| d.name.as_str());
        for (dname, (_, dd)) in &des_dropins {
            let cd = cur_dropins.get(dname).map(|(_, x)| *x);
            match content(&dd.contents) {
                Some(text) => {
                    if cd.and_then(|cd| content(&cd.contents)) != Some(text) {
                        files.push(Action::WriteDropin {
                            unit: name.clone(),
                            name: dname.to_string(),
                            contents: text.to_string(),
                        });
                    }
                }
                None => {
                    // An empty drop-in means "remove it" (MCO: "Dropin for X has no content,
                    // skipping write" and "Removing ..., updated file has zero length"): once,
                    // when the entry appears or its contents go away.
                    let already_empty = cd.is_some_and(|cd| content(&cd.contents).is_none());
                    if !already_empty && may_delete(dropin_path(&name, dname)) {
                        files.push(Action::DeleteDropin {
                            unit: name.clone(),
                            name: dname.to_string(),
                        });
                    }
                }
            }
        }
        for (dname, (_, cd)) in &cur_dropins {
            if !des_dropins.contains_key(dname)
                && content(&cd.contents).is_some()
                && may_delete(dropin_path(&name, dname))
            {
                files.push(Action::DeleteDropin {
                    unit: name.clone(),
                    name: dname.to_string(),
                });
            }
        }

        if write {
            files.push(Action::WriteUnit {
                name: name.clone(),
                contents: des_content.unwrap_or_default().to_string(),
            });
        } else if delete {
            files.push(Action::DeleteUnit { name: name.clone() });
        }

        if des_masked {
            if !cur_masked {
                state.push(Action::MaskUnit { name });
            }
        } else {
            let cur_enabled = c.and_then(|c| c.enabled);
            let needed = if cur_masked {
                // Enablement is not applied to masked units, so after an unmask hearth asserts
                // it again when it is set (or presets a unit whose `enabled` became unset).
                d.enabled.is_some() || cur_enabled.is_some()
            } else {
                // A pre-write disable left the unit disabled.
                let effective = if pre_disable {
                    Some(false)
                } else {
                    cur_enabled
                };
                effective != d.enabled
            };
            if needed {
                state.push(enablement_action(&name, d.enabled));
            }
        }
    }

    for (name, (_, c)) in &cur_units {
        if des_units.contains_key(name) {
            continue;
        }
        let name = name.to_string();
        let has_file = !masked(c) && content(&c.contents).is_some();
        if masked(c) {
            files.push(Action::UnmaskUnit { name: name.clone() });
        } else if has_file {
            files.push(Action::DisableUnit { name: name.clone() });
        }
        for (dname, (_, cd)) in keyed(&c.dropins, |d: &Dropin| d.name.as_str()) {
            if content(&cd.contents).is_some() && may_delete(dropin_path(&name, dname)) {
                files.push(Action::DeleteDropin {
                    unit: name.clone(),
                    name: dname.to_string(),
                });
            }
        }
        if has_file && may_delete(unit_path(&name)) {
            files.push(Action::DeleteUnit { name: name.clone() });
        }
        if !has_file && c.enabled.is_some() {
            state.push(Action::PresetUnit { name });
        }
    }
    // The agent's own unit is never written, deleted, disabled, enabled, preset or masked by a
    // plan (configs are refused with such settings, `crate::own`; a current config from before
    // may still carry them, and dropping them must not take the agent down): only its
    // drop-ins change.
    let agents_own = |a: &Action| match a {
        Action::WriteUnit { name, .. }
        | Action::DeleteUnit { name }
        | Action::EnableUnit { name }
        | Action::DisableUnit { name }
        | Action::PresetUnit { name }
        | Action::MaskUnit { name }
        | Action::UnmaskUnit { name } => name == crate::own::AGENT_UNIT,
        _ => false,
    };
    files.retain(|a| !agents_own(a));
    state.retain(|a| !agents_own(a));
    UnitPlan { files, state }
}
