//! Diagnostics: what is wrong with an input, and exactly where.

use serde::Serialize;
use std::fmt;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The object is refused.
    Error,
    /// Accepted, but probably not what the author meant (an unknown field, an unsupported setting
    /// that is ignored).
    Warning,
}

/// One problem found in an input: which file, line, object and field, what is wrong, and what to
/// do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The input file (or `-`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The object, as `Kind/name` (or `document N` when it has no usable name).
    pub object: Option<String>,
    /// The field path within the object (`spec.config.storage.files[2].contents.source`).
    pub path: String,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
}

impl Diagnostic {
    /// An error.
    pub fn error(file: &str, line: Option<usize>, path: &str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_string(),
            line,
            object: None,
            path: path.to_string(),
            message: message.into(),
        }
    }

    /// A warning.
    pub fn warning(
        file: &str,
        line: Option<usize>,
        path: &str,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Self::error(file, line, path, message)
        }
    }

    /// Sets the object this diagnostic is about.
    pub fn with_object(mut self, object: Option<String>) -> Self {
        self.object = object;
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: ", self.file, line)?,
            None => write!(f, "{}: ", self.file)?,
        }
        match self.severity {
            Severity::Error => f.write_str("error: ")?,
            Severity::Warning => f.write_str("warning: ")?,
        }
        if let Some(object) = &self.object {
            write!(f, "{object}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// A list of diagnostics returned as an error (at least one is an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}
