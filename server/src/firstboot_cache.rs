//! First-boot answers, encoded once.
//!
//! `/config/{pool}` answers with the pool's (or a node's) rendered config plus the bootstrap
//! (server URL, CA, pool, token), converted to the Ignition version the node asked for and
//! encoded as JSON: some tens of microseconds of work per request that gives the same bytes
//! for the same inputs. A rendered config's name carries the hash of its content, and the CA
//! and the served agent binaries do not change while the server runs, so (rendered config,
//! Ignition version, embedded token, node, server URL) determines the answer; the answer is
//! cached under that key. Authentication and every check before the answer (which pool, which
//! node, whether the token may fetch it) run on every request as before: only the encoding is
//! skipped.
//!
//! Bounded: at most [`MAX_ENTRIES`] answers, each at most [`MAX_ENTRY_BYTES`] (a larger answer
//! is encoded per request, as before); when full, the oldest entry goes.

use axum::body::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The most answers kept.
pub const MAX_ENTRIES: usize = 64;
/// The largest answer kept (bytes of JSON).
pub const MAX_ENTRY_BYTES: usize = 1 << 20;

/// What determines a first-boot answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The rendered config's name (content-addressed).
    pub rendered: String,
    /// The Ignition spec version served.
    pub version: String,
    /// The bootstrap token embedded in the answer, if any.
    pub token: Option<String>,
    /// The node whose own config this is, if any.
    pub node: Option<String>,
    /// The server URL embedded in the answer.
    pub url: String,
}

/// The cache (one per router).
#[derive(Debug, Default)]
pub struct FirstBootCache {
    inner: Mutex<Inner>,
    encoded: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Key, Bytes>,
    order: VecDeque<Key>,
}

impl FirstBootCache {
    /// The answer for `key`: the cached one, or `encode()`'s (kept when small enough). An
    /// error from `encode` is returned and nothing is kept.
    pub fn get_or_encode<E>(
        &self,
        key: Key,
        encode: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Bytes, E> {
        if let Some(b) = self.lock().map.get(&key) {
            return Ok(b.clone());
        }
        // Encoded outside the lock: two first requests for one key may both encode (same bytes).
        let body = Bytes::from(encode()?);
        self.encoded.fetch_add(1, Ordering::Relaxed);
        if body.len() <= MAX_ENTRY_BYTES {
            let mut inner = self.lock();
            if !inner.map.contains_key(&key) {
                while inner.order.len() >= MAX_ENTRIES {
                    if let Some(old) = inner.order.pop_front() {
                        inner.map.remove(&old);
                    }
                }
                inner.order.push_back(key.clone());
                inner.map.insert(key, body.clone());
            }
        }
        Ok(body)
    }

    /// How many answers were encoded (not taken from the cache) since start.
    pub fn encoded(&self) -> u64 {
        self.encoded.load(Ordering::Relaxed)
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves a consistent map (each step is one insert or
        // remove): go on with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rendered: &str, token: Option<&str>) -> Key {
        Key {
            rendered: rendered.into(),
            version: "3.4.0".into(),
            token: token.map(str::to_string),
            node: None,
            url: "https://localhost:22623".into(),
        }
    }

    #[test]
    fn the_same_inputs_are_encoded_once_and_other_inputs_apart() {
        let c = FirstBootCache::default();
        let ok = |s: &str| -> Result<Vec<u8>, ()> { Ok(s.as_bytes().to_vec()) };
        assert_eq!(
            c.get_or_encode(key("r-1", Some("t")), || ok("a")).unwrap(),
            "a"
        );
        assert_eq!(
            c.get_or_encode(key("r-1", Some("t")), || ok("b")).unwrap(),
            "a"
        );
        assert_eq!(c.encoded(), 1);
        // Another token, another rendered config: another answer.
        assert_eq!(
            c.get_or_encode(key("r-1", Some("u")), || ok("c")).unwrap(),
            "c"
        );
        assert_eq!(
            c.get_or_encode(key("r-2", Some("t")), || ok("d")).unwrap(),
            "d"
        );
        assert_eq!(c.encoded(), 3);
        // Errors are passed on and not kept.
        assert_eq!(
            c.get_or_encode(key("r-3", None), || Err::<Vec<u8>, _>(7)),
            Err(7)
        );
        assert_eq!(c.get_or_encode(key("r-3", None), || ok("e")).unwrap(), "e");
    }

    #[test]
    fn the_cache_is_bounded_in_entries_and_entry_size() {
        let c = FirstBootCache::default();
        let ok = |n: usize| -> Result<Vec<u8>, ()> { Ok(vec![b'x'; n]) };
        for i in 0..MAX_ENTRIES * 3 {
            c.get_or_encode(key(&format!("r-{i}"), None), || ok(10))
                .unwrap();
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        // The oldest went, the newest stayed.
        let before = c.encoded();
        c.get_or_encode(key(&format!("r-{}", MAX_ENTRIES * 3 - 1), None), || ok(10))
            .unwrap();
        assert_eq!(c.encoded(), before);
        c.get_or_encode(key("r-0", None), || ok(10)).unwrap();
        assert_eq!(c.encoded(), before + 1);
        // Too large to keep: encoded every time.
        let big = key("big", None);
        c.get_or_encode(big.clone(), || ok(MAX_ENTRY_BYTES + 1))
            .unwrap();
        c.get_or_encode(big, || ok(MAX_ENTRY_BYTES + 1)).unwrap();
        assert_eq!(c.encoded(), before + 3);
    }
}
