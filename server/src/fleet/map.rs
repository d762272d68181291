//! Objects of one kind in memory: a decoded document with its revisions ([`Rec`]), a persistent
//! map of them by name ([`Map`]), changes to it ([`put`], [`update`]), and the store ops that turn
//! one snapshot of a kind into another ([`diff_kind`]).

use crate::store::records::Record;
use crate::store::{Expect, Kind, Op, StoreError};
use imbl::ordmap::DiffItem;
use std::sync::Arc;

/// A decoded object with its revisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Rec<T> {
    /// The document.
    pub value: T,
    /// The revision that created it (0: not stored yet).
    pub create_revision: u64,
    /// The revision that last changed it (0: not stored yet).
    pub mod_revision: u64,
}

// Equality of records is reflexive: they hold no floating-point values (they are what JSON
// documents decode to, and JSON has no NaN). Being `Eq` lets `Arc<Rec<_>>` compare by pointer
// first, so that diffing two snapshots never compares the records they share.
impl<T: PartialEq> Eq for Rec<T> {}

/// Objects of one kind, by name: a persistent (structurally shared) ordered map, so that the
/// copy every change starts from costs O(1) and a change to one object O(log n), however
/// large the fleet (with `BTreeMap` each group commit copied and freed every key).
pub type Map<T> = imbl::OrdMap<String, Arc<Rec<T>>>;

/// Inserts or replaces `name` (revisions are taken from the old snapshot when diffing).
pub fn put<T>(map: &mut Map<T>, name: &str, value: T) {
    let (create_revision, mod_revision) = map
        .get(name)
        .map(|r| (r.create_revision, r.mod_revision))
        .unwrap_or((0, 0));
    map.insert(
        name.to_string(),
        Arc::new(Rec {
            value,
            create_revision,
            mod_revision,
        }),
    );
}

/// Changes `name` in place, if present; returns whether it was.
pub fn update<T: Clone>(map: &mut Map<T>, name: &str, f: impl FnOnce(&mut T)) -> bool {
    match map.get_mut(name) {
        Some(rec) => {
            f(&mut Arc::make_mut(rec).value);
            true
        }
        None => false,
    }
}

/// The store ops that turn `old` into `new`, one kind's objects.
pub(super) fn diff_kind<T: Record>(
    kind: Kind,
    old: &Map<T>,
    new: &Map<T>,
    ops: &mut Vec<Op>,
) -> Result<(), StoreError> {
    // imbl's diff skips the subtrees both maps share: a commit that changed k objects costs
    // O(k log n), not a walk of both maps (which at 10,000 nodes was most of a status report's
    // commit). Entries are compared by pointer first (`Rec` is `Eq`), then by value.
    let put = |name: &String, rec: &Rec<T>, expect: Expect, ops: &mut Vec<Op>| {
        ops.push(Op::Put {
            kind,
            name: name.clone(),
            value: encode(kind, name, &rec.value)?,
            expect,
        });
        Ok::<(), StoreError>(())
    };
    for item in old.diff(new) {
        match item {
            DiffItem::Add(name, rec) => put(name, rec, Expect::Absent, ops)?,
            DiffItem::Remove(name, o) => ops.push(Op::Delete {
                kind,
                name: name.clone(),
                expect: Expect::Revision(o.mod_revision),
            }),
            // Only a change of the document is written (not one of the revisions alone).
            DiffItem::Update {
                old: (_, o),
                new: (name, rec),
            } => {
                if o.value != rec.value {
                    put(name, rec, Expect::Revision(o.mod_revision), ops)?;
                }
            }
        }
    }
    Ok(())
}

/// A document as a store op's value.
pub(super) fn encode<T: serde::Serialize>(
    kind: Kind,
    name: &str,
    v: &T,
) -> Result<bytes::Bytes, StoreError> {
    serde_json::to_vec(v)
        .map(bytes::Bytes::from)
        .map_err(|e| StoreError::Backend(format!("cannot encode {kind}/{name}: {e}")))
}

/// Sets the revisions of `name` after a commit at `revision` (its creation too, if new).
pub(super) fn stamp_one<T: Clone>(map: &mut Map<T>, name: &str, revision: u64) {
    if let Some(rec) = map.get_mut(name) {
        let r = Arc::make_mut(rec);
        if r.create_revision == 0 {
            r.create_revision = revision;
        }
        r.mod_revision = revision;
    }
}
