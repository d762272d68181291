//! Keys, revisions and sizes on etcd: the bounds on what is read and written, the range of a
//! prefix, and etcd's signed revisions as the store's unsigned ones.

/// The key prefix unless `--etcd-prefix` says otherwise.
pub const DEFAULT_PREFIX: &str = "/hearth/";
/// The largest object read or written (64 MiB, the largest apply body: a document can be no
/// bigger). etcd's own `--max-request-bytes` (1.5 MiB by default) is usually lower: raise it.
pub const MAX_VALUE_BYTES: usize = crate::store::MAX_DOCUMENT_BYTES;
/// The largest answer accepted from etcd (one object and its envelope, or one page of a list).
pub const MAX_RESPONSE_BYTES: usize = MAX_VALUE_BYTES + (1 << 20);
/// The most objects of one kind a list reads (more is an error naming the kind).
pub const MAX_LIST_OBJECTS: usize = 1_000_000;
/// The most bytes of values of one kind a list reads (2 GiB).
pub const MAX_LIST_BYTES: usize = 2 << 30;
/// Keys per page of a list (halved down to 1 while a page exceeds [`MAX_RESPONSE_BYTES`]).
pub(super) const PAGE_KEYS: i64 = 500;

/// The end of the range of keys that start with `prefix` (etcd's `WithPrefix`).
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// An etcd revision (signed) as the store's (unsigned; etcd's are never negative).
pub(super) fn to_u64(r: i64) -> u64 {
    u64::try_from(r).unwrap_or(0)
}
