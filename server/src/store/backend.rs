//! The store the server runs on: the embedded database (the default) or etcd
//! (`--etcd-endpoints`), behind one type so that the rest of the server is the same for both.

use crate::store::etcd::EtcdStore;
use crate::store::{Changes, Kind, Listed, Op, RedbStore, Store, StoreError, Versioned};
use tokio::sync::watch;

/// One of the two stores.
#[derive(Debug)]
pub enum Backend {
    /// The embedded `redb` file in the state directory.
    Embedded(RedbStore),
    /// etcd v3.
    Etcd(EtcdStore),
}

impl Store for Backend {
    async fn get(&self, kind: Kind, name: &str) -> Result<Option<Versioned>, StoreError> {
        match self {
            Backend::Embedded(s) => s.get(kind, name).await,
            Backend::Etcd(s) => s.get(kind, name).await,
        }
    }

    async fn list_each(
        &self,
        kind: Kind,
        each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError> {
        match self {
            Backend::Embedded(s) => s.list_each(kind, each).await,
            Backend::Etcd(s) => s.list_each(kind, each).await,
        }
    }

    async fn commit(&self, ops: Vec<Op>) -> Result<u64, StoreError> {
        match self {
            Backend::Embedded(s) => s.commit(ops).await,
            Backend::Etcd(s) => s.commit(ops).await,
        }
    }

    async fn commit_fenced(&self, ops: Vec<Op>, based_on: u64) -> Result<u64, StoreError> {
        match self {
            Backend::Embedded(s) => s.commit(ops).await,
            Backend::Etcd(s) => s.commit_fenced(ops, based_on).await,
        }
    }

    fn revision(&self) -> u64 {
        match self {
            Backend::Embedded(s) => s.revision(),
            Backend::Etcd(s) => s.revision(),
        }
    }

    fn watch(&self) -> watch::Receiver<u64> {
        match self {
            Backend::Embedded(s) => s.watch(),
            Backend::Etcd(s) => s.watch(),
        }
    }

    fn changes(&self, from: u64) -> Option<Changes> {
        match self {
            Backend::Embedded(_) => None,
            Backend::Etcd(s) => s.changes(from),
        }
    }
}
