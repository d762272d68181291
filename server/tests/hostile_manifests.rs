//! Hostile manifests sent to the server: a "billion laughs" dry run (which used to take the
//! server down: 6 GB, then abort) is refused with the file, line and reason, and the server
//! keeps serving.

use crate::common;

use common::*;
use reqwest::StatusCode;

fn bomb() -> String {
    let mut text = String::from("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: lol\nspec:\n  kernelArguments:\n  - &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        text.push_str(&format!(
            "  - &{} [{}]\n",
            w[1],
            vec![format!("*{}", w[0]); 9].join(",")
        ));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_billion_laughs_dry_run_is_refused_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let before = s.app.snapshot().revision;
    let a = api
        .send(
            api.client
                .post(format!(
                    "{}/api/v1/manifests?file=bomb.yaml&dryRun=true",
                    api.base
                ))
                .bearer_auth(&api.token)
                .header("content-type", "application/yaml")
                .body(bomb()),
        )
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    let d = &a.json["diagnostics"][0];
    assert_eq!(d["file"], "bomb.yaml", "{}", a.text);
    assert_eq!(d["line"], 10, "{}", a.text);
    assert!(
        d["message"]
            .as_str()
            .unwrap_or_default()
            .contains("excessive aliasing"),
        "{}",
        a.text
    );
    // Still serving, nothing stored.
    assert_eq!(api.get("/api/v1/nodes").await.status, StatusCode::OK);
    assert_eq!(s.app.snapshot().revision, before);
    s.shutdown().await;
}
