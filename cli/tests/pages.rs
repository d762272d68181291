//! `hearth get nodes` and `hearth rollout status` over a fleet larger than a page (against a
//! real hearth-server): the nodes come in pages of 500, every node is listed once, and
//! `-o json` still has each node's whole report. Tables, names and `rollout status` ask for the
//! summary view, which the server answers without reading reports back from its store;
//! `rollout status --watch` reads the pool's counts alone.

use crate::common;

use common::setup;
use serde_json::{json, Value};

/// More than a page (500).
const NODES: usize = 520;

fn metrics(env: &common::Env, http: &reqwest::blocking::Client) -> String {
    http.get(format!("{}/metrics", env.url))
        .bearer_auth(env.token())
        .send()
        .unwrap()
        .text()
        .unwrap()
}

/// The server's count of nodes' reports read back from its store to be shown.
fn reports_read_back(env: &common::Env, http: &reqwest::blocking::Client) -> u64 {
    let text = metrics(env, http);
    text.lines()
        .find_map(|l| l.strip_prefix("hearth_server_reports_read_back_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no hearth_server_reports_read_back_total in {text}"))
}

/// The server's count of answered `GET /api/v1/nodes` (200).
fn node_lists(env: &common::Env, http: &reqwest::blocking::Client) -> u64 {
    let text = metrics(env, http);
    text.lines()
        .filter(|l| l.starts_with("hearth_server_http_requests_total{"))
        .filter(|l| {
            l.contains(r#"method="GET""#)
                && l.contains(r#"route="/api/v1/nodes""#)
                && l.contains(r#"status="200""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn get_nodes_reads_a_large_fleet_in_pages_every_node_once() {
    let env = setup();
    env.login();
    env.apply_worker_mc();
    let http = env.http();
    let names: Vec<String> = (0..NODES).map(|i| format!("n{i:04}")).collect();
    let mut credential = String::new();
    for name in &names {
        credential = env.enroll(name);
    }
    // The last node reports a history.
    let config = env.desired(&credential);
    env.report(
        &credential,
        json!({"state": "Done", "current": config, "desired": config,
               "history": [{"time": "2026-11-25T09:00:00Z", "state": "Done", "desired": config}]}),
    );

    let before = node_lists(&env, &http);
    let read_back = reports_read_back(&env, &http);
    let table = env.ok(&["get", "nodes", "--no-headers"]);
    let listed: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with('n'))
        .collect();
    assert_eq!(listed, names.iter().map(String::as_str).collect::<Vec<_>>());
    // Two pages: 500 and the rest, in the summary view: no report read back.
    assert_eq!(node_lists(&env, &http) - before, 2);
    assert_eq!(reports_read_back(&env, &http), read_back);

    let json: Value = serde_json::from_str(&env.ok(&["get", "nodes", "-o", "json"])).unwrap();
    assert!(reports_read_back(&env, &http) > read_back);
    let items = json["items"].as_array().unwrap();
    let last = items
        .iter()
        .find(|n| n["metadata"]["name"] == names[NODES - 1].as_str())
        .unwrap();
    assert_eq!(
        last["status"]["history"][0]["desired"],
        config.as_str(),
        "{last}"
    );
    assert_eq!(
        items
            .iter()
            .filter(|n| n["metadata"]["name"].as_str().unwrap().starts_with('n'))
            .count(),
        NODES
    );
    let named = env.ok(&["get", "nodes", "-o", "name"]);
    assert_eq!(
        named.lines().filter(|l| l.starts_with("node/n")).count(),
        NODES,
        "{named}"
    );

    // `rollout status` lists the pool's nodes from every page, in the summary view.
    let before = node_lists(&env, &http);
    let read_back = reports_read_back(&env, &http);
    let status = env.ok(&["rollout", "status", "worker"]);
    assert_eq!(node_lists(&env, &http) - before, 2, "{status}");
    assert_eq!(reports_read_back(&env, &http), read_back);
    let rows = status.lines().filter(|l| l.starts_with('n')).count();
    assert_eq!(rows, NODES, "{status}");
    // `--watch` follows the pool's counts, and lists no node (519 of 520 have not reported:
    // it times out).
    let before = node_lists(&env, &http);
    let watch = env.hearth(&["rollout", "status", "worker", "--watch", "--timeout", "1"]);
    assert!(!watch.status.success());
    let err = String::from_utf8_lossy(&watch.stderr);
    assert!(err.contains("timed out after 1 s"), "{err}");
    assert_eq!(node_lists(&env, &http), before);
}
