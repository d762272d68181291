//! `hearth get nodes` and `hearth rollout status` over a fleet larger than a page (against a
//! real hearth-server): the nodes come in pages of 500, every node is listed once, and
//! `-o json` still has each node's whole report.

mod common;

use common::setup;
use serde_json::{json, Value};

/// More than a page (500).
const NODES: usize = 520;

/// The server's count of answered `GET /api/v1/nodes` (200).
fn node_lists(env: &common::Env, http: &reqwest::blocking::Client) -> u64 {
    let text = http
        .get(format!("{}/metrics", env.url))
        .bearer_auth(env.token())
        .send()
        .unwrap()
        .text()
        .unwrap();
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
    let table = env.ok(&["get", "nodes", "--no-headers"]);
    let listed: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with('n'))
        .collect();
    assert_eq!(listed, names.iter().map(String::as_str).collect::<Vec<_>>());
    // Two pages: 500 and the rest.
    assert_eq!(node_lists(&env, &http) - before, 2);

    let json: Value = serde_json::from_str(&env.ok(&["get", "nodes", "-o", "json"])).unwrap();
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

    // `rollout status` counts the pool's nodes from every page.
    let before = node_lists(&env, &http);
    let status = env.ok(&["rollout", "status", "worker"]);
    assert_eq!(node_lists(&env, &http) - before, 2, "{status}");
}
