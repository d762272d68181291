//! Label selectors (`-l`), as `kubectl` reads them: requirements separated by commas, all of
//! which an object's `metadata.labels` must meet.
//!
//! - `key=value` or `key==value`: the label is set to `value`;
//! - `key!=value`: the label is not set to `value` (missing counts as not set to it);
//! - `key`: the label exists; `!key`: it does not.
//!
//! Set-based forms (`key in (a,b)`) are refused with a usage error, not misread. The selector
//! is matched by the CLI on the objects the server lists.

use crate::usage::Usage;
use serde_json::Value;

/// At most this many bytes of selector text (a typing mistake, not a query language).
pub const MAX_SELECTOR_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// A parsed `-l` selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selector(Vec<Requirement>);

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Selector {
    /// Reads `text` (see the module doc); an error says which requirement and why.
    pub(crate) fn parse(text: &str) -> Result<Selector, Usage> {
        if text.len() > MAX_SELECTOR_LEN {
            return Err(Usage(format!(
                "-l: the selector is {} bytes, at most {MAX_SELECTOR_LEN} are read",
                text.len()
            )));
        }
        let mut reqs = Vec::new();
        for part in text.split(',').map(str::trim) {
            let bad = |why: &str| {
                Usage(format!(
                    "-l: cannot read {:?}: {why}; write key=value, key!=value, key or !key, separated by commas",
                    crate::term::escape(part)
                ))
            };
            if part.is_empty() {
                return Err(bad("empty requirement"));
            }
            let req = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else if part.contains(' ') || part.contains('(') {
                return Err(bad("set-based selectors (in, notin) are not supported"));
            } else {
                Requirement::Exists(part.into())
            };
            let (k, v) = match &req {
                Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k, Some(v)),
                Requirement::Exists(k) | Requirement::NotExists(k) => (k, None),
            };
            if !valid_key(k) {
                return Err(bad("not a label key"));
            }
            if v.is_some_and(|v| !valid_value(v)) {
                return Err(bad("not a label value"));
            }
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    /// Whether an object (a server document with `metadata.labels`) meets every requirement.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels}})
    }

    #[test]
    fn equality_inequality_and_existence() {
        let a = obj(json!({"rack": "r1", "node-role.kubernetes.io/worker": ""}));
        let b = obj(json!({"rack": "r2"}));
        let c = obj(json!({}));
        let m = |s: &str| {
            let sel = Selector::parse(s).unwrap();
            [&a, &b, &c].map(|o| sel.matches(o))
        };
        assert_eq!(m("rack=r1"), [true, false, false]);
        assert_eq!(m("rack==r1"), [true, false, false]);
        assert_eq!(m("rack!=r1"), [false, true, true]);
        assert_eq!(m("rack"), [true, true, false]);
        assert_eq!(m("!rack"), [false, false, true]);
        assert_eq!(
            m("node-role.kubernetes.io/worker=,rack!=r2"),
            [true, false, false]
        );
        assert_eq!(m(" rack = r2 , rack "), [false, true, false]);
    }

    #[test]
    fn what_cannot_be_read_is_refused() {
        for bad in [
            "",
            "rack=r1,",
            "rack in (r1,r2)",
            "ra ck=r1",
            "rack=r 1",
            "=r1",
            "rack=\u{1b}[2J",
        ] {
            let e = Selector::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("-l: cannot read"), "{bad:?}: {e}");
            assert!(!e.contains('\u{1b}'), "{e}");
        }
        assert!(Selector::parse(&"a".repeat(MAX_SELECTOR_LEN + 1)).is_err());
    }
}
