//! A node's own first-boot config (issue 13, zero-touch first boot): a token bound to one node
//! serves `/config/<pool>` as that node's render (its pool's configs plus its overlays, e.g.
//! static addresses), tells the agent its name, enrolls only that name and is spent by the
//! enrolment; a pool-wide token asking for `?node=` is refused, never answered with the pool's
//! plain config.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

const OVERLAY: &str = r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 80-worker-7-static-ip
  labels:
    machineconfiguration.openshift.io/role: worker
    hearth.io/node: worker-7
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/NetworkManager/system-connections/eno1.nmconnection
        mode: 0600
        contents:
          source: "data:,address1%3D192.0.2.27%2F24"
"#;

/// The paths of the files a served Ignition config writes.
fn paths(config: &Value) -> Vec<String> {
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

/// The decoded `/etc/hearth/agent.env` of a served config.
fn agent_env(config: &Value) -> String {
    let f = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/hearth/agent.env")
        .expect("agent.env is served");
    let url = f["contents"]["source"].as_str().unwrap();
    String::from_utf8(hearth_config::dataurl::decode(url, None).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_bound_token_serves_the_nodes_own_first_boot_config_and_enrolls_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let a = api
        .apply(&[
            ("base.yaml".into(), worker_mc("50-base", "base")),
            ("overlay.yaml".into(), OVERLAY.into()),
        ])
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let pool_token = bootstrap_token(&s, "worker");

    // The pool's token cannot stand in for a node's own config.
    let boot = api.with_token(&pool_token);
    let a = boot.get("/config/worker?node=worker-7").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert!(
        a.text.contains("hearth bootstrap-token worker --node"),
        "{}",
        a.text
    );

    // The admin makes worker-7's own token: the node is registered and rendered.
    let t = api
        .post(
            "/api/v1/pools/worker/bootstrap-token",
            &json!({"node": "worker-7"}),
        )
        .await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    assert_eq!(t.json["node"], "worker-7");
    let node_token = t.json["token"].as_str().unwrap().to_string();
    let events = api.events("Node/worker-7").await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "BootstrapTokenCreated" && m.contains("the admin token")),
        "{events:?}"
    );

    // Its first-boot config is its own: pool files plus the overlay, and the agent's name.
    let own = api.with_token(&node_token);
    let a = own.get("/config/worker").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let files = paths(&a.json);
    assert!(files.contains(&"/etc/hearth-test-50-base".to_string()));
    assert!(files.contains(&"/etc/NetworkManager/system-connections/eno1.nmconnection".into()));
    let env = agent_env(&a.json);
    assert!(env.contains("HEARTH_NODE_NAME=worker-7\n"), "{env}");
    assert!(env.contains(&format!("HEARTH_BOOTSTRAP_TOKEN={node_token}\n")));
    // The same with ?node= naming it; another name is refused; the pool's config has no overlay.
    assert_eq!(
        own.get("/config/worker?node=worker-7").await.status,
        StatusCode::OK
    );
    let a = own.get("/config/worker?node=worker-8").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert!(a.text.contains("bound to node worker-7"), "{}", a.text);
    let plain = boot.get("/config/worker").await;
    assert_eq!(plain.status, StatusCode::OK);
    assert!(!paths(&plain.json)
        .contains(&"/etc/NetworkManager/system-connections/eno1.nmconnection".to_string()));
    assert!(!agent_env(&plain.json).contains("HEARTH_NODE_NAME"));

    // It enrolls worker-7 only; the enrolment spends it; the pool's token still works.
    let a = api
        .with_token("")
        .post(
            "/api/v1/enroll",
            &json!({"node": "worker-8", "bootstrapToken": node_token}),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert!(a.text.contains("bound to node worker-7"), "{}", a.text);
    let w7 = api.enroll(&node_token, "worker-7", json!({})).await;
    let desired = w7.desired_name().await.unwrap();
    assert!(
        desired.starts_with("rendered-worker-worker-7-"),
        "{desired}"
    );
    assert_eq!(
        own.get("/config/worker").await.status,
        StatusCode::UNAUTHORIZED,
        "a spent first-boot token"
    );
    assert_eq!(boot.get("/config/worker").await.status, StatusCode::OK);

    // An enrolled node gets no new first-boot token; a node of another pool is refused.
    let a = api
        .post(
            "/api/v1/pools/worker/bootstrap-token",
            &json!({"node": "worker-7"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.text.contains("reset-credential"), "{}", a.text);
    let a = api
        .apply_text(
            "n.yaml",
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: m9\n  labels:\n    node-role.kubernetes.io/master: \"\"\n",
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let a = api
        .post(
            "/api/v1/pools/worker/bootstrap-token",
            &json!({"node": "m9"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.text.contains("belongs to pool master"), "{}", a.text);

    // Deleting a pool deletes the first-boot tokens of its nodes-to-be with its own.
    let a = api
        .apply_text(
            "gold.yaml",
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: gold\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: gold\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/gold: \"\"\n",
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let t = api
        .post("/api/v1/pools/gold/bootstrap-token", &json!({"node": "g1"}))
        .await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    let gold = api.with_token(t.json["token"].as_str().unwrap());
    assert_ne!(
        gold.get("/config/gold").await.status,
        StatusCode::UNAUTHORIZED
    );
    // g1, a node-to-be, is in the pool: deleting it is refused unless forced (issue 35).
    let a = api.delete("/api/v1/pools/gold").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.text.contains("g1 to no pool"), "{}", a.text);
    assert_eq!(
        api.delete("/api/v1/pools/gold?force=true").await.status,
        StatusCode::OK
    );
    assert_eq!(
        gold.get("/config/gold").await.status,
        StatusCode::UNAUTHORIZED
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_agent_is_in_every_first_boot_config_with_its_hash_and_unit() {
    use sha2::{Digest, Sha512};
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    std::fs::write(served.join("hearth-agent"), b"\x7fELF the agent").unwrap();
    let mut opts = options(5);
    opts.served_agent = Some(std::sync::Arc::new(
        hearth_server::served_agent::ServedAgent::load(&served).unwrap(),
    ));
    let s = start(&dir.path().join("state"), opts).await;
    let api = Api::admin(&s);
    let a = api
        .apply_text("base.yaml", &worker_mc("50-base", "base"))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let boot = api.with_token(&bootstrap_token(&s, "worker"));
    let a = boot
        .get_with(
            "/config/worker",
            &[(
                "accept",
                "application/vnd.coreos.ignition+json;version=3.3.0",
            )],
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let file = a.json["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/usr/local/bin/hearth-agent")
        .cloned()
        .expect("the agent is written");
    assert_eq!(file["mode"], 0o755);
    let hash = format!(
        "sha512-{}",
        hex::encode(Sha512::digest(b"\x7fELF the agent"))
    );
    assert_eq!(file["contents"]["verification"]["hash"], hash.as_str());
    let source = file["contents"]["source"].as_str().unwrap();
    assert!(source.ends_with("/firstboot/bin/hearth-agent"), "{source}");
    // Ignition trusts the server for that fetch through the fleet CA.
    assert_eq!(
        a.json["ignition"]["security"]["tls"]["certificateAuthorities"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let unit = a.json["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "hearth-agent.service")
        .unwrap();
    assert_eq!(unit["enabled"], true);
    assert!(unit["contents"]
        .as_str()
        .unwrap()
        .contains("ExecStart=/usr/local/bin/hearth-agent run"));
    // The binary itself needs no credential; unknown names are 404.
    let anon = api.with_token("");
    let b = anon.get("/firstboot/bin/hearth-agent").await;
    assert_eq!(b.status, StatusCode::OK);
    assert_eq!(b.text.as_bytes(), b"\x7fELF the agent");
    assert_eq!(
        anon.get("/firstboot/bin/hearth-server").await.status,
        StatusCode::NOT_FOUND
    );
    s.shutdown().await;

    // Without --serve-agent: no binary, and the unit is only enabled (the image has it).
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("base.yaml", &worker_mc("50-base", "base"))
        .await;
    let a = api.with_token("").get("/firstboot/bin/hearth-agent").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.text.contains("--serve-agent"), "{}", a.text);
    let boot = api.with_token(&bootstrap_token(&s, "worker"));
    let a = boot.get("/config/worker").await;
    assert!(!paths(&a.json).contains(&"/usr/local/bin/hearth-agent".to_string()));
    s.shutdown().await;
}
