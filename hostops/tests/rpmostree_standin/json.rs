//! D-Bus values converted to JSON, for the record of calls.

use std::collections::HashMap;

use serde_json::{json, Value as Json};
use zbus::{OwnedVariant, Variant};

pub fn to_json(v: &Variant<'_>) -> Json {
    match v {
        Variant::Bool(b) => json!(b),
        Variant::U8(n) => json!(n),
        Variant::I16(n) => json!(n),
        Variant::U16(n) => json!(n),
        Variant::I32(n) => json!(n),
        Variant::U32(n) => json!(n),
        Variant::I64(n) => json!(n),
        Variant::U64(n) => json!(n),
        Variant::F64(n) => json!(n),
        Variant::Str(s) => json!(s.as_str()),
        Variant::ObjectPath(p) => json!(p.as_str()),
        Variant::Variant(inner) => to_json(inner),
        Variant::Array(a) => Json::Array(a.iter().map(to_json).collect()),
        Variant::Dict(d) => {
            let mut m = serde_json::Map::new();
            for (k, v) in d.iter() {
                let key = match to_json(k) {
                    Json::String(s) => s,
                    other => other.to_string(),
                };
                m.insert(key, to_json(v));
            }
            Json::Object(m)
        }
        Variant::Structure(s) => Json::Array(s.fields().iter().map(to_json).collect()),
        other => json!(format!("{other:?}")),
    }
}

pub(super) fn dict_json(d: &HashMap<String, OwnedVariant>) -> Json {
    let mut m = serde_json::Map::new();
    for (k, v) in d {
        m.insert(k.clone(), to_json(v));
    }
    Json::Object(m)
}

pub(super) fn strv(args: &Json, key: &str) -> Vec<String> {
    args.get(key)
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
