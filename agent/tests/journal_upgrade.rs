//! The agent binary on an offline image root: an upgraded agent takes over a journal of the
//! previous format (version 1, specs inline), and the journal it writes refers to specs stored
//! once, by digest, with nothing left behind.

use hearth_hostops::verify::sha256_hex;
use std::path::Path;
use std::process::Command;

const JOURNAL: &str = "var/lib/hearth/journal.json";
const CONFIGS: &str = "var/lib/hearth/configs";

fn config(name: &str, body: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /etc/upgrade/a.conf\n        mode: 0644\n        contents:\n          source: \"data:,{body}\"\n      - path: /etc/upgrade/b.conf\n        mode: 0600\n        contents:\n          source: \"data:,b\"\n"
    )
}

fn agent(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_hearth-agent"))
        .args(args)
        .output()
        .expect("run hearth-agent");
    assert!(
        out.status.success(),
        "hearth-agent {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn apply(root: &Path, cfg: &Path) {
    agent(&[
        "apply",
        "--once-from",
        cfg.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
}

fn status(root: &Path) -> serde_json::Value {
    let out = agent(&["status", "--root", root.to_str().unwrap(), "-o", "json"]);
    serde_json::from_slice(&out.stdout).expect("status is JSON")
}

fn journal(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join(JOURNAL)).unwrap()).unwrap()
}

fn stored(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root.join(CONFIGS))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn an_upgraded_agent_takes_over_a_version_1_journal_and_stores_each_spec_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let one = dir.path().join("one.yaml");
    std::fs::write(&one, config("rendered-one", "one")).unwrap();
    apply(&root, &one);

    // Version 2: the journal names the spec by digest; the spec is stored once.
    let j = journal(&root);
    assert_eq!(j["version"], 2, "{j:#}");
    let digest = j["current"]["config"]
        .as_str()
        .expect("a reference")
        .to_string();
    assert_eq!(j["desired"]["config"], digest.as_str());
    assert_eq!(stored(&root), vec![format!("{digest}.json")]);
    let spec_bytes = std::fs::read(root.join(CONFIGS).join(format!("{digest}.json"))).unwrap();
    assert_eq!(sha256_hex(&spec_bytes), digest);

    // Make it what an agent of the previous version left: the specs inline, no store.
    let spec: serde_json::Value = serde_json::from_slice(&spec_bytes).unwrap();
    let mut v1 = j.clone();
    v1["version"] = 1.into();
    for which in ["current", "desired"] {
        v1[which] = serde_json::json!({"name": "rendered-one", "spec": spec});
    }
    std::fs::write(root.join(JOURNAL), serde_json::to_vec_pretty(&v1).unwrap()).unwrap();
    std::fs::remove_dir_all(root.join(CONFIGS)).unwrap();

    // The new agent reads it...
    let st = status(&root);
    assert_eq!(st["current"], "rendered-one", "{st:#}");
    assert_eq!(st["state"], "Done", "{st:#}");

    // ...and applies the next config over it, writing version 2 with only that spec kept.
    let two = dir.path().join("two.yaml");
    std::fs::write(&two, config("rendered-two", "two")).unwrap();
    apply(&root, &two);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/upgrade/a.conf")).unwrap(),
        "two"
    );
    let j = journal(&root);
    assert_eq!(j["version"], 2, "{j:#}");
    assert!(j["current"].get("spec").is_none(), "{j:#}");
    let digest = j["current"]["config"].as_str().unwrap().to_string();
    assert_eq!(stored(&root), vec![format!("{digest}.json")]);
    let st = status(&root);
    assert_eq!(st["current"], "rendered-two", "{st:#}");
    assert_eq!(st["desired"], "rendered-two", "{st:#}");
    // The journal stays small: the spec is not in it.
    let text = std::fs::read_to_string(root.join(JOURNAL)).unwrap();
    assert!(!text.contains("data:,two"), "{text}");
}
