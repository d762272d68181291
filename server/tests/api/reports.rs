//! A node's whole report in its view. The server keeps a report's history, drift, progress
//! and actions only until the store has them, then reads them back from the store to show a
//! node: one node, a list of many (one read of every report), after a restart, and a list in
//! pages (`limit`, `continue`). A list's summary view (`view=summary`) reads none back.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// More than the server reads one by one (`GETS_AT_MOST`): the list reads them all at once.
const NODES: usize = 20;

fn status(i: usize, config: &str) -> Value {
    json!({
        "apiVersion": "hearth.io/v1", "kind": "AgentStatus",
        "state": "Done", "current": config, "desired": config,
        "lastTransition": "2026-11-25T09:00:00Z", "pendingReboot": false,
        "progress": {"phase": "files", "step": i, "total": 7},
        "drift": [format!("/etc/drift-{i}: content differs"), "/etc/other: missing"],
        "actions": [{"name": "migrate", "config": config, "scriptDigest": "ab", "when": "AfterFiles",
            "failure": "Degrade", "startedAt": "2026-11-25T08:30:00Z", "outcome": "Succeeded",
            "exitStatus": 0, "durationMs": 5, "outputTail": format!("node {i} migrated")}],
        "history": [
            {"time": "2026-11-25T08:00:00Z", "state": "Working", "desired": config, "reason": format!("node {i} step")},
            {"time": "2026-11-25T09:00:00Z", "state": "Done", "desired": config},
        ],
    })
}

/// What a view shows of node `i`'s report.
fn assert_shows(view: &Value, i: usize, config: &str) {
    let s = &view["status"];
    assert_eq!(s["state"], "Done", "{view}");
    assert_eq!(s["current"], config, "{view}");
    assert_eq!(
        s["drift"],
        json!([
            format!("/etc/drift-{i}: content differs"),
            "/etc/other: missing"
        ]),
        "{view}"
    );
    assert_eq!(s["driftCount"], 2, "{view}");
    assert_eq!(s["actions"][0]["outputTail"], format!("node {i} migrated"));
    assert_eq!(s["progress"]["step"], i, "{view}");
    let history = s["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{view}");
    assert_eq!(history[0]["reason"], format!("node {i} step"), "{view}");
    assert_eq!(history[1]["state"], "Done", "{view}");
    assert!(s["lastReport"].is_string(), "{view}");
}

/// A server with the example fleet and `nodes` workers `w0`, `w1`, …, of which those `reports`
/// picks report [`status`]: the server, an admin, and the config they report in.
async fn fleet(
    dir: &std::path::Path,
    nodes: usize,
    reports: impl Fn(usize) -> bool,
) -> (hearth_server::serve::Running, Api, String) {
    let s = start(dir, options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let token = bootstrap_token(&s, "worker");
    let mut config = String::new();
    for i in 0..nodes {
        let n = api.enroll(&token, &format!("w{i}"), json!({})).await;
        if reports(i) {
            config = n.desired_name().await.unwrap();
            n.post_status(&status(i, &config)).await;
        }
    }
    (s, api, config)
}

fn by_name(list: &Value) -> std::collections::HashMap<String, Value> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_whole_report_is_shown_from_the_store_alone_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (s, api, config) = fleet(dir.path(), NODES, |_| true).await;
    // Stored, so not kept in memory: what follows is read back from the store.
    let f = s.app.snapshot();
    for i in 0..NODES {
        let report = f.nodes[&format!("w{i}")].value.report.clone().unwrap();
        assert_eq!(report.json(), None, "w{i}'s report is still in memory");
    }
    drop(f);

    let one = api.get("/api/v1/nodes/w3").await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.text);
    assert_shows(&one.json, 3, &config);
    let all = by_name(&api.get("/api/v1/nodes").await.json);
    let pool = by_name(&api.get("/api/v1/nodes?pool=worker").await.json);
    for i in 0..NODES {
        assert_shows(&all[&format!("w{i}")], i, &config);
        assert_shows(&pool[&format!("w{i}")], i, &config);
    }
    // A node that has not reported shows no report, whichever way it is listed.
    api.enroll(&bootstrap_token(&s, "worker"), "quiet", json!({}))
        .await;
    let quiet = api.get("/api/v1/nodes/quiet").await.json;
    assert!(quiet["status"]["state"].is_null(), "{quiet}");
    assert_eq!(quiet["status"]["history"], json!([]), "{quiet}");
    assert!(by_name(&api.get("/api/v1/nodes").await.json)["quiet"]["status"]["state"].is_null());

    // A restart reads the reports back (summaries only in memory) and shows them whole.
    let version = one.json["metadata"]["resourceVersion"].clone();
    s.shutdown().await;
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let one = api.get("/api/v1/nodes/w3").await.json;
    assert_shows(&one, 3, &config);
    assert_eq!(one["metadata"]["resourceVersion"], version);
    let all = by_name(&api.get("/api/v1/nodes").await.json);
    for i in 0..NODES {
        assert_shows(&all[&format!("w{i}")], i, &config);
    }
    s.shutdown().await;
}

/// Every page of `GET /api/v1/nodes?{query}` (a query with a `limit`), followed by its
/// `continue` to the last: each page's items.
async fn all_pages(api: &Api, query: &str) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut from: Option<String> = None;
    loop {
        let path = match &from {
            None => format!("/api/v1/nodes?{query}"),
            Some(c) => format!("/api/v1/nodes?{query}&continue={c}"),
        };
        let a = api.get(&path).await;
        assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text);
        pages.push(a.json["items"].as_array().unwrap().clone());
        match a.json["metadata"]["continue"].as_str() {
            Some(c) => from = Some(c.to_string()),
            None => return pages,
        }
    }
}

/// Node names of a list answer, in order, and its `metadata.continue`.
fn page(list: &Value) -> (Vec<String>, Option<String>) {
    let names = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    (
        names,
        list["metadata"]["continue"].as_str().map(String::from),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_list_comes_in_pages_each_node_once_with_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let (s, api, config) = fleet(dir.path(), NODES, |_| true).await;
    // The example fleet's own nodes (`infra-0`, …) and these, by name.
    let (all, _) = page(&api.get("/api/v1/nodes").await.json);
    let (workers, _) = page(&api.get("/api/v1/nodes?pool=worker").await.json);
    assert!(all.len() > NODES && workers.len() >= NODES, "{all:?}");
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);

    // Pages of 7, by name, each node once, every page full but the last, which has no
    // `continue`.
    for (query, expected) in [("limit=7", &all), ("pool=worker&limit=7", &workers)] {
        let pages = all_pages(&api, query).await;
        assert_eq!(pages.len(), expected.len().div_ceil(7), "{query}");
        let mut seen = Vec::new();
        for (k, items) in pages.iter().enumerate() {
            assert!(
                items.len() == 7 || k == pages.len() - 1,
                "{query}: page {k}"
            );
            for view in items {
                let n = view["metadata"]["name"].as_str().unwrap();
                if let Some(i) = n.strip_prefix('w').and_then(|i| i.parse().ok()) {
                    assert_shows(view, i, &config);
                }
                seen.push(n.to_string());
            }
        }
        assert_eq!(&seen, expected, "{query}");
    }
    // Limit 0, or a limit over this fleet: every node, no `continue`.
    for query in ["?limit=0", "?limit=900"] {
        let (names, next) = page(&api.get(&format!("/api/v1/nodes{query}")).await.json);
        assert_eq!((names, next), (all.clone(), None), "{query}");
    }
    // A page exactly at the end says there is no more.
    let n = all.len();
    let (names, next) = page(&api.get(&format!("/api/v1/nodes?limit={n}")).await.json);
    assert_eq!((names.len(), next), (n, None));
    // `continue` is a position by name: one that is no node's starts after it.
    let (names, _) = page(&api.get("/api/v1/nodes?limit=3&continue=w10x").await.json);
    assert_eq!(names, vec!["w11", "w12", "w13"]);
    // Another pool's page is empty, and says so.
    let (names, next) = page(&api.get("/api/v1/nodes?pool=master&limit=3").await.json);
    assert_eq!((names.len(), next), (0, None));
    let bad = api.get("/api/v1/nodes?limit=-1").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    s.shutdown().await;
}

/// Every node at once (no `limit`) over more than the server writes at a time (500): one JSON
/// document, each node once and in order, the same nodes and reports as the pages give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_list_is_one_document_written_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (s, api, config) = fleet(dir.path(), 1_010, |i| i % 100 == 7).await;
    let whole = api.get("/api/v1/nodes").await;
    assert_eq!(whole.status, StatusCode::OK, "{}", whole.text);
    assert!(
        whole.json.is_object(),
        "not one JSON document: {}",
        &whole.text[..200]
    );
    assert_eq!(whole.json["kind"], "List");
    assert!(whole.json.get("metadata").is_none());
    let (names, _) = page(&whole.json);
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "each node once, by name");
    assert!(names.len() > 1_010, "{}", names.len());
    for view in whole.json["items"].as_array().unwrap() {
        let name = view["metadata"]["name"].as_str().unwrap();
        if let Some(i) = name.strip_prefix('w').and_then(|i| i.parse::<usize>().ok()) {
            if i % 100 == 7 {
                assert_shows(view, i, &config);
            } else {
                assert!(view["status"]["state"].is_null(), "{view}");
            }
        }
    }
    // The same as the pages, item for item (lastSeen aside: the clock moves).
    let paged: Vec<Value> = all_pages(&api, "limit=1000").await.concat();
    let strip = |mut v: Value| {
        v["status"]["lastSeen"] = Value::Null;
        v
    };
    let whole: Vec<Value> = whole.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(strip)
        .collect();
    assert_eq!(whole, paged.into_iter().map(strip).collect::<Vec<_>>());
    // By pool, the same way; a pool without nodes is an empty list, still one document.
    let workers = api.get("/api/v1/nodes?pool=worker").await.json;
    assert!(page(&workers).0.len() >= 1_010);
    let none = api.get("/api/v1/nodes?pool=master").await;
    assert_eq!(none.json["items"], json!([]), "{}", none.text);
    // `continue` without `limit`: every node after it.
    let (after, next) = page(&api.get("/api/v1/nodes?continue=w500").await.json);
    let expected: Vec<String> = names
        .iter()
        .filter(|n| n.as_str() > "w500")
        .cloned()
        .collect();
    assert_eq!((after, next), (expected, None));
    // A page holds at most 1,000 nodes, whatever the limit asked.
    let (capped, next) = page(&api.get("/api/v1/nodes?limit=5000").await.json);
    assert_eq!(capped, names[..1_000].to_vec());
    assert_eq!(next.as_deref(), Some(names[999].as_str()));
    s.shutdown().await;
}

/// The summary view is the full view without history, drift lines and action runs (with how
/// many drift lines there are), in pages and whole, and the server reads no report back from
/// its store for it; the full view does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_view_reads_nothing_back_and_leaves_out_history_drift_and_actions() {
    let dir = tempfile::tempdir().unwrap();
    let (s, api, config) = fleet(dir.path(), NODES, |i| i != 5).await;
    let read_back = "hearth_server_reports_read_back_total";
    let before = metric(&api, read_back).await;
    let whole = api.get("/api/v1/nodes?view=summary").await;
    assert_eq!(whole.status, StatusCode::OK, "{}", whole.text);
    let paged: Vec<Value> = all_pages(&api, "view=summary&limit=7").await.concat();
    let by_pool = api.get("/api/v1/nodes?view=summary&pool=worker").await;
    assert_eq!(
        metric(&api, read_back).await,
        before,
        "the summary view read reports back"
    );

    let full = by_name(&api.get("/api/v1/nodes").await.json);
    assert!(metric(&api, read_back).await >= before + NODES as u64 - 1);
    let summary = by_name(&whole.json);
    assert_eq!(summary.len(), full.len());
    let paged: std::collections::HashMap<String, Value> = paged
        .into_iter()
        .map(|n| (n["metadata"]["name"].as_str().unwrap().to_string(), n))
        .collect();
    let pool = by_name(&by_pool.json);
    // lastSeen ticks with the clock.
    let strip = |v: &Value| {
        let mut v = v.clone();
        v["status"]["lastSeen"] = Value::Null;
        v
    };
    for i in 0..NODES {
        let name = format!("w{i}");
        let sum = &summary[&name];
        assert_eq!(strip(sum), strip(&paged[&name]), "{name}");
        assert_eq!(strip(sum), strip(&pool[&name]), "{name}");
        if i == 5 {
            assert!(sum["status"]["state"].is_null(), "{sum}");
            assert_eq!(sum["status"]["driftCount"], 0, "{sum}");
            continue;
        }
        let st = &sum["status"];
        assert_eq!(st["history"], json!([]), "{sum}");
        assert_eq!(st["drift"], json!([]), "{sum}");
        assert!(st.get("actions").is_none(), "{sum}");
        assert_eq!(st["driftCount"], 2, "{sum}");
        assert_eq!(st["progress"]["step"], i, "{sum}");
        assert_eq!(st["current"], config.as_str(), "{sum}");
        // Everything else is the full view's.
        let mut f = strip(&full[&name]);
        f["status"]["history"] = json!([]);
        f["status"]["drift"] = json!([]);
        f["status"].as_object_mut().unwrap().remove("actions");
        assert_eq!(strip(sum), f, "{name}");
    }
    // A view it does not know is refused, and says which.
    let bad = api.get("/api/v1/nodes?view=brief").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    assert!(bad.text.contains("summary"), "{}", bad.text);
    s.shutdown().await;
}

/// Drift appearing on a node is a Warning event naming how many paths and the first (issue 35:
/// it showed only in `describe node`), drift gone a Normal one; a drift count that only moves
/// makes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_appearing_and_going_are_events_on_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let node = api
        .enroll(&bootstrap_token(&s, "worker"), "w0", json!({}))
        .await;
    // Its first report, before it has a config: the event says so (issue 35: it read "-").
    node.report("Done", None, None, None).await;
    let first = api.get("/api/v1/events?object=Node/w0").await.json;
    assert!(
        first["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Done" && e["message"] == "no config yet"),
        "{first}"
    );
    let config = node.desired_name().await.unwrap();
    // A reason that names the config already is not prefixed with it a second time.
    let why = format!("the new OS deployment debian/ab.0 of {config} booted unhealthy: x.service");
    node.report("Degraded", None, Some(&config), Some(&why))
        .await;
    let events = api.get("/api/v1/events?object=Node/w0").await.json;
    assert!(
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Degraded" && e["message"] == why.as_str()),
        "{events}"
    );
    node.post_status(&status(0, &config)).await;
    let drift_events = || async {
        api.get("/api/v1/events?object=Node/w0").await.json["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["reason"].as_str().is_some_and(|r| r.starts_with("Drift")))
            .collect::<Vec<Value>>()
    };
    // The report had two drifted paths: one Warning.
    let events = drift_events().await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "DriftFound");
    assert_eq!(events[0]["type"], "Warning");
    let msg = events[0]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!(
            "2 paths differ from {config}: /etc/drift-0: content differs"
        )) && msg.contains("hearth describe node w0"),
        "{msg}"
    );
    // One path less: still drifting, no new event.
    let mut st = status(0, &config);
    st["drift"] = json!(["/etc/other: missing"]);
    node.post_status(&st).await;
    assert_eq!(drift_events().await.len(), 1);
    // Repaired: a Normal event.
    st["drift"] = json!([]);
    node.post_status(&st).await;
    let events = drift_events().await;
    assert_eq!(events.len(), 2, "{events:?}");
    let gone = events.iter().find(|e| e["reason"] == "DriftGone").unwrap();
    assert_eq!(gone["type"], "Normal");
    assert_eq!(
        gone["message"],
        format!("no path differs from {config} any more")
    );
    s.shutdown().await;
}
