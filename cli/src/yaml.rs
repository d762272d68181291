//! A small YAML writer for `-o yaml`: block style, keys in the order given, strings quoted
//! whenever Kubernetes' YAML 1.1 reader could take them for something else (`0644`, `yes`,
//! `null`...), multi-line strings as literal blocks. Its output reads back to the same value.

use hearth_config::node::{parse_yaml11_bool, parse_yaml11_int};
use serde_json::Value;

/// Writes `value` as a YAML document (no leading `---`).
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => write_map(value, 0, &mut out),
        Value::Array(a) if !a.is_empty() => write_seq(value, 0, &mut out),
        other => {
            out.push_str(&scalar(other, 0));
            out.push('\n');
        }
    }
    out
}

fn indent(n: usize, out: &mut String) {
    for _ in 0..n {
        out.push(' ');
    }
}

fn is_collection(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

fn write_map(value: &Value, level: usize, out: &mut String) {
    let Value::Object(map) = value else { return };
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            indent(level, out);
        }
        out.push_str(&string(k, level));
        out.push(':');
        write_value_after_key(v, level, out);
    }
}

fn write_value_after_key(v: &Value, level: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            indent(level + 2, out);
            write_map(v, level + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            indent(level, out);
            write_seq(v, level, out);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other, level + 2));
            out.push('\n');
        }
    }
}

fn write_seq(value: &Value, level: usize, out: &mut String) {
    let Value::Array(items) = value else { return };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            indent(level, out);
        }
        out.push_str("- ");
        if is_collection(item) {
            match item {
                Value::Object(_) => write_map(item, level + 2, out),
                _ => {
                    indent(0, out);
                    write_seq(item, level + 2, out)
                }
            }
        } else {
            out.push_str(&scalar(item, level + 2));
            out.push('\n');
        }
    }
}

fn scalar(v: &Value, level: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, level),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn needs_quotes(s: &str) -> bool {
    if s.is_empty() || s.trim() != s {
        return true;
    }
    if parse_yaml11_int(s).is_some()
        || parse_yaml11_bool(s).is_some()
        || matches!(s, "~" | "null" | "Null" | "NULL")
        || s.parse::<f64>().is_ok()
        || s.starts_with('.')
    {
        return true;
    }
    let first = s.chars().next().unwrap_or(' ');
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return true;
    }
    s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.chars().any(crate::term::is_unsafe)
}

fn string(s: &str, level: usize) -> String {
    if s.contains('\n') && block_ok(s) {
        let chomp = if s.ends_with("\n\n") {
            "+"
        } else if s.ends_with('\n') {
            ""
        } else {
            "-"
        };
        let mut out = format!("|{chomp}\n");
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            if !line.is_empty() {
                indent(level, &mut out);
                out.push_str(line);
            }
            out.push('\n');
        }
        // The caller adds the final newline.
        out.pop();
        return out;
    }
    if needs_quotes(s) {
        // Double-quoted YAML takes JSON's escapes; DEL, C1 and invisible format characters,
        // which `serde_json` leaves raw, become `\uXXXX` too (see `crate::term`).
        crate::term::json_safe(&Value::String(s.to_string()).to_string()).into_owned()
    } else {
        s.to_string()
    }
}

/// A literal block keeps the text exactly only if no line would be misread: no tabs or carriage
/// returns or other control characters, and a first line that does not start with a space.
fn block_ok(s: &str) -> bool {
    !s.starts_with(' ')
        && !s.starts_with('\n')
        && !s.chars().any(|c| crate::term::is_unsafe(c) && c != '\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_config::node::parse_documents;
    use serde_json::json;

    fn back(v: &Value) -> Value {
        let text = to_string(v);
        let docs = parse_documents(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut w = Vec::new();
        hearth_config::de::decode::<Value>(&docs[0], "", &mut w).unwrap()
    }

    #[test]
    fn round_trips() {
        let v = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "metadata": {"name": "x", "labels": {"a": ""}},
            "spec": {
                "kernelArguments": ["a=1", "0644", "yes", "- x"],
                "config": {"storage": {"files": [{"path": "/etc/a", "mode": 420}]},
                           "systemd": {"units": [{"name": "a.service", "contents": "[Unit]\nA=b\n\n[Service]\nX=1\n"},
                                                  {"name": "b.service", "contents": "no newline\nend"},
                                                  {"name": "c.service", "contents": "  leading\n"}]}},
                "empty": [], "obj": {}, "n": null, "f": false,
                "nested": [[1, 2], {"k": [3]}]
            }
        });
        assert_eq!(back(&v), v);
    }
}
