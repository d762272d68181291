//! The store: every object the server keeps, behind a small trait so that the embedded database
//! (the default) and etcd (replicas) are interchangeable.
//!
//! The model is etcd's: objects are JSON documents addressed by kind and name; every commit
//! increments one store-wide **revision**; each object remembers the revision that created it and
//! the one that last changed it. A commit is a list of puts and deletes applied atomically, each
//! with an optional precondition on the object's revision (compare-and-swap), so that two writers
//! never silently overwrite each other. [`Store::watch`] yields the revision after each commit, so
//! that waiters (long-polls, other replicas' caches) wake up.
//!
//! [`RedbStore`] is a single file written by `redb`, a pure-Rust embedded database with ACID
//! transactions (copy-on-write B-trees, checksummed commits, fsync on each commit), so a `kill -9`
//! or a power cut leaves either the old or the new state, never a mix; [`etcd::EtcdStore`] keeps
//! the objects in etcd v3, for replicas.
//!
//! Its files: `object` (what is stored), `contract` (the trait and its vocabulary), `embedded`
//! (redb), `etcd` (replicas), `feed` (a shared store's changes as a replica follows them),
//! `backend` (the one the server runs on), `records` (the documents kept, one type per kind) and
//! `report` (a node's last report as the server holds it); `tests` (the contract every store
//! passes).

pub mod backend;
mod contract;
mod embedded;
pub mod etcd;
mod feed;
mod object;
pub mod records;
pub mod report;

pub use contract::{Expect, Listed, Op, Store, StoreError};
pub use embedded::RedbStore;
pub use feed::{Batch, Change, Changes, Link};
pub use object::{Kind, Versioned, MAX_DOCUMENT_BYTES};

#[cfg(test)]
pub(crate) mod tests;
