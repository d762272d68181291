//! Ignition's merge of one JSON value into another (objects field by field, keyed lists by key,
//! plain lists as an ordered union, some fields replaced whole), with the list indexes kept
//! across the configs of a merge so that merging stays linear.

use super::hash::canonical_json;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

pub(super) fn merge_into(target: &mut Value, key: &str, value: Value, cache: &mut IndexCache) {
    if let Value::Object(map) = target {
        let mut path = format!("rest/{key}");
        match map.get_mut(key) {
            Some(existing) => merge_value(existing, value, &mut path, cache),
            None => {
                cache.forget(&path);
                map.insert(key.to_string(), value);
            }
        }
    }
}

/// Fields replaced as a whole rather than merged field by field: a file's contents (never a
/// new source with a stale compression or hash) and owners (an owner by id must not pick up an
/// earlier owner's name).
const ATOMIC: [&str; 5] = ["contents", "clevis", "cex", "user", "group"];

/// Ignition's merge of a child value into a parent value: objects field by field (a null or
/// absent child field keeps the parent's), keyed lists by key, lists of plain values as an
/// ordered union, anything else replaced. `path` is the parent's place in the merged config
/// (`units/a.service/dropins`), under which `cache` keeps the indexes of its lists.
pub(super) fn merge_value(
    parent: &mut Value,
    child: Value,
    path: &mut String,
    cache: &mut IndexCache,
) {
    match (parent, child) {
        (Value::Object(p), Value::Object(c)) => {
            for (k, cv) in c {
                if cv.is_null() {
                    continue;
                }
                let len = path.len();
                path.push('/');
                path.push_str(&k);
                if ATOMIC.contains(&k.as_str()) {
                    cache.forget(path);
                    p.insert(k, cv);
                } else {
                    match p.get_mut(&k) {
                        Some(pv) => merge_value(pv, cv, path, cache),
                        None => {
                            cache.forget(path);
                            p.insert(k, cv);
                        }
                    }
                }
                path.truncate(len);
            }
        }
        (Value::Array(p), Value::Array(c)) => {
            // Indexes of the parent's entries (by each key field they have, and by value), kept
            // across configs: merging is linear in the entries merged.
            let mut index = match cache.0.remove(path.as_str()) {
                Some(index) if index.len == p.len() => index,
                _ => {
                    let mut index = ListIndex::default();
                    for (i, e) in p.iter().enumerate() {
                        index.add(e, i);
                    }
                    index.len = p.len();
                    index
                }
            };
            for item in c {
                match list_key(&item) {
                    Some((field, key)) => match index.find(p, field, key) {
                        Some(i) => {
                            let len = path.len();
                            path.push_str(&format!("#{i}"));
                            merge_value(&mut p[i], item, path, cache);
                            path.truncate(len);
                            // A secondary key field may have changed: index its new value too.
                            index.add(&p[i], i);
                        }
                        None => {
                            index.add(&item, p.len());
                            p.push(item);
                        }
                    },
                    None => {
                        if index.plain.insert(canonical(&item)) {
                            p.push(item);
                        }
                    }
                }
            }
            index.len = p.len();
            cache.0.insert(path.clone(), index);
        }
        (p, c) => {
            cache.forget(path);
            *p = c;
        }
    }
}

/// The indexes of the lists being merged, by their place in the merged config, kept across the
/// configs of a merge so that merging many configs into one list (a drop-in each into the same
/// unit, say) does not index the list again for each config.
#[derive(Default)]
pub(super) struct IndexCache(BTreeMap<String, ListIndex>);

impl IndexCache {
    /// Forgets the indexes at or under `path`, whose value was replaced (and, harmlessly, those
    /// of siblings whose names start with the same text: they are rebuilt when next needed).
    fn forget(&mut self, path: &str) {
        let stale: Vec<String> = self
            .0
            .range::<str, _>((std::ops::Bound::Included(path), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(path))
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            self.0.remove(&k);
        }
    }
}

/// Where the entries of a list are, for [`merge_value`].
#[derive(Default)]
struct ListIndex {
    /// The length of the list when it was last indexed (a list replaced since is indexed anew).
    len: usize,
    /// First entry with this value of this key field.
    keyed: HashMap<(&'static str, String), usize>,
    /// Canonical JSON of every entry.
    plain: HashSet<String>,
}

const KEY_FIELDS: [&str; 6] = ["name", "path", "device", "number", "label", "source"];

fn canonical(v: &Value) -> String {
    let mut out = String::new();
    canonical_json(v, &mut out);
    out
}

impl ListIndex {
    fn add(&mut self, e: &Value, i: usize) {
        if let Some(obj) = e.as_object() {
            for field in KEY_FIELDS {
                if let Some(v) = obj.get(field).filter(|v| !v.is_null()) {
                    self.keyed.entry((field, canonical(v))).or_insert(i);
                }
            }
        }
        self.plain.insert(canonical(e));
    }

    /// The first entry of `p` whose `field` is `key`. Every value a key field has had is
    /// indexed; an entry whose secondary key field changed while merging may still be indexed
    /// under its old value, and then the list is searched as a whole (same answer).
    fn find(&self, p: &[Value], field: &'static str, key: &Value) -> Option<usize> {
        let matches = |e: &Value| e.get(field).is_some_and(|v| v == key);
        match self.keyed.get(&(field, canonical(key))) {
            Some(&i) if matches(&p[i]) => Some(i),
            Some(_) => p.iter().position(matches),
            None => None,
        }
    }
}

/// The key of an entry in a nested keyed list (drop-ins, partitions, headers, resources).
fn list_key(item: &Value) -> Option<(&'static str, &Value)> {
    let obj = item.as_object()?;
    for field in KEY_FIELDS {
        if let Some(v) = obj.get(field).filter(|v| !v.is_null()) {
            return Some((field, v));
        }
    }
    None
}
