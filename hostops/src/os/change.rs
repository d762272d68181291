//! The OS part of a plan ([`OsChange`]): everything one new deployment must carry, collected
//! from the plan's actions.

use std::fmt;

use hearth_config::model::KernelType;
use hearth_config::plan::Action;
use serde::{Deserialize, Serialize};

use super::error::OsError;

/// Why an extension change is refused on backends without package layering.
pub(crate) fn extensions_refused(from: &[String], to: &[String]) -> OsError {
    OsError::InvalidChange(format!(
        "extensions cannot be changed on this host ({from:?} -> {to:?}): extensions are \
         rpm-ostree package layers"
    ))
}

/// The OS part of a plan: everything one new deployment must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsChange {
    /// Kernel arguments to delete (one entry per occurrence), applied first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kargs_delete: Vec<String>,
    /// Kernel arguments to append, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kargs_append: Vec<String>,
    /// Kernel type change (from, to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_type: Option<(KernelType, KernelType)>,
    /// The new OS image (an ostree ref or commit checksum on the libostree backend; also a
    /// container image reference on the rpm-ostree backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_image: Option<String>,
    /// Extensions change (from, to): rpm-ostree package layering, only on the rpm-ostree backend
    /// ([`OsBackend::change_from_actions`](super::OsBackend::change_from_actions)); absent in
    /// journals written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<(Vec<String>, Vec<String>)>,
}

impl OsChange {
    /// Collects the OS actions of a plan (`OsImage`, `KernelArguments`, `KernelType`) into one
    /// change. `Extensions` is refused: extensions are rpm-ostree package layering, which the
    /// libostree backend cannot do.
    pub fn from_actions(actions: &[Action]) -> Result<OsChange, OsError> {
        Self::collect(actions, false)
    }

    /// Like [`OsChange::from_actions`], with `Extensions` accepted into
    /// [`OsChange::extensions`] when `extensions_supported` (the rpm-ostree backend; see
    /// [`OsBackend::change_from_actions`](super::OsBackend::change_from_actions)).
    pub fn from_actions_for(
        actions: &[Action],
        extensions_supported: bool,
    ) -> Result<OsChange, OsError> {
        Self::collect(actions, extensions_supported)
    }

    fn collect(actions: &[Action], extensions_supported: bool) -> Result<OsChange, OsError> {
        let mut change = OsChange::default();
        for action in actions {
            match action {
                Action::OsImage { to, .. } => change.os_image = Some(to.clone()),
                Action::KernelArguments { delete, append } => {
                    change.kargs_delete.extend(delete.iter().cloned());
                    change.kargs_append.extend(append.iter().cloned());
                }
                Action::KernelType { from, to } => change.kernel_type = Some((*from, *to)),
                Action::Extensions { from, to } if extensions_supported => {
                    change.extensions = Some((from.clone(), to.clone()));
                }
                Action::Extensions { from, to } => return Err(extensions_refused(from, to)),
                _ => {}
            }
        }
        Ok(change)
    }

    /// Whether the change has nothing in it.
    pub fn is_empty(&self) -> bool {
        self.kargs_delete.is_empty()
            && self.kargs_append.is_empty()
            && self.kernel_type.is_none()
            && self.os_image.is_none()
            && self.extensions.is_none()
    }
}

impl fmt::Display for OsChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(image) = &self.os_image {
            parts.push(format!("OS image {image}"));
        }
        if !self.kargs_delete.is_empty() || !self.kargs_append.is_empty() {
            let mut k: Vec<String> = self.kargs_delete.iter().map(|a| format!("-{a}")).collect();
            k.extend(self.kargs_append.iter().map(|a| format!("+{a}")));
            parts.push(format!("kernel arguments {}", k.join(" ")));
        }
        if let Some((from, to)) = &self.kernel_type {
            parts.push(format!("kernel type {from} -> {to}"));
        }
        if let Some((from, to)) = &self.extensions {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(" ")
                }
            };
            parts.push(format!("extensions {} -> {}", list(from), list(to)));
        }
        if parts.is_empty() {
            write!(f, "no OS change")
        } else {
            write!(f, "{}", parts.join(", "))
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn changes_come_from_plan_actions() {
        let actions = vec![
            Action::OsImage {
                from: String::new(),
                to: "hearth/debian/v2".into(),
            },
            Action::KernelArguments {
                delete: s(&["nosmt"]),
                append: s(&["hugepages=32"]),
            },
            Action::KernelType {
                from: KernelType::Default,
                to: KernelType::Realtime,
            },
            Action::DaemonReload,
        ];
        let c = OsChange::from_actions(&actions).unwrap();
        assert_eq!(c.os_image.as_deref(), Some("hearth/debian/v2"));
        assert_eq!(c.kargs_delete, s(&["nosmt"]));
        assert_eq!(c.kargs_append, s(&["hugepages=32"]));
        assert_eq!(
            c.kernel_type,
            Some((KernelType::Default, KernelType::Realtime))
        );
        assert_eq!(
            c.to_string(),
            "OS image hearth/debian/v2, kernel arguments -nosmt +hugepages=32, kernel type default -> realtime"
        );
        let e = OsChange::from_actions(&[Action::Extensions {
            from: vec![],
            to: s(&["usbguard"]),
        }])
        .unwrap_err();
        assert!(e.to_string().contains("rpm-ostree"), "{e}");
        assert!(OsChange::from_actions(&[]).unwrap().is_empty());

        // Extensions: only where package layering exists.
        let ext = [Action::Extensions {
            from: vec![],
            to: s(&["usbguard"]),
        }];
        let c = OsChange::from_actions_for(&ext, true).unwrap();
        assert_eq!(c.extensions, Some((vec![], s(&["usbguard"]))));
        assert!(!c.is_empty());
        assert_eq!(c.to_string(), "extensions none -> usbguard");
        assert!(OsChange::from_actions_for(&ext, false).is_err());
        // A change journaled before `extensions` existed still reads.
        let old: OsChange =
            serde_json::from_str(r#"{"kargsAppend": ["nosmt"], "osImage": "hearth/debian/v2"}"#)
                .unwrap();
        assert_eq!(old.extensions, None);
        assert_eq!(old.kargs_append, s(&["nosmt"]));
    }
}
