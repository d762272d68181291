//! The agent's own state (lock, journal, stored configs, temporary files) is written through the
//! same confined writer as managed files, and what a `kill -9` left of it is cleaned at start.
//! The real `hearth-agent` binary on an offline image root (`--root DIR`).

use crate::common;

use common::mc;
use std::path::Path;
use std::process::Output;

fn apply(root: &Path, config: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(["apply", "--once-from"])
        .arg(config)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn config(root: &Path) -> std::path::PathBuf {
    let path = root.join("config.yaml");
    std::fs::write(
        &path,
        mc(
            "state",
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/app.conf\n        contents:\n          source: data:,x%0A\n",
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_state_directory_linked_out_of_the_root_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("var/lib")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("var/lib/hearth")).unwrap();
    let out = apply(root.path(), &config(root.path()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("agent.lock") && stderr.contains("leads outside the root"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "written outside the root: {left:?}");
    assert!(!root.path().join("etc/app.conf").exists());
}

#[test]
fn temporary_files_of_the_agents_state_are_cleaned_at_start() {
    let root = tempfile::tempdir().unwrap();
    let cfg = config(root.path());
    let out = apply(root.path(), &cfg);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // What a kill -9 in the middle of writing the journal, a stored config or an original
    // leaves: temporary files under the names the agent's atomic writes use.
    let state = root.path().join("var/lib/hearth");
    let leftovers = [
        state.join(".hearth-tmp-4242-0-journal.json"),
        state.join("configs/.hearth-tmp-4242-1-0123.json"),
        state.join("originals/.hearth-tmp-4242-2-abcd"),
    ];
    for l in &leftovers {
        std::fs::create_dir_all(l.parent().unwrap()).unwrap();
        std::fs::write(l, "half").unwrap();
    }
    let out = apply(root.path(), &cfg);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for l in &leftovers {
        assert!(!l.exists(), "{} left", l.display());
    }
    assert!(state.join("journal.json").exists());
    assert!(state.join("agent.lock").exists());
}

/// Issue 31: a config that wrote the agent's journal, credential or lock left an agent that the
/// server refused forever (409) while it showed the node Done. Now the agent refuses such a
/// config naming the field before it writes anything, and goes on taking the next one.
#[test]
fn a_config_that_writes_the_agents_own_state_is_refused_and_nothing_is_written() {
    let root = tempfile::tempdir().unwrap();
    let cfg = config(root.path());
    let out = apply(root.path(), &cfg);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let journal = root.path().join("var/lib/hearth/journal.json");
    let before = std::fs::read(&journal).unwrap();
    let bad = root.path().join("bad.yaml");
    std::fs::write(
        &bad,
        mc(
            "takeover",
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/other.conf\n        contents:\n          source: data:,y%0A\n      - path: /var/lib/hearth/journal.json\n        contents:\n          source: data:,%7B%7D\n",
        ),
    )
    .unwrap();
    let out = apply(root.path(), &bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("spec.config.storage.files[1].path")
            && stderr.contains("belongs to hearth-agent"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        before,
        "the journal was written"
    );
    assert!(!root.path().join("etc/other.conf").exists());
    // The agent still takes a good config.
    let out = apply(root.path(), &cfg);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
