//! A client that hangs up during its change: the change is carried through all the same (it
//! was read in full), so that it is never stored without being served, nor half done; and it
//! lands before a change that arrived after it, never on top of it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_whose_client_hangs_up_during_its_render_lands() {
    let g = Gated::start().await;
    let api = g.api.clone();
    let before = pool(&api, "worker").await["spec"]["configuration"]["name"].clone();

    // An apply whose render is held; its client gives up meanwhile (the request's future is
    // dropped: reqwest closes the connection) and the server has time to notice.
    g.apply_held_then_hang_up("b.yaml", &worker_mc("20-b", "two"))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        api.get("/api/v1/machineconfigs/20-b").await.status,
        StatusCode::NOT_FOUND
    );

    // The render goes on: the change is committed and served (before, it was dropped with its
    // request).
    g.release();
    guarded("the abandoned apply", async {
        while api.get("/api/v1/machineconfigs/20-b").await.status != StatusCode::OK {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let target = pool(&api, "worker").await["spec"]["configuration"]["name"].clone();
    assert_ne!(target, before, "the pool has a new rendered config");
    let rendered = api
        .get(&format!(
            "/api/v1/renderedconfigs/{}",
            target.as_str().unwrap()
        ))
        .await;
    assert_eq!(rendered.status, StatusCode::OK, "{}", rendered.text);
    assert!(rendered.text.contains("20-b"), "{}", rendered.text);
    // And it is counted as answered, as the first apply is (what the server records of a
    // request, its metric and log lines, goes on with it).
    let text = api.get("/metrics").await.text;
    assert_eq!(
        requests_answered(&text, "POST", "/api/v1/manifests", 200),
        2,
        "{text}"
    );
}

/// Two applies of the same MachineConfig: the first one's render takes long (held; its client
/// hangs up, as an admin who presses Ctrl-C and applies again does), the second one's is quick.
/// The second must be what stays: before, it was committed first, and the first one, finding the
/// fleet changed, rendered again on top of it and undid it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_apply_that_renders_longer_does_not_undo_a_later_one() {
    let g = Gated::start().await;
    let api = g.api.clone();
    let content = |api: Api| async move {
        let mc = api.get("/api/v1/machineconfigs/10-a").await;
        assert_eq!(mc.status, StatusCode::OK, "{}", mc.text);
        mc.json["spec"]["config"]["storage"]["files"][0]["contents"]["source"]
            .as_str()
            .unwrap()
            .to_string()
    };
    g.apply_held_then_hang_up("a.yaml", &worker_mc("10-a", "first"))
        .await;
    // The second apply's render is not held: it would be done at once.
    g.pass();
    let second = {
        let api = api.clone();
        tokio::spawn(async move { api.apply_text("a.yaml", &worker_mc("10-a", "second")).await })
    };
    // It is at the server, waiting for its turn (the metric says so), not merely late.
    g.one_change_waiting_for_its_turn().await;
    assert_eq!(
        content(api.clone()).await,
        "data:,one",
        "the second apply waits for the first one to land"
    );
    g.release();
    let r = guarded("the second apply", second).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(content(api.clone()).await, "data:,second");
    // And it stays so. The first apply was carried through before it (counted as answered,
    // though its client is gone).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(content(api.clone()).await, "data:,second");
    let text = api.get("/metrics").await.text;
    assert_eq!(
        requests_answered(&text, "POST", "/api/v1/manifests", 200),
        3,
        "the first apply (of Gated::start) and both of these: {text}"
    );
}

/// An admin's change that needs no render (a pause) after an apply whose render takes long (and
/// whose client hung up): the pause waits for the apply, and the apply (its pool manifest says
/// nothing of pausing) does not undo it. Before, the pause was committed first and the apply,
/// landing later, resumed the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_after_an_apply_that_renders_longer_is_not_undone_by_it() {
    let g = Gated::start().await;
    let api = g.api.clone();
    let pool_yaml = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 2\n";
    g.apply_held_then_hang_up("pool.yaml", pool_yaml).await;
    let pause = {
        let api = api.clone();
        tokio::spawn(async move { api.post("/api/v1/pools/worker/pause", &json!({})).await })
    };
    // It is at the server, waiting for its turn (the metric says so), not merely late.
    g.one_change_waiting_for_its_turn().await;
    assert!(
        !pause.is_finished(),
        "the pause waits for the apply before it"
    );
    assert_eq!(pool(&api, "worker").await["spec"]["paused"], false);
    g.release();
    let r = guarded("the pause", pause).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let p = pool(&api, "worker").await;
    assert_eq!(p["spec"]["paused"], true, "{p}");
    assert_eq!(p["spec"]["maxUnavailable"], 2, "the apply landed too: {p}");
}
