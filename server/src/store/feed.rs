//! A shared store's changes as a replica's fleet in memory follows them
//! ([`Store::changes`](super::Store::changes)): batches of changes in revision order, a reload when
//! they were compacted away, and the state of the link to the store.

use super::object::{Kind, Versioned};
use tokio::sync::{mpsc, watch};

/// A stream of a shared store's changes and the state of its link
/// ([`Store::changes`](super::Store::changes)).
pub type Changes = (mpsc::Receiver<Batch>, watch::Receiver<Link>);

/// One object's change.
#[derive(Debug, Clone)]
pub struct Change {
    /// Kind.
    pub kind: Kind,
    /// Name.
    pub name: String,
    /// The new document and revisions; `None`: deleted.
    pub value: Option<Versioned>,
    /// The revision of the change.
    pub revision: u64,
}

/// What the follower receives.
#[derive(Debug)]
pub enum Batch {
    /// The changes of one or more revisions, up to and including `revision`.
    Changes {
        /// The newest revision of the batch.
        revision: u64,
        /// The changes, oldest first.
        changes: Vec<Change>,
    },
    /// The changes since the last revision delivered were compacted away: read everything
    /// again.
    Reload,
}

/// The state of the link to etcd, as the stream sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// The stream is open.
    Up,
    /// The stream is down since (Unix seconds), with the last reason.
    Down {
        /// Since when.
        since: u64,
        /// Why.
        reason: String,
    },
}
