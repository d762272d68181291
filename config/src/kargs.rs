//! Kernel arguments: how MachineConfig entries split into arguments (the kernel's own quoting
//! rules), which entries are refused, and the delete-then-append diff the agent applies.
//!
//! A `spec.kernelArguments` entry is kept as the user wrote it (`"a=1 b=2"` stays one entry in
//! the rendered config, as in the MCO); planning and applying work on the arguments the entries
//! split into. Splitting follows the kernel's `next_arg` (lib/cmdline.c): arguments are separated
//! by white space outside double quotes, and a double quote anywhere in an argument toggles
//! quoting, so `foo="x y"` and `"a b"` are one argument each.
//!
//! Every function here is linear or `n log n` in the number of arguments: a manifest may hold
//! as many as it likes.

use serde::Serialize;
use std::collections::HashMap;
use std::hash::BuildHasher;

/// The kernel's `isspace` (space, `\t`, `\n`, `\v`, `\f`, `\r`).
fn is_kernel_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// The arguments one entry holds, split as the kernel splits its command line.
pub fn split_entry(entry: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_quote = false;
    for ch in entry.chars() {
        if is_kernel_space(ch) && !in_quote {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if ch == '"' {
            in_quote = !in_quote;
        }
        current.push(ch);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The kernel arguments in `entries`, in order: each entry split with [`split_entry`], so
/// `"a=1 b=2"` is two arguments and `foo="x y"` one.
pub fn split_kernel_arguments(entries: &[String]) -> Vec<String> {
    entries.iter().flat_map(|e| split_entry(e)).collect()
}

/// What is wrong with a `spec.kernelArguments` entry, if anything: empty, a control character
/// (a newline would end the boot loader's options line and start another one), or an unclosed
/// double quote (the kernel would take the rest of the command line into this argument).
pub fn check_entry(entry: &str) -> Option<String> {
    if entry.chars().all(is_kernel_space) {
        return Some("kernel argument entry is empty".to_string());
    }
    if let Some(c) = entry.chars().find(|c| c.is_control()) {
        return Some(format!(
            "kernel argument entry {entry:?} contains the control character {c:?}; kernel arguments are one line of printable text (separate arguments with spaces or give one per entry)"
        ));
    }
    if entry.chars().filter(|c| *c == '"').count() % 2 == 1 {
        return Some(format!(
            "kernel argument entry {entry:?} has an unclosed double quote; the kernel would read the rest of the command line into it"
        ));
    }
    None
}

/// The length of the longest start of `wanted` that ends `booted` (`booted.ends_with(&wanted[..n])`
/// for the largest `n`): the arguments a former manager already appended in the config's order.
/// Linear (Knuth-Morris-Pratt's failure function over `wanted`, then one pass over `booted`).
pub fn booted_prefix_len(booted: &[String], wanted: &[String]) -> usize {
    if wanted.is_empty() {
        return 0;
    }
    // failure[i]: the longest proper prefix of wanted[..=i] that is also its suffix.
    let mut failure = vec![0usize; wanted.len()];
    let mut k = 0;
    for i in 1..wanted.len() {
        while k > 0 && wanted[i] != wanted[k] {
            k = failure[k - 1];
        }
        if wanted[i] == wanted[k] {
            k += 1;
        }
        failure[i] = k;
    }
    // Match wanted against booted; at the end, `matched` is the longest prefix of wanted that
    // is a suffix of booted.
    let mut matched = 0;
    for b in booted {
        if matched == wanted.len() {
            matched = failure[matched - 1];
        }
        while matched > 0 && *b != wanted[matched] {
            matched = failure[matched - 1];
        }
        if *b == wanted[matched] {
            matched += 1;
        }
    }
    matched
}

/// Kernel argument operations: delete these occurrences, then append these arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KernelArgumentsDiff {
    /// One entry per occurrence to delete; each removes the first remaining occurrence of exactly
    /// that argument.
    pub delete: Vec<String>,
    /// Appended in order after the deletions.
    pub append: Vec<String>,
}

/// Applies kernel argument operations as the agent must: each `delete` entry removes the first
/// remaining occurrence of exactly that argument (none: nothing), then `append` is appended.
/// Linear: deleting `k` copies of an argument removes its first `k` occurrences.
pub fn apply_kernel_argument_ops(
    current: &[String],
    delete: &[String],
    append: &[String],
) -> Vec<String> {
    let mut pending: HashMap<&str, usize> = HashMap::new();
    for d in delete {
        *pending.entry(d.as_str()).or_default() += 1;
    }
    let mut out = Vec::with_capacity(current.len() + append.len());
    for a in current {
        match pending.get_mut(a.as_str()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => out.push(a.clone()),
        }
    }
    out.extend(append.iter().cloned());
    out
}

/// The deletions that keep, of every argument, as many of its last occurrences in `current` as
/// `prefix` holds, if that leaves exactly `prefix`.
fn deletions_keeping(current: &[String], prefix: &[String]) -> Option<Vec<String>> {
    let mut total: HashMap<&str, usize> = HashMap::new();
    for a in current {
        *total.entry(a.as_str()).or_default() += 1;
    }
    let mut keep: HashMap<&str, usize> = HashMap::new();
    for a in prefix {
        *keep.entry(a.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut kept = 0;
    let mut delete = Vec::new();
    for a in current {
        let n = total[a.as_str()];
        let k = keep.get(a.as_str()).copied().unwrap_or(0);
        let rank = seen.entry(a.as_str()).or_default();
        // Occurrences 0..n-k are deleted (the first ones); the last k stay.
        if *rank + k >= n {
            if prefix.get(kept) != Some(a) {
                return None;
            }
            kept += 1;
        } else {
            delete.push(a.clone());
        }
        *rank += 1;
    }
    (kept == prefix.len()).then_some(delete)
}

/// Polynomial hashes modulo the Mersenne prime 2^61 - 1.
const MODULUS: u64 = (1 << 61) - 1;

fn mul_mod(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) % MODULUS as u128) as u64
}

/// A segment tree over the positions of `current` holding the polynomial hash of the arguments
/// kept so far, in position order: inserting one is `log n`, the hash of the whole kept sequence
/// is at the root.
struct KeptHash {
    size: usize,
    count: Vec<usize>,
    hash: Vec<u64>,
    powers: Vec<u64>,
}

impl KeptHash {
    fn new(n: usize, base: u64) -> Self {
        let size = n.max(1).next_power_of_two();
        let mut powers = Vec::with_capacity(n + 1);
        let mut p = 1;
        for _ in 0..=n {
            powers.push(p);
            p = mul_mod(p, base);
        }
        KeptHash {
            size,
            count: vec![0; 2 * size],
            hash: vec![0; 2 * size],
            powers,
        }
    }

    fn insert(&mut self, pos: usize, value: u64) {
        let mut i = pos + self.size;
        self.count[i] = 1;
        self.hash[i] = value;
        while i > 1 {
            i /= 2;
            let (l, r) = (2 * i, 2 * i + 1);
            self.count[i] = self.count[l] + self.count[r];
            self.hash[i] =
                (self.hash[l] + mul_mod(self.hash[r], self.powers[self.count[l]])) % MODULUS;
        }
    }

    fn root(&self) -> u64 {
        self.hash[1]
    }
}

/// The smallest "delete some, then append" change that turns `current` into exactly `desired`,
/// keeping order and duplicates.
///
/// A `delete` entry removes the first remaining occurrence of that argument, so deleting `d`
/// copies of `x` keeps the last `n - d` of its `n` occurrences. The kept arguments must form a
/// prefix of `desired` (appends go to the end), so: for the longest prefix `P` of `desired` for
/// which keeping, of every argument, as many of its last occurrences as `P` holds (and none of
/// arguments `P` lacks) leaves exactly `P`, delete every other occurrence and append the rest of
/// `desired`. The empty prefix always works (delete all, append all), so a result always exists;
/// equal lists give an empty diff.
///
/// Time `O(n log n)`: growing the prefix by one argument keeps one more occurrence of it (the
/// one just before those already kept), so the kept sequence is maintained in a segment tree
/// with its polynomial hash (random per process, so no input can aim at collisions) and compared
/// with the prefix's hash at every length; the longest matching length is then checked exactly.
pub fn diff_kernel_arguments(current: &[String], desired: &[String]) -> KernelArgumentsDiff {
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, a) in current.iter().enumerate() {
        positions.entry(a.as_str()).or_default().push(i);
    }
    let state = std::collections::hash_map::RandomState::new();
    let token = |s: &str| state.hash_one(s) % (MODULUS - 1) + 1;
    let base = state.hash_one("hearth kernel argument hash base") % (MODULUS - 3) + 2;
    let mut tree = KeptHash::new(current.len(), base);
    let mut used: HashMap<&str, usize> = HashMap::new();
    let mut prefix_hash = 0u64;
    let mut power = 1u64;
    let mut candidates = vec![0];
    for (j, a) in desired.iter().enumerate() {
        let Some(pos) = positions.get(a.as_str()) else {
            break;
        };
        let c = used.entry(a.as_str()).or_default();
        *c += 1;
        if *c > pos.len() {
            // More copies than `current` has: no longer prefix can be kept either.
            break;
        }
        let h = token(a);
        tree.insert(pos[pos.len() - *c], h);
        prefix_hash = (prefix_hash + mul_mod(h, power)) % MODULUS;
        power = mul_mod(power, base);
        if tree.root() == prefix_hash {
            candidates.push(j + 1);
        }
    }
    for &len in candidates.iter().rev() {
        if let Some(delete) = deletions_keeping(current, &desired[..len]) {
            return KernelArgumentsDiff {
                delete,
                append: desired[len..].to_vec(),
            };
        }
    }
    // Unreachable: the empty prefix always matches.
    KernelArgumentsDiff {
        delete: current.to_vec(),
        append: desired.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn entries_split_like_the_kernel_next_arg() {
        assert_eq!(
            split_kernel_arguments(&s(&["a=1  b=2", "\tc", "d=\"x y\" e", ""])),
            s(&["a=1", "b=2", "c", "d=\"x y\"", "e"])
        );
        assert_eq!(split_entry("foo=\"x y\""), s(&["foo=\"x y\""]));
        assert_eq!(split_entry("\"a b\" c"), s(&["\"a b\"", "c"]));
        assert_eq!(split_entry("a=\"x\"y\"z w\""), s(&["a=\"x\"y\"z w\""]));
        assert_eq!(
            split_entry("a\u{b}b"),
            s(&["a", "b"]),
            "\\v is kernel space"
        );
    }

    #[test]
    fn entries_are_checked() {
        assert_eq!(check_entry("a=1 b=2"), None);
        assert_eq!(check_entry("foo=\"x y\""), None);
        assert!(check_entry("").unwrap().contains("empty"));
        assert!(check_entry("  ").unwrap().contains("empty"));
        assert!(check_entry("a\nb").unwrap().contains("'\\n'"));
        assert!(check_entry("a\0").unwrap().contains("control character"));
        assert!(check_entry("a=\"x").unwrap().contains("unclosed"));
    }

    #[test]
    fn booted_prefix_is_the_longest_start_of_wanted_ending_booted() {
        let slow = |booted: &[String], wanted: &[String]| {
            (0..=wanted.len())
                .rev()
                .find(|&n| booted.ends_with(&wanted[..n]))
                .unwrap_or(0)
        };
        let cases: [(&[&str], &[&str]); 7] = [
            (&["ro", "a", "b"], &["a", "b", "c"]),
            (&["ro", "a", "b"], &["b", "c"]),
            (&["a", "a", "a"], &["a", "a", "b"]),
            (&["a", "b", "a", "b", "a"], &["a", "b", "a", "c"]),
            (&[], &["a"]),
            (&["a"], &[]),
            (&["x", "a", "b", "a", "b"], &["a", "b", "a", "b"]),
        ];
        for (booted, wanted) in cases {
            let (b, w) = (s(booted), s(wanted));
            assert_eq!(
                booted_prefix_len(&b, &w),
                slow(&b, &w),
                "{booted:?} {wanted:?}"
            );
        }
    }

    #[test]
    fn apply_deletes_first_occurrences() {
        assert_eq!(
            apply_kernel_argument_ops(&s(&["a", "b", "a", "c"]), &s(&["a", "z"]), &s(&["d"])),
            s(&["b", "a", "c", "d"])
        );
    }

    #[test]
    fn kernel_argument_diff_keeps_matching_prefix() {
        let d = diff_kernel_arguments(&s(&["a", "b", "c"]), &s(&["a", "c", "d"]));
        assert_eq!(d.delete, s(&["b"]));
        assert_eq!(d.append, s(&["d"]));
        let d = diff_kernel_arguments(&s(&["a", "b"]), &s(&["b", "a"]));
        assert_eq!(
            apply_kernel_argument_ops(&s(&["a", "b"]), &d.delete, &d.append),
            s(&["b", "a"])
        );
        assert_eq!(d.delete, s(&["a"]));
        assert_eq!(d.append, s(&["a"]));
        assert_eq!(
            diff_kernel_arguments(&s(&["x", "x"]), &s(&["x", "x"])),
            KernelArgumentsDiff::default()
        );
    }

    #[test]
    fn kernel_argument_diff_deletes_the_right_duplicate() {
        // Deleting one "a" removes the first; to keep [a, b] from [a, b, a] the plan must not
        // delete a single "a" (that would leave [b, a]).
        let cur = s(&["a", "b", "a"]);
        let want = s(&["a", "b"]);
        let d = diff_kernel_arguments(&cur, &want);
        assert_eq!(apply_kernel_argument_ops(&cur, &d.delete, &d.append), want);
        let want = s(&["b", "a"]);
        let d = diff_kernel_arguments(&cur, &want);
        assert_eq!(d.delete, s(&["a"]));
        assert!(d.append.is_empty());
    }
}
