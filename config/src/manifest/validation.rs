//! What reading does with a field no schema has (kubectl's field validation): refuse it
//! ([`FieldValidation::Strict`], the default of `hearth validate`, `render`, `plan` and
//! `apply`), warn and ignore it ([`FieldValidation::Warn`]), or ignore it silently.
//!
//! A field is unknown when it is in none of the schemas hearth reads: the MCO's types and the
//! Ignition versions it accepts. Fields hearth knows but does not use (what `oc get -o yaml`
//! prints: `status`, `managedFields`, `creationTimestamp`; an Ignition 2 `filesystem` in an
//! Ignition 3 config; the MCO's settings hearth has no use for) are never refused.

use std::fmt;
use std::str::FromStr;

/// What reading does with an unknown field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// An error naming the field (and the one it likely misspells): nothing is applied.
    #[default]
    Strict,
    /// A warning; the field is ignored.
    Warn,
    /// Ignored without a word.
    Ignore,
}

impl FieldValidation {
    /// The name on the wire (`?fieldValidation=`, as the Kubernetes API names it).
    pub fn as_str(self) -> &'static str {
        match self {
            FieldValidation::Strict => "Strict",
            FieldValidation::Warn => "Warn",
            FieldValidation::Ignore => "Ignore",
        }
    }
}

impl fmt::Display for FieldValidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FieldValidation {
    type Err = String;

    /// `Strict`, `Warn`, `Ignore` in any case; kubectl's `true` (strict) and `false` (ignore).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "strict" | "true" => Ok(FieldValidation::Strict),
            "warn" => Ok(FieldValidation::Warn),
            "ignore" | "false" => Ok(FieldValidation::Ignore),
            _ => Err(format!(
                "field validation {s:?}: expected Strict, Warn or Ignore"
            )),
        }
    }
}
