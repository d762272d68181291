//! The kernel argument ledger: which kernel arguments hearth added itself.
//!
//! hearth removes a kernel argument only if it added it: arguments that the image, the installer
//! or an admin set are never removed (the MCO does not own them either). The ledger lives in
//! `/var/lib/hearth/kargs.json` (shared by all deployments, like all of `/var`) and is written
//! atomically **before** a deployment is staged.
//!
//! Each entry is keyed by a deployment's **whole kernel argument list** and says which of its
//! arguments (with multiplicity) hearth appended:
//!
//! ```json
//! {"version": 1, "entries": [
//!   {"kernelArgs": ["rw", "quiet", "hugepages=32"], "hearthAdded": ["hugepages=32"]},
//!   {"kernelArgs": ["rw", "quiet"], "hearthAdded": []}
//! ]}
//! ```
//!
//! Keying by the list rather than by a deployment id makes the ledger follow the deployments
//! without knowing them: after a rollback the older deployment's list finds its own entry; a
//! deployment that an admin made with `ostree admin upgrade` (same arguments) finds its
//! predecessor's; a crash after the ledger was written but before the deployment was staged
//! leaves an entry that nothing matches. When no entry matches the booted list exactly (an admin
//! changed the arguments by hand), the newest entry's arguments that are still present count as
//! hearth's. Newest entries come first; at most [`MAX_ENTRIES`] are kept.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::OsError;
use super::status::SkippedKarg;
use crate::fs::Root;

/// Where the ledger is kept, inside the root.
pub const LEDGER_PATH: &str = "/var/lib/hearth/kargs.json";

/// How many entries are kept.
pub const MAX_ENTRIES: usize = 32;

/// The ledger file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerFile {
    /// Format version (1).
    pub version: u32,
    /// Newest first.
    pub entries: Vec<LedgerEntry>,
}

/// The arguments hearth added to one kernel argument list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntry {
    /// The whole list (without `ostree=`).
    pub kernel_args: Vec<String>,
    /// Those hearth appended, with multiplicity.
    pub hearth_added: Vec<String>,
}

/// The result of applying a kernel argument change under the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KargPlan {
    /// The new list.
    pub kernel_args: Vec<String>,
    /// hearth's arguments in the new list.
    pub hearth_added: Vec<String>,
    /// Deletions that were not done.
    pub skipped: Vec<SkippedKarg>,
}

/// A multiset of kernel arguments: how many of each there are.
fn counts(list: &[String]) -> HashMap<&str, usize> {
    let mut m = HashMap::with_capacity(list.len());
    for a in list {
        *m.entry(a.as_str()).or_default() += 1;
    }
    m
}

/// `owned ∩ present`, as multisets, in the order of `owned` (linear: counted, not searched).
fn intersect(owned: &[String], present: &[String]) -> Vec<String> {
    let mut pool = counts(present);
    owned
        .iter()
        .filter(|a| match pool.get_mut(a.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .cloned()
        .collect()
}

/// `list` without the first `taken[arg]` occurrences of each argument, in order.
fn without_first(list: &[String], taken: &HashMap<&str, usize>) -> Vec<String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    list.iter()
        .filter(|a| {
            let n = seen.entry(a.as_str()).or_default();
            *n += 1;
            *n > taken.get(a.as_str()).copied().unwrap_or(0)
        })
        .cloned()
        .collect()
}

impl LedgerFile {
    /// hearth's arguments in a deployment whose list is `kargs`.
    pub fn hearth_added(&self, kargs: &[String]) -> Vec<String> {
        if let Some(e) = self.entries.iter().find(|e| e.kernel_args == kargs) {
            return intersect(&e.hearth_added, kargs);
        }
        match self.entries.first() {
            Some(newest) => intersect(&newest.hearth_added, kargs),
            None => Vec::new(),
        }
    }

    /// Records an entry as the newest (replacing one with the same list).
    pub fn record(&mut self, kargs: &[String], hearth_added: &[String]) {
        self.version = 1;
        self.entries.retain(|e| e.kernel_args != kargs);
        self.entries.insert(
            0,
            LedgerEntry {
                kernel_args: kargs.to_vec(),
                hearth_added: intersect(hearth_added, kargs),
            },
        );
        self.entries.truncate(MAX_ENTRIES);
    }
}

/// Applies `delete` then `append` to `current` (the booted deployment's list), deleting only
/// arguments hearth added (`owned`, with multiplicity). Skipped deletions carry their reason;
/// `ledger` names the ledger in it.
///
/// hearth only ever appends, so of several identical arguments hearth's are the last ones: a
/// deletion removes the first of *hearth's* occurrences (as
/// [`hearth_config::plan::apply_kernel_argument_ops`] does within the config's own list) and
/// never one the image or an admin put before them. The order of what stays is kept, which
/// matters where the kernel takes the last occurrence (`console=`).
pub fn plan_kernel_args(
    current: &[String],
    owned: &[String],
    delete: &[String],
    append: &[String],
    ledger: &str,
) -> KargPlan {
    // Linear in the lists' lengths (a search and a `Vec::remove` per deletion was quadratic in
    // a list a manifest controls). Per argument, everything is counted: `total` occurrences in
    // `current`, `owned` of them hearth's. A deletion removes the first of hearth's occurrences,
    // the one at rank `total - ours` among those left; as each removal lowers `total` and
    // `ours` by one, successive deletions of one argument remove consecutive occurrences from
    // that rank on. So each argument's removals are a range of its occurrence numbers in
    // `current`, dropped in one pass at the end.
    let in_current = counts(current);
    let mut owned_count = counts(owned);
    // Per argument: occurrences removed, the rank of the first removed, owned ones taken.
    let mut removed: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut owned_taken: HashMap<&str, usize> = HashMap::new();
    let mut skipped = Vec::new();
    for arg in delete {
        let key = arg.as_str();
        let (done, first) = removed.get(key).copied().unwrap_or((0, 0));
        let total = in_current.get(key).copied().unwrap_or(0) - done;
        let owned_left = owned_count.get(key).copied().unwrap_or(0);
        if total == 0 {
            skipped.push(SkippedKarg {
                argument: arg.clone(),
                reason: format!(
                    "kernel argument {arg} is not in the booted deployment's arguments: nothing \
                     to delete"
                ),
            });
            // An argument hearth added that someone removed by hand is no longer hearth's.
            if owned_left > 0 {
                owned_count.insert(key, owned_left - 1);
                *owned_taken.entry(key).or_default() += 1;
            }
            continue;
        }
        let ours = owned_left.min(total);
        if ours == 0 {
            skipped.push(SkippedKarg {
                argument: arg.clone(),
                reason: format!(
                    "kernel argument {arg} was not added by hearth (the image, the installer or \
                     an admin set it; ledger {ledger}): hearth only removes kernel arguments it \
                     added, so it stays"
                ),
            });
            continue;
        }
        let rank = total - ours;
        // The rank among those left is the same for every removal of this argument (see
        // above), so the occurrence removed is `first + done` of the original ones.
        debug_assert!(
            done == 0 || rank == first,
            "{arg}: rank {rank}, first {first}"
        );
        let first = if done == 0 { rank } else { first };
        removed.insert(key, (done + 1, first));
        owned_count.insert(key, owned_left - 1);
        *owned_taken.entry(key).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut kernel_args: Vec<String> = current
        .iter()
        .filter(|a| {
            let n = seen.entry(a.as_str()).or_default();
            let rank = *n;
            *n += 1;
            match removed.get(a.as_str()) {
                Some(&(done, first)) => !(first..first + done).contains(&rank),
                None => true,
            }
        })
        .cloned()
        .collect();
    kernel_args.extend(append.iter().cloned());
    let mut hearth_added = without_first(owned, &owned_taken);
    hearth_added.extend(append.iter().cloned());
    let hearth_added = intersect(&hearth_added, &kernel_args);
    KargPlan {
        kernel_args,
        hearth_added,
        skipped,
    }
}

/// The ledger of a root.
#[derive(Debug, Clone)]
pub struct KargLedger {
    root: std::path::PathBuf,
}

impl KargLedger {
    /// The ledger at `<root>/var/lib/hearth/kargs.json`.
    pub fn new(root: &Path) -> KargLedger {
        KargLedger {
            root: root.to_path_buf(),
        }
    }

    /// The ledger file's path on this machine.
    pub fn path(&self) -> std::path::PathBuf {
        super::paths::inside(&self.root, LEDGER_PATH)
    }

    fn err(&self, cause: impl std::fmt::Display) -> OsError {
        OsError::Ledger {
            path: LEDGER_PATH.to_string(),
            cause: cause.to_string(),
        }
    }

    /// Reads the ledger (empty when the file does not exist).
    pub fn load(&self) -> Result<LedgerFile, OsError> {
        let root = Root::open(&self.root).map_err(|e| self.err(e))?;
        match root.read(LEDGER_PATH).map_err(|e| self.err(e))? {
            None => Ok(LedgerFile::default()),
            Some(bytes) => {
                let file: LedgerFile = serde_json::from_slice(&bytes)
                    .map_err(|e| self.err(format!("not a valid ledger: {e}")))?;
                if file.version != 1 {
                    return Err(self.err(format!("unknown version {}", file.version)));
                }
                Ok(file)
            }
        }
    }

    /// Writes the ledger atomically (mode 0644, root-owned).
    pub fn store(&self, file: &LedgerFile) -> Result<(), OsError> {
        let root = Root::open(&self.root).map_err(|e| self.err(e))?;
        let mut json = serde_json::to_vec_pretty(file).map_err(|e| self.err(e))?;
        json.push(b'\n');
        root.write_atomic(LEDGER_PATH, &json, 0o644, Some((0, 0)))
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn only_hearths_arguments_are_deleted() {
        let current = s(&["rw", "quiet", "hugepages=32", "selinux=0"]);
        let owned = s(&["hugepages=32", "selinux=0"]);
        let p = plan_kernel_args(
            &current,
            &owned,
            &s(&["hugepages=32", "quiet"]),
            &s(&["nosmt"]),
            LEDGER_PATH,
        );
        assert_eq!(p.kernel_args, s(&["rw", "quiet", "selinux=0", "nosmt"]));
        assert_eq!(p.hearth_added, s(&["selinux=0", "nosmt"]));
        assert_eq!(p.skipped.len(), 1);
        assert_eq!(p.skipped[0].argument, "quiet");
        assert!(p.skipped[0].reason.contains("not added by hearth"));
    }

    #[test]
    fn duplicates_delete_hearths_occurrence_not_the_images() {
        // The image has `a`; hearth appended another `a` and `b`.
        let current = s(&["a", "x", "a", "b"]);
        let owned = s(&["a", "b"]);
        let p = plan_kernel_args(&current, &owned, &s(&["a", "a"]), &[], LEDGER_PATH);
        // One `a` is hearth's, the later one: that one is deleted, the image's stays where it
        // is, and the second deletion is skipped.
        assert_eq!(p.kernel_args, s(&["a", "x", "b"]));
        assert_eq!(p.hearth_added, s(&["b"]));
        assert_eq!(p.skipped.len(), 1);
    }

    /// The definition the linear [`plan_kernel_args`] must keep: a search and a removal per
    /// deletion (quadratic; what the ledger did before).
    fn plan_by_search(
        current: &[String],
        owned: &[String],
        delete: &[String],
        append: &[String],
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        fn take(list: &mut Vec<String>, arg: &str) -> bool {
            match list.iter().position(|a| a == arg) {
                Some(i) => {
                    list.remove(i);
                    true
                }
                None => false,
            }
        }
        let mut kernel_args = current.to_vec();
        let mut owned_left = owned.to_vec();
        let mut skipped = Vec::new();
        for arg in delete {
            let total = kernel_args.iter().filter(|a| *a == arg).count();
            if total == 0 {
                skipped.push(arg.clone());
                take(&mut owned_left, arg);
                continue;
            }
            let ours = owned_left.iter().filter(|a| *a == arg).count().min(total);
            if ours == 0 {
                skipped.push(arg.clone());
                continue;
            }
            let (index, _) = kernel_args
                .iter()
                .enumerate()
                .filter(|(_, a)| *a == arg)
                .nth(total - ours)
                .unwrap();
            kernel_args.remove(index);
            take(&mut owned_left, arg);
        }
        kernel_args.extend(append.iter().cloned());
        let mut hearth_added = owned_left;
        hearth_added.extend(append.iter().cloned());
        let mut pool = kernel_args.clone();
        let hearth_added = hearth_added
            .into_iter()
            .filter(|a| take(&mut pool, a))
            .collect();
        (kernel_args, hearth_added, skipped)
    }

    /// Every list of up to 4 arguments from {a, b} as current, owned and deleted (35,937
    /// cases): the linear plan is the searched one.
    #[test]
    fn the_linear_plan_is_the_searched_plan() {
        let mut lists: Vec<Vec<String>> = vec![vec![]];
        for len in 1..=4 {
            for bits in 0..(1u32 << len) {
                lists.push(
                    (0..len)
                        .map(|i| if bits & (1 << i) == 0 { "a" } else { "b" }.to_string())
                        .collect(),
                );
            }
        }
        let append = s(&["b"]);
        for current in &lists {
            for owned in &lists {
                for delete in &lists {
                    let p = plan_kernel_args(current, owned, delete, &append, LEDGER_PATH);
                    let skipped: Vec<String> =
                        p.skipped.iter().map(|k| k.argument.clone()).collect();
                    assert_eq!(
                        (p.kernel_args, p.hearth_added, skipped),
                        plan_by_search(current, owned, delete, &append),
                        "current {current:?}, owned {owned:?}, delete {delete:?}"
                    );
                }
            }
        }
    }

    /// 100,000 hearth arguments deleted: linear (this took minutes with a search per deletion).
    #[test]
    fn many_deletions_are_linear() {
        let n = 100_000;
        let current: Vec<String> = (0..n).map(|i| format!("k{}", i % 1000)).collect();
        let p = plan_kernel_args(&current, &current, &current, &[], LEDGER_PATH);
        assert!(p.kernel_args.is_empty());
        assert!(p.hearth_added.is_empty());
        assert!(p.skipped.is_empty());
    }

    #[test]
    fn deleting_an_absent_argument_is_skipped() {
        let p = plan_kernel_args(&s(&["rw"]), &s(&["gone"]), &s(&["gone"]), &[], LEDGER_PATH);
        assert_eq!(p.kernel_args, s(&["rw"]));
        assert!(p.hearth_added.is_empty());
        assert!(p.skipped[0].reason.contains("nothing to delete"));
    }

    #[test]
    fn the_ledger_follows_kernel_argument_lists() {
        let mut l = LedgerFile::default();
        assert!(l.hearth_added(&s(&["rw"])).is_empty());
        l.record(&s(&["rw"]), &[]);
        l.record(&s(&["rw", "h=1"]), &s(&["h=1"]));
        l.record(&s(&["rw", "h=1", "s=0"]), &s(&["h=1", "s=0"]));
        // Exact matches (a rollback finds its own entry).
        assert_eq!(l.hearth_added(&s(&["rw", "h=1"])), s(&["h=1"]));
        assert!(l.hearth_added(&s(&["rw"])).is_empty());
        // No exact match: the newest entry's arguments still present.
        assert_eq!(l.hearth_added(&s(&["rw", "s=0", "admin"])), s(&["s=0"]));
        // Recording an existing list moves it to the front.
        l.record(&s(&["rw"]), &[]);
        assert_eq!(l.entries[0].kernel_args, s(&["rw"]));
        assert_eq!(l.entries.len(), 3);
        // Entries never claim arguments their list lacks.
        l.record(&s(&["rw"]), &s(&["nope"]));
        assert!(l.entries[0].hearth_added.is_empty());
        for i in 0..100 {
            l.record(&[format!("x={i}")], &[]);
        }
        assert_eq!(l.entries.len(), MAX_ENTRIES);
    }

    #[test]
    fn the_ledger_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = KargLedger::new(dir.path());
        assert_eq!(ledger.load().unwrap(), LedgerFile::default());
        let mut f = LedgerFile::default();
        f.record(&s(&["rw", "h=1"]), &s(&["h=1"]));
        ledger.store(&f).unwrap();
        assert_eq!(ledger.load().unwrap(), f);
        assert!(ledger.path().ends_with("var/lib/hearth/kargs.json"));
        std::fs::write(ledger.path(), "{").unwrap();
        let e = ledger.load().unwrap_err().to_string();
        assert!(e.contains("/var/lib/hearth/kargs.json"), "{e}");
    }
}
