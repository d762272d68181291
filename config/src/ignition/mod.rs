//! Ignition configs: the spec versions hearth reads and writes, and the serialisation helpers
//! the model and the wire types share. The rest lives in one room per concept:
//!
//! - `v3.rs`: the internal model (spec 3.5.0 field set) and which 3.x version each field needs.
//! - `v2.rs`: the spec 2.x wire format, as written.
//! - `translate.rs`: 2.x into the internal model, and the internal model out to any version.
//!
//! Input may be any of spec 2.2.0 to 2.4.0 and 3.0.0 to 3.5.0; it is translated to one model
//! ([`Config`]). Output may be any of those versions ([`Config::to_version`]); what the chosen
//! version cannot express is refused with the field that needs it.

use std::fmt;

/// An Ignition spec version that hearth reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpecVersion {
    /// 2.2.0 (the MCO's original format).
    V2_2,
    /// 2.3.0.
    V2_3,
    /// 2.4.0.
    V2_4,
    /// 3.0.0.
    V3_0,
    /// 3.1.0.
    V3_1,
    /// 3.2.0.
    V3_2,
    /// 3.3.0.
    V3_3,
    /// 3.4.0.
    V3_4,
    /// 3.5.0 (the internal model).
    V3_5,
}

impl SpecVersion {
    /// Every supported version, oldest first.
    pub const ALL: [SpecVersion; 9] = [
        SpecVersion::V2_2,
        SpecVersion::V2_3,
        SpecVersion::V2_4,
        SpecVersion::V3_0,
        SpecVersion::V3_1,
        SpecVersion::V3_2,
        SpecVersion::V3_3,
        SpecVersion::V3_4,
        SpecVersion::V3_5,
    ];
    /// The newest version: the one rendered configs use.
    pub const LATEST: SpecVersion = SpecVersion::V3_5;

    /// Parses `"3.2.0"` (also `"3.2"`).
    pub fn parse(text: &str) -> Option<SpecVersion> {
        let t = text.trim();
        let t = t
            .strip_suffix(".0")
            .filter(|s| s.matches('.').count() == 1)
            .unwrap_or(t);
        Some(match t {
            "2.2" => SpecVersion::V2_2,
            "2.3" => SpecVersion::V2_3,
            "2.4" => SpecVersion::V2_4,
            "3.0" => SpecVersion::V3_0,
            "3.1" => SpecVersion::V3_1,
            "3.2" => SpecVersion::V3_2,
            "3.3" => SpecVersion::V3_3,
            "3.4" => SpecVersion::V3_4,
            "3.5" => SpecVersion::V3_5,
            _ => return None,
        })
    }

    /// `"3.2.0"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecVersion::V2_2 => "2.2.0",
            SpecVersion::V2_3 => "2.3.0",
            SpecVersion::V2_4 => "2.4.0",
            SpecVersion::V3_0 => "3.0.0",
            SpecVersion::V3_1 => "3.1.0",
            SpecVersion::V3_2 => "3.2.0",
            SpecVersion::V3_3 => "3.3.0",
            SpecVersion::V3_4 => "3.4.0",
            SpecVersion::V3_5 => "3.5.0",
        }
    }

    /// True for the 2.x family.
    pub fn is_v2(self) -> bool {
        self < SpecVersion::V3_0
    }

    /// The list of supported versions, for error messages.
    pub fn supported_list() -> String {
        Self::ALL
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// Defined before the `mod` lines below: `v2` and `v3` use it (macros are scoped by text order).
macro_rules! empty_check {
    ($ty:ty { $($field:ident),* }) => {
        impl $ty {
            /// True when no field is set.
            pub fn is_empty(&self) -> bool {
                true $(&& self.$field.is_empty_value())*
            }
        }
    };
}

/// Emptiness for serialisation (`skip_serializing_if`).
pub trait EmptyValue {
    /// True when the value carries nothing.
    fn is_empty_value(&self) -> bool;
}
impl<T> EmptyValue for Vec<T> {
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}
impl<T> EmptyValue for Option<T> {
    fn is_empty_value(&self) -> bool {
        self.is_none()
    }
}

mod translate;
mod v2;
mod v3;

pub use translate::TranslateError;
pub use v2::{
    V2Config, V2ConfigRefs, V2Filesystem, V2Ignition, V2Mount, V2Networkd, V2Node, V2Passwd,
    V2Storage, V2Systemd, V2Unit, V2User,
};
pub use v3::{
    Config, Directory, Disk, Dropin, File, Filesystem, Group, HttpHeader, IgnitionConfigRefs,
    IgnitionSection, KernelArguments, Link, Luks, NodeOwner, Partition, Passwd, Proxy, Raid,
    Resource, Security, Storage, Systemd, Timeouts, Tls, Unit, User, Verification,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(SpecVersion::parse("3.2.0"), Some(SpecVersion::V3_2));
        assert_eq!(SpecVersion::parse("2.2.0"), Some(SpecVersion::V2_2));
        assert_eq!(SpecVersion::parse("3.6.0"), None);
        assert_eq!(SpecVersion::parse("2.1.0"), None);
        assert!(SpecVersion::V2_4 < SpecVersion::V3_0);
        for v in SpecVersion::ALL {
            assert_eq!(SpecVersion::parse(v.as_str()), Some(v));
        }
    }
}
