//! What every store promises: objects as JSON documents addressed by [`Kind`] and name, one
//! store-wide revision, commits of puts and deletes with preconditions ([`Op`], [`Expect`]), and
//! the [`Store`] trait the embedded database and etcd implement.

use super::feed::Changes;
use super::object::{Kind, Versioned};
use std::future::Future;
use tokio::sync::watch;

/// A precondition on one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// None.
    Any,
    /// The object must not exist.
    Absent,
    /// The object must exist with this `mod_revision`.
    Revision(u64),
}

/// One write of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Create or replace an object.
    Put {
        /// Kind.
        kind: Kind,
        /// Name.
        name: String,
        /// The document (shared: a commit's ops are cloned for a retry or a log without
        /// copying their documents; an apply to 100,000 nodes writes some 100 MB).
        value: bytes::Bytes,
        /// Precondition.
        expect: Expect,
    },
    /// Delete an object (deleting a missing object under [`Expect::Any`] is not an error).
    Delete {
        /// Kind.
        kind: Kind,
        /// Name.
        name: String,
        /// Precondition.
        expect: Expect,
    },
}

impl Op {
    pub(super) fn target(&self) -> (Kind, &str, Expect) {
        match self {
            Op::Put {
                kind, name, expect, ..
            }
            | Op::Delete { kind, name, expect } => (*kind, name, *expect),
        }
    }
}

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A precondition failed: someone else changed the object first.
    #[error("conflict on {kind}/{name}: expected {expected:?}, found revision {found:?}")]
    Conflict {
        /// Kind.
        kind: Kind,
        /// Name.
        name: String,
        /// The precondition.
        expected: Expect,
        /// The object's revision (`None`: absent).
        found: Option<u64>,
    },
    /// The fleet changed since the revision a fenced commit was computed on
    /// ([`Store::commit_fenced`]): catch up with `revision` and compute the change again.
    #[error(
        "the fleet changed at revision {revision}, after the revision this change was computed on"
    )]
    Behind {
        /// The revision of the newer change.
        revision: u64,
    },
    /// The backend failed (I/O, corruption, a lock held by another process).
    #[error("store: {0}")]
    Backend(String),
}

/// What [`Store::list_each`] gives its callback.
#[derive(Debug)]
pub enum Listed {
    /// The next object: its name and document.
    Object(String, Versioned),
    /// The list starts again from its first object, at a newer snapshot: what was given before
    /// is to be forgotten.
    Again,
}

/// The store interface. Small on purpose: get, list, an atomic commit with compare-and-swap,
/// the current revision and a watch, which is what etcd offers too.
pub trait Store: Send + Sync + 'static {
    /// One object.
    fn get(
        &self,
        kind: Kind,
        name: &str,
    ) -> impl Future<Output = Result<Option<Versioned>, StoreError>> + Send;

    /// Every object of a kind, by name, in one list.
    fn list(
        &self,
        kind: Kind,
    ) -> impl Future<Output = Result<Vec<(String, Versioned)>, StoreError>> + Send {
        async move {
            let mut out: Vec<(String, Versioned)> = Vec::new();
            self.list_each(kind, &mut |listed| {
                match listed {
                    Listed::Object(name, v) => out.push((name, v)),
                    Listed::Again => out.clear(),
                }
                Ok(())
            })
            .await?;
            Ok(out)
        }
    }

    /// Every object of a kind, by name, given to `each` one at a time as it is read: nothing is
    /// held but the one `each` has (a kind may be large: 100,000 nodes' reports are some 1 GB).
    /// One snapshot; on etcd, a snapshot compacted between two pages of the list starts it
    /// again from the first at a newer one: `each` is then told so ([`Listed::Again`]) and must
    /// forget what it was given before (objects deleted meanwhile are not given again). An
    /// error from `each` ends the list with it.
    fn list_each(
        &self,
        kind: Kind,
        each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Applies every op atomically if every precondition holds; returns the new revision (the
    /// `mod_revision` of everything written). An empty commit returns the current revision.
    fn commit(&self, ops: Vec<Op>) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// [`Store::commit`], and only if no other fenced commit was made after revision
    /// `based_on` (the revision of the snapshot the change was computed from), else
    /// [`StoreError::Behind`]. Where one process is the only writer (the embedded store) this
    /// is `commit`; on etcd, several servers share the store and this is what makes their
    /// decisions as if one server made them in turn.
    fn commit_fenced(
        &self,
        ops: Vec<Op>,
        based_on: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = based_on;
        self.commit(ops)
    }

    /// The revision of the last commit.
    fn revision(&self) -> u64;

    /// Yields the revision after each commit.
    fn watch(&self) -> watch::Receiver<u64>;

    /// Where other processes write to the same store (etcd): the decoded changes after revision
    /// `from`, whoever made them, and the state of the link they come over. `None` where this
    /// process is the only writer (the embedded store).
    fn changes(&self, from: u64) -> Option<Changes> {
        let _ = from;
        None
    }
}
