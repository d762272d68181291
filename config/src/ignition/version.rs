//! The Ignition spec versions hearth reads and writes ([`SpecVersion`]): parsing, ordering,
//! printing.

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
