//! The agent's file work in system calls, counted on the real binary with `strace -c -f` (no
//! timing): a cold apply fsyncs each file once and each directory it wrote into once (not once
//! per file), and a no-op re-check opens each managed file once. Opens are compared between a
//! config of N and one of 2N files in the same directories, so the dynamic loader's opens
//! (which depend on the libraries and `LD_LIBRARY_PATH`) cancel out.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const FILES: usize = 200;
const DIRS: usize = 4;
/// The fsyncs of the agent's own state (journal, its configs, originals, the preexisting set,
/// the re-check index): a constant, whatever the number of files.
const OWN: usize = 40;

fn config(dir: &Path, files: usize) -> std::path::PathBuf {
    let mut y = String::from(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: counts\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n",
    );
    for i in 0..files {
        y.push_str(&format!(
            "      - path: /etc/counts/d{}/f{i}.conf\n        mode: 420\n        contents:\n          source: data:,file%20{i}%0A\n",
            i % DIRS
        ));
    }
    let p = dir.join(format!("mc-{files}.yaml"));
    std::fs::write(&p, y).unwrap();
    p
}

/// Runs `hearth-agent apply` under `strace -c -f`; returns the calls per system call.
fn apply_counted(dir: &Path, mc: &Path, root: &Path) -> BTreeMap<String, usize> {
    let out_file = dir.join("strace.txt");
    let out = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(&out_file)
        .arg(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(mc)
        .arg("--root")
        .arg(root)
        .output()
        .expect("strace is needed (vm-tests/scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // strace -c: "% time  seconds  usecs/call  calls  [errors]  syscall", between dashed lines.
    let text = std::fs::read_to_string(&out_file).unwrap();
    let mut counts = BTreeMap::new();
    for line in text.lines().skip_while(|l| !l.starts_with("---")).skip(1) {
        if line.starts_with("---") {
            break;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if let (Some(name), Some(calls)) = (f.last(), f.get(3)) {
            counts.insert(name.to_string(), calls.parse().unwrap());
        }
    }
    assert!(!counts.is_empty(), "no strace summary in {text}");
    counts
}

fn sum(c: &BTreeMap<String, usize>, names: &[&str]) -> usize {
    names.iter().map(|n| c.get(*n).copied().unwrap_or(0)).sum()
}

/// The counts of a cold apply and of the no-op after it, for a config of `files` files.
fn cold_and_no_op(dir: &Path, files: usize) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let mc = config(dir, files);
    let root = dir.join(format!("root-{files}"));
    std::fs::create_dir(&root).unwrap();
    let cold = apply_counted(dir, &mc, &root);
    for i in 0..files {
        let p = root.join(format!("etc/counts/d{}/f{i}.conf", i % DIRS));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("file {i}\n"));
    }
    let noop = apply_counted(dir, &mc, &root);
    (cold, noop)
}

#[test]
fn cold_apply_fsyncs_each_directory_once_and_a_no_op_opens_each_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let (cold, noop) = cold_and_no_op(dir.path(), FILES);
    let (cold2, noop2) = cold_and_no_op(dir.path(), 2 * FILES);

    let fsyncs = sum(&cold, &["fsync", "fdatasync"]);
    // One per file (its content before the rename), one per directory written into, and the
    // agent's own state; before: two per file.
    assert!(fsyncs >= FILES, "every file's content is fsynced: {fsyncs}");
    assert!(
        fsyncs <= FILES + DIRS + OWN,
        "cold apply of {FILES} files in {DIRS} directories: {fsyncs} fsyncs ({cold:?})"
    );
    let more = sum(&cold2, &["fsync", "fdatasync"]) - fsyncs;
    assert!(
        (FILES..=FILES + 5).contains(&more),
        "{FILES} more files in the same directories: {more} more fsyncs"
    );

    // Before: a stat (which opens the parent) and a read per file: 2 opens per file.
    let opens = |c: &BTreeMap<String, usize>| sum(c, &["open", "openat", "openat2"]);
    // Give or take a few: the runtime's threads (more of them on a loaded machine, where the
    // other tests of this binary run beside it) open a few files of their own.
    let more = opens(&noop2) as i64 - opens(&noop) as i64;
    let files = FILES as i64;
    assert!(
        (files - 5..=files + 5).contains(&more),
        "no-op re-check of {FILES} more files: {more} more opens ({noop:?} / {noop2:?})"
    );
    for c in [&noop, &noop2] {
        assert_eq!(
            sum(
                c,
                &["fsync", "fdatasync", "rename", "renameat", "renameat2"]
            ),
            0,
            "a no-op writes nothing: {c:?}"
        );
    }
}
