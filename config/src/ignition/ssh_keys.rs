//! Each SSH key of a user kept once, in order (the MCO's `dedupePasswdUserSSHKeys`): the
//! translation from 2.x applies it to the merged users, rendering to the merged config (through
//! `crate::mco`, which re-exports these as one of the MCO's rules).

use super::v3::User;
use std::collections::HashSet;

/// Keeps the first occurrence of each key, in order (the MCO's `dedupePasswdUserSSHKeys`).
/// Linear in the number of keys.
pub fn dedup_ssh_keys(keys: &mut Vec<String>) {
    let mut seen: HashSet<String> = HashSet::with_capacity(keys.len());
    keys.retain(|k| seen.insert(k.clone()));
}

/// [`dedup_ssh_keys`] for every user of a config.
pub fn dedup_users_ssh_keys(users: &mut [User]) {
    for u in users {
        dedup_ssh_keys(&mut u.ssh_authorized_keys);
    }
}
