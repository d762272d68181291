//! The content address of a rendered config ([`spec_hash`]): the spec written as canonical JSON
//! (keys sorted, no white space, escaped as serde_json escapes) and hashed with sha256.

use crate::ignition::SpecVersion;
use crate::model::MachineConfigSpec;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The sha256 (hex) of the canonical serialisation of a spec: the content address of a rendered
/// config. The same spec gives the same hash on any machine.
pub fn spec_hash(spec: &MachineConfigSpec) -> String {
    let mut value = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Some(ign) = value
        .get_mut("config")
        .and_then(|c| c.get_mut("ignition"))
        .and_then(Value::as_object_mut)
    {
        ign.insert(
            "version".to_string(),
            Value::String(SpecVersion::LATEST.as_str().to_string()),
        );
    }
    let mut hasher = HashWriter(Sha256::new());
    write_canonical(&value, &mut hasher);
    hex::encode(hasher.0.finalize())
}

/// Feeds the canonical serialisation straight into the hash, without building the string.
struct HashWriter(Sha256);

impl CanonicalSink for HashWriter {
    fn put(&mut self, s: &str) {
        self.0.update(s.as_bytes());
    }
}

impl CanonicalSink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

/// Where canonical JSON goes.
trait CanonicalSink {
    fn put(&mut self, s: &str);
}

fn write_canonical(value: &Value, out: &mut impl CanonicalSink) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.put("{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.put(",");
                }
                write_json_string(k, out);
                out.put(":");
                write_canonical(&map[k], out);
            }
            out.put("}");
        }
        Value::Array(items) => {
            out.put("[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.put(",");
                }
                write_canonical(v, out);
            }
            out.put("]");
        }
        Value::String(s) => write_json_string(s, out),
        other => out.put(&other.to_string()),
    }
}

/// A JSON string literal, escaped exactly as serde_json escapes it.
fn write_json_string(s: &str, out: &mut impl CanonicalSink) {
    out.put("\"");
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<String> = match c {
            '"' => Some("\\\"".into()),
            '\\' => Some("\\\\".into()),
            '\n' => Some("\\n".into()),
            '\r' => Some("\\r".into()),
            '\t' => Some("\\t".into()),
            '\u{8}' => Some("\\b".into()),
            '\u{c}' => Some("\\f".into()),
            c if (c as u32) < 0x20 => Some(format!("\\u{:04x}", c as u32)),
            _ => None,
        };
        if let Some(e) = esc {
            out.put(&s[start..i]);
            out.put(&e);
            start = i + c.len_utf8();
        }
    }
    out.put(&s[start..]);
    out.put("\"");
}

/// Writes `value` as JSON with object keys sorted and no white space.
pub fn canonical_json(value: &Value, out: &mut String) {
    write_canonical(value, out);
}
