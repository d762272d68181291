//! Ignition entries as planning compares them: lists keyed by name or path (the last entry of a
//! name wins, at the position of the first), contents (empty means none) and masks.

use crate::ignition::Unit;
use indexmap::IndexMap;

/// Entries keyed by name: the last entry of a name wins, at the position of the first; each
/// value carries the index of the entry it came from.
pub(super) fn keyed<'a, T>(
    items: &'a [T],
    key: impl Fn(&'a T) -> &'a str,
) -> IndexMap<&'a str, (usize, &'a T)> {
    let mut out = IndexMap::new();
    for (i, item) in items.iter().enumerate() {
        out.insert(key(item), (i, item));
    }
    out
}

/// Non-empty contents (empty and absent contents mean the same: nothing to write).
pub(super) fn content(contents: &Option<String>) -> Option<&str> {
    contents.as_deref().filter(|c| !c.is_empty())
}

pub(super) fn masked(unit: &Unit) -> bool {
    unit.mask == Some(true)
}
