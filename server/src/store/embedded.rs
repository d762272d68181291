//! The embedded store, the default: [`RedbStore`], one file written by `redb`, a pure-Rust
//! embedded database with ACID transactions (copy-on-write B-trees, checksummed commits, fsync on
//! each commit), so a `kill -9` or a power cut leaves either the old or the new state, never a mix.

use super::contract::{Expect, Listed, Op, Store, StoreError};
use super::object::{Kind, Versioned};
use redb::{Database, ReadableTable, TableDefinition};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::watch;

/// redb's page cache. Its default, 1 GiB, fills with every page a commit writes; but the server
/// reads the store only when it starts (every read is answered from the fleet in memory,
/// `crate::fleet`), so the cache only holds the B-tree pages a commit walks to write.
const CACHE_BYTES: usize = 32 << 20;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION_KEY: &str = "revision";
const HEADER: usize = 16;

fn key(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.as_str())
}

fn encode(value: &[u8], create: u64, modified: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + value.len());
    out.extend_from_slice(&create.to_le_bytes());
    out.extend_from_slice(&modified.to_le_bytes());
    out.extend_from_slice(value);
    out
}

fn decode(bytes: &[u8]) -> Result<Versioned, StoreError> {
    if bytes.len() < HEADER {
        return Err(StoreError::Backend("a stored object is truncated".into()));
    }
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&bytes[..8]);
    b.copy_from_slice(&bytes[8..16]);
    Ok(Versioned {
        value: bytes[HEADER..].to_vec(),
        create_revision: u64::from_le_bytes(a),
        mod_revision: u64::from_le_bytes(b),
    })
}

fn backend(e: impl fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// The embedded store: one `redb` database file.
pub struct RedbStore {
    db: Arc<Database>,
    tx: watch::Sender<u64>,
}

impl fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("revision", &*self.tx.borrow())
            .finish()
    }
}

impl RedbStore {
    /// Opens (or creates) the database file. Fails when another process holds it.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        // Every MachineConfig is in it, in clear: mode 0600 whatever the umask, also for a
        // database an older version created with the umask's mode.
        {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)
                .map_err(|e| {
                    StoreError::Backend(format!("cannot open the database {}: {e}", path.display()))
                })?;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| {
                    StoreError::Backend(format!(
                        "cannot make the database {} private: {e}",
                        path.display()
                    ))
                })?;
        }
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| {
                StoreError::Backend(format!("cannot open the database {}: {e}", path.display()))
            })?;
        let txn = db.begin_write().map_err(backend)?;
        let revision = {
            txn.open_table(OBJECTS).map_err(backend)?;
            let meta = txn.open_table(META).map_err(backend)?;
            let r = meta
                .get(REVISION_KEY)
                .map_err(backend)?
                .map(|v| v.value())
                .unwrap_or(0);
            r
        };
        txn.commit().map_err(backend)?;
        let (tx, _) = watch::channel(revision);
        Ok(RedbStore {
            db: Arc::new(db),
            tx,
        })
    }

    fn commit_blocking(db: &Database, ops: &[Op]) -> Result<u64, StoreError> {
        let txn = db.begin_write().map_err(backend)?;
        let revision;
        {
            let mut objects = txn.open_table(OBJECTS).map_err(backend)?;
            let mut meta = txn.open_table(META).map_err(backend)?;
            let current = meta
                .get(REVISION_KEY)
                .map_err(backend)?
                .map(|v| v.value())
                .unwrap_or(0);
            revision = current + 1;
            for op in ops {
                let (kind, name, expect) = op.target();
                let k = key(kind, name);
                let existing = match objects.get(k.as_str()).map_err(backend)? {
                    Some(v) => Some(decode(v.value())?),
                    None => None,
                };
                let found = existing.as_ref().map(|v| v.mod_revision);
                let ok = match expect {
                    Expect::Any => true,
                    Expect::Absent => existing.is_none(),
                    Expect::Revision(r) => found == Some(r),
                };
                if !ok {
                    return Err(StoreError::Conflict {
                        kind,
                        name: name.to_string(),
                        expected: expect,
                        found,
                    });
                }
                match op {
                    Op::Put { value, .. } => {
                        let create = existing.map(|v| v.create_revision).unwrap_or(revision);
                        objects
                            .insert(k.as_str(), encode(value, create, revision).as_slice())
                            .map_err(backend)?;
                    }
                    Op::Delete { .. } => {
                        objects.remove(k.as_str()).map_err(backend)?;
                    }
                }
            }
            meta.insert(REVISION_KEY, revision).map_err(backend)?;
        }
        txn.commit().map_err(backend)?;
        Ok(revision)
    }
}

impl Store for RedbStore {
    async fn get(&self, kind: Kind, name: &str) -> Result<Option<Versioned>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(OBJECTS).map_err(backend)?;
        match table.get(key(kind, name).as_str()).map_err(backend)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    async fn list_each(
        &self,
        kind: Kind,
        each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(OBJECTS).map_err(backend)?;
        // Keys are "kind/name": the range ["kind/", "kind0") holds exactly that kind.
        let start = format!("{}/", kind.as_str());
        let end = format!("{}0", kind.as_str());
        for entry in table.range(start.as_str()..end.as_str()).map_err(backend)? {
            let (k, v) = entry.map_err(backend)?;
            let name = k.value()[start.len()..].to_string();
            each(Listed::Object(name, decode(v.value())?))?;
        }
        Ok(())
    }

    async fn commit(&self, ops: Vec<Op>) -> Result<u64, StoreError> {
        if ops.is_empty() {
            return Ok(self.revision());
        }
        let db = self.db.clone();
        let revision = tokio::task::spawn_blocking(move || Self::commit_blocking(&db, &ops))
            .await
            .map_err(backend)??;
        self.tx.send_replace(revision);
        Ok(revision)
    }

    fn revision(&self) -> u64 {
        *self.tx.borrow()
    }

    fn watch(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}
