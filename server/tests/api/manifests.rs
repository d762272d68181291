//! First start, applying manifests (the example fleet, hearth's fixtures, the MCO corpus), refusing invalid ones
//! whole, deleting objects.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::os::unix::fs::MetadataExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_creates_secrets_and_a_second_start_reuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let s = start(&state, options(5)).await;
    assert!(s.first_start);
    assert_eq!(s.new_bootstrap_tokens, ["master", "worker"]);
    for f in [
        "pki/ca.crt",
        "pki/ca.key",
        "pki/server.crt",
        "pki/server.key",
        "admin.token",
        "tokens/worker.token",
        "tokens/master.token",
        "hearth.redb",
    ] {
        let m = std::fs::metadata(state.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        if f != "hearth.redb" {
            assert_eq!(m.mode() & 0o777, 0o600, "{f}");
        }
    }
    for d in ["", "pki", "tokens"] {
        let m = std::fs::metadata(state.join(d)).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700, "{d}/");
    }
    let how = s.instructions("https://h:22623");
    assert!(
        how.contains("hearth login --server https://h:22623 --ca"),
        "{how}"
    );
    assert!(how.contains("/config/worker?token="), "{how}");
    assert!(
        !how.contains(&bootstrap_token(&s, "worker")),
        "no secrets in the instructions"
    );
    let api = Api::admin(&s);
    assert_eq!(api.get("/api/v1/pools").await.status, StatusCode::OK);
    let ca = std::fs::read(state.join("pki/ca.crt")).unwrap();
    let token = api.token.clone();
    let worker = bootstrap_token(&s, "worker");
    s.shutdown().await;

    let s = start(&state, options(5)).await;
    assert!(!s.first_start);
    assert!(s.new_bootstrap_tokens.is_empty());
    assert_eq!(std::fs::read(state.join("pki/ca.crt")).unwrap(), ca);
    let api = Api::admin(&s);
    assert_eq!(api.token, token);
    assert_eq!(api.get("/api/v1/pools").await.status, StatusCode::OK);
    assert_eq!(bootstrap_token(&s, "worker"), worker);
    api.enroll(&worker, "w0", json!({})).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_the_example_fleet_renders_every_pool() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let a = api.apply(&example_files()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let results = a.json["results"].as_array().unwrap();
    assert!(
        results
            .iter()
            .all(|r| r["action"] == "created" || r["action"] == "configured"),
        "{results:?}"
    );
    assert!(results.iter().any(|r| r["kind"] == "MachineConfiguration"));
    // Pools: worker and infra rendered, nodes counted.
    let worker = pool(&api, "worker").await;
    let target = worker["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(target.starts_with("rendered-worker-"), "{worker}");
    assert_eq!(counts(&api, "worker").await, (2, 0, 0, 0));
    assert_eq!(counts(&api, "infra").await, (1, 0, 0, 0));
    let infra = pool(&api, "infra").await;
    assert_eq!(infra["spec"]["maxUnavailable"], "50%");
    // worker-1 has its own render (a per-node overlay).
    let n = api.get("/api/v1/nodes/worker-1").await.json;
    assert!(
        n["status"]["desired"]
            .as_str()
            .unwrap()
            .starts_with("rendered-worker-worker-1-"),
        "{n}"
    );
    // Applying again changes nothing.
    let a = api.apply(&example_files()).await;
    assert!(
        a.json["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["action"] == "unchanged"),
        "{}",
        a.text
    );
    // The configs come back in the version they were written in.
    let mc = api
        .get("/api/v1/machineconfigs/80-worker-1-static-ip")
        .await
        .json;
    assert_eq!(mc["spec"]["config"]["ignition"]["version"], "3.4.0");
    assert!(mc["metadata"]["creationTimestamp"].is_string());
    // Rendered configs are listed and readable.
    let r = api.get(&format!("/api/v1/renderedconfigs/{target}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.json["metadata"]["annotations"]["hearth.io/rendered-from"].is_string());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixtures_are_applied_or_refused_with_precise_diagnostics() {
    apply_or_refuse_each(hearth_testdata::manifest_files()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the MCO e2e corpus: HEARTH_SHARED=DIR or ../shared beside the clone (.ci/run runs it)"]
async fn mco_corpus_is_applied_or_refused_with_precise_diagnostics() {
    apply_or_refuse_each(hearth_testdata::mco_corpus_files()).await;
}

/// Applies each file alone: one with errors is refused naming file and line, storing nothing;
/// then the others together, and every pool has a target or says why not.
async fn apply_or_refuse_each(files: Vec<(String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let mut good = Vec::new();
    let mut refused = 0;
    for (name, text) in files {
        let (_, diags) = hearth_config::manifest::read_str(&name, &text);
        if diags.iter().any(|d| d.is_error()) {
            let before = s.app.snapshot().revision;
            let a = api.apply_text(&name, &text).await;
            assert_eq!(
                a.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{name}: {}",
                a.text
            );
            let d = &a.json["diagnostics"];
            let err = d
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["severity"] == "error")
                .unwrap_or_else(|| panic!("{name}: {d}"));
            assert_eq!(err["file"], name.as_str());
            assert!(err["line"].as_u64().is_some(), "{name}: {err}");
            assert!(!err["message"].as_str().unwrap().is_empty());
            assert_eq!(s.app.snapshot().revision, before, "{name}: nothing stored");
            refused += 1;
        } else {
            good.push((name, text));
        }
    }
    assert!(refused >= 3, "the files have refused manifests");
    let a = api.apply(&good).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    // Every pool either has a target or says why not.
    let pools = api.get("/api/v1/pools").await.json;
    for p in pools["items"].as_array().unwrap() {
        let target = &p["spec"]["configuration"]["name"];
        let render = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "RenderDegraded")
            .unwrap();
        assert!(target.is_string() || render["status"] == "True", "{}", p);
    }
    let worker = pool(&api, "worker").await;
    assert!(worker["spec"]["configuration"]["name"].is_string());
    s.shutdown().await;
}

/// A config that writes what the agent owns (its state, binary or unit) is refused at apply,
/// naming the field, and nothing is stored: no node ever gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_writes_the_agents_own_files_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let bad = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 30-takeover\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: /var/lib/hearth/node-token\n        contents:\n          source: data:,stolen\n";
    let before = s.app.snapshot().revision;
    let a = api.apply(&[("takeover.yaml".into(), bad.into())]).await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    let d = &a.json["diagnostics"][0];
    assert_eq!(d["path"], "spec.config.storage.files[0].path", "{d}");
    assert_eq!(d["line"], 13, "{d}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("belongs to hearth-agent"),
        "{d}"
    );
    assert_eq!(s.app.snapshot().revision, before, "nothing stored");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_manifests_are_refused_whole_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let good = worker_mc("10-good", "ok");
    let bad = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 20-bad\nspec:\n  kernelType: rt\n";
    let before = s.app.snapshot().revision;
    let a = api
        .apply(&[
            ("good.yaml".into(), good.clone()),
            ("bad.yaml".into(), bad.into()),
        ])
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    let d = &a.json["diagnostics"][0];
    assert_eq!(d["file"], "bad.yaml");
    assert_eq!(d["line"], 6);
    assert_eq!(d["path"], "spec.kernelType");
    assert_eq!(d["object"], "MachineConfig/20-bad");
    assert_eq!(a.json["reason"], "Invalid");
    // Nothing was stored, not even the good one.
    assert_eq!(s.app.snapshot().revision, before);
    assert_eq!(
        api.get("/api/v1/machineconfigs/10-good").await.status,
        StatusCode::NOT_FOUND
    );
    // Raw YAML works too (Content-Type other than the envelope).
    let a = api
        .send(
            api.client
                .post(format!("{}/api/v1/manifests?file=raw.yaml", api.base))
                .bearer_auth(&api.token)
                .header("content-type", "application/yaml")
                .body("kind: [\n"),
        )
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(a.json["diagnostics"][0]["file"], "raw.yaml");
    // A duplicate within one apply.
    let a = api
        .apply(&[
            ("a.yaml".into(), good.clone()),
            ("b.yaml".into(), good.clone()),
        ])
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(a.text.contains("given twice"), "{}", a.text);
    // A dry run stores nothing.
    let a = api
        .send(
            api.client
                .post(format!(
                    "{}/api/v1/manifests?file=g.yaml&dryRun=true",
                    api.base
                ))
                .bearer_auth(&api.token)
                .body(good.clone()),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json["results"][0]["action"], "created");
    assert_eq!(s.app.snapshot().revision, before);
    s.shutdown().await;
}

/// A misspelled field (issue 35): `maxUnavailble` once reset a pool's `maxUnavailable` to the
/// default and `storage.file` made a config that writes nothing, applied with a warning. With
/// `?fieldValidation=Strict` (what `hearth apply` sends) the apply is refused naming the field it
/// misspells and the live pool keeps its value; without the parameter (a client from before it)
/// or with `Warn`, it is applied with the warning as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelled_field_is_refused_naming_the_one_it_misspells() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let pool = |field: &str| {
        format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: edge\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/edge: \"\"\n  {field}: 2\n"
        )
    };
    let a = api.apply_text("edge.yaml", &pool("maxUnavailable")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let before = s.app.snapshot().revision;
    let strict = |text: String| {
        api.send(
            api.client
                .post(format!(
                    "{}/api/v1/manifests?file=edge.yaml&fieldValidation=Strict",
                    api.base
                ))
                .bearer_auth(&api.token)
                .body(text),
        )
    };
    let a = strict(pool("maxUnavailble")).await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    let d = &a.json["diagnostics"][0];
    assert_eq!(d["path"], "spec.maxUnavailble", "{}", a.text);
    assert_eq!(d["object"], "MachineConfigPool/edge");
    assert_eq!(d["line"], 12);
    let message = d["message"].as_str().unwrap();
    assert!(
        message.contains("did you mean `maxUnavailable`?")
            && message.contains("?fieldValidation=Warn"),
        "{message}"
    );
    assert_eq!(s.app.snapshot().revision, before, "nothing stored");
    let live = api.get("/api/v1/pools/edge").await;
    assert_eq!(live.json["spec"]["maxUnavailable"], 2, "{}", live.text);
    // The lenient reading, asked for: applied, with the warning.
    let a = api
        .send(
            api.client
                .post(format!(
                    "{}/api/v1/manifests?file=edge.yaml&fieldValidation=Warn",
                    api.base
                ))
                .bearer_auth(&api.token)
                .body(pool("maxUnavailble")),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert!(
        a.text.contains("did you mean `maxUnavailable`?"),
        "{}",
        a.text
    );
    // Without the parameter: as before it existed, applied with the warning.
    let a = api.apply_text("edge.yaml", &pool("maxUnavailble")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert!(
        a.text.contains("did you mean `maxUnavailable`?"),
        "{}",
        a.text
    );
    // A value the server does not know is refused (400), naming the query's field.
    let a = api
        .send(
            api.client
                .post(format!(
                    "{}/api/v1/manifests?file=edge.yaml&fieldValidation=Lenient",
                    api.base
                ))
                .bearer_auth(&api.token)
                .body(pool("maxUnavailable")),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert!(a.text.contains("fieldValidation"), "{}", a.text);
    s.shutdown().await;
}

/// A pool an admin made whose selector matches no node: `UPDATED` stays True (as the MCO's
/// does) and its machine count is 0, and an event says it selects no node; once a node carries
/// its label, it has one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_selects_no_node_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let a = api
        .apply_text(
            "edge.yaml",
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: edge\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: edge\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/edge: \"\"\n",
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let p = api.get("/api/v1/pools/edge").await.json;
    assert_eq!(p["status"]["machineCount"], 0, "{p}");
    let events = api.events("MachineConfigPool/edge").await;
    assert!(
        events.iter().any(|(reason, msg)| reason == "SelectsNoNode"
            && msg.starts_with(hearth_api::views::SELECTS_NO_NODE)),
        "{events:?}"
    );
    // The built-in pools say nothing of the kind at start (a fleet without masters).
    assert!(!api
        .events("MachineConfigPool/master")
        .await
        .iter()
        .any(|(reason, _)| reason == "SelectsNoNode"));
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"set": {"node-role.kubernetes.io/edge": ""}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let p = api.get("/api/v1/pools/edge").await.json;
    assert_eq!(p["status"]["machineCount"], 1, "{p}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_objects() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    assert_eq!(
        api.delete("/api/v1/machineconfigs/50-examplecorp-chrony")
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        api.delete("/api/v1/machineconfigs/50-examplecorp-chrony")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // A custom pool with nodes is not deleted by mistake: the refusal names the nodes, where
    // each would go (infra-0 carries the worker label too; infra-1 only the pool's own, as a
    // node enrolled with the pool's token does), what happens to the bootstrap token, and what
    // to do.
    let a = api
        .apply_text(
            "node.yaml",
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: infra-1\n  labels:\n    node-role.kubernetes.io/infra: \"\"\n",
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let a = api.delete("/api/v1/pools/infra").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    let msg = a.json["message"].as_str().unwrap_or(&a.text).to_string();
    for part in [
        "has 2 node(s)",
        "infra-0 to worker",
        "infra-1 to no pool (no config until a pool selects them)",
        "bootstrap token stops working",
        "hearth bootstrap-token infra",
        "--force",
    ] {
        assert!(msg.contains(part), "{part:?} missing: {msg}");
    }
    assert_eq!(api.get("/api/v1/pools/infra").await.status, StatusCode::OK);
    // Forced, it goes; the answer says where its nodes went.
    let a = api.delete("/api/v1/pools/infra?force=true").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(
        a.json["action"],
        "deleted; its 2 node(s) moved: infra-1 to no pool (no config until a pool selects them); \
         infra-0 to worker; its bootstrap token no longer works"
    );
    assert_eq!(
        api.get("/api/v1/nodes/infra-0").await.json["status"]["pool"],
        "worker"
    );
    // A built-in pool goes back to its built-in definition, then cannot go further.
    let a = api.delete("/api/v1/pools/worker").await;
    assert_eq!(a.json["action"], "reset to its built-in definition");
    assert_eq!(
        api.delete("/api/v1/pools/worker").await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(api.get("/api/v1/pools/worker").await.status, StatusCode::OK);
    s.shutdown().await;
}
