//! Who may hold the server's memory with a request body (issue 31, "unauthenticated bodies are
//! buffered before authentication"): a body whose credential does not authenticate, or whose
//! caller the route does not serve (a bootstrap or viewer token applying manifests), is read and
//! dropped, never kept, however many such clients send at once; nodes' bodies share one budget
//! and enrollments that carry their token in the body another, beyond which the answer is 503;
//! an admin's bodies are not counted. And every answer says `X-Content-Type-Options: nosniff`.

use crate::common::{self, *};
use crate::refusals::{raw_tls, read_response, rss_kib, spawn_measured};
use reqwest::StatusCode;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// Clients whose credential does not let them apply that each send most of a large apply and
/// then wait, all at once: before, the server kept every body it was reading (24 clients of
/// 63 MiB grew it by 1.95 GB); now what it holds does not grow with them. The server is the built
/// binary, so the memory measured is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_of_callers_a_route_does_not_serve_are_never_kept() {
    const BODY: usize = 24 << 20;
    /// Well below what the clients hold back between them (144 MiB): kept bodies pass it
    /// whatever the allocator does; read-and-dropped pieces stay far below.
    const MAX_GROWTH_KIB: u64 = 24 << 10;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let server = spawn_measured(&state);
    let ca = std::fs::read(state.join("pki/ca.crt")).unwrap();
    let pid = server.child.id();
    let admin = common::binary::api_for(&state, server.port);
    let viewer = admin
        .post("/api/v1/viewer-tokens", &serde_json::json!({}))
        .await;
    assert_eq!(viewer.status, StatusCode::OK, "{}", viewer.text);
    let viewer = viewer.json["token"].as_str().unwrap().to_string();
    let bootstrap = std::fs::read_to_string(state.join("tokens/worker.token")).unwrap();
    // No credential, a token the server does not know, a pool's bootstrap token and a viewer's:
    // none may apply.
    let credentials = [
        String::new(),
        "authorization: Bearer not-a-token-of-this-server\r\n".to_string(),
        format!("authorization: Bearer {}\r\n", bootstrap.trim()),
        format!("authorization: Bearer {viewer}\r\n"),
        String::new(),
        format!("authorization: Bearer {}\r\n", bootstrap.trim()),
    ];
    let mut first = raw_tls(server.port, &ca).await;
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(read_response(&mut first).await.starts_with("HTTP/1.1 200"));
    let before = rss_kib(pid);
    let piece = vec![b'x'; 1 << 20];
    let mut open = Vec::new();
    for auth in &credentials {
        let mut c = raw_tls(server.port, &ca).await;
        c.write_all(
            format!(
                "POST /api/v1/manifests HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                 {auth}content-length: {BODY}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        // All of the body but its last byte: the server is still reading it.
        for _ in 0..BODY / piece.len() - 1 {
            c.write_all(&piece).await.unwrap();
        }
        c.write_all(&piece[1..]).await.unwrap();
        c.flush().await.unwrap();
        open.push(c);
    }
    // The socket buffers hold a few MiB of each body at most: the server has taken in the rest,
    // kept or dropped. A moment for it to take in what is still in flight.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = rss_kib(pid);
    for (c, auth) in open.iter_mut().zip(&credentials) {
        c.write_all(b"x").await.unwrap();
        let answer = read_response(c).await;
        let refused = answer.starts_with("HTTP/1.1 401") || answer.starts_with("HTTP/1.1 403");
        assert!(refused, "{auth}: {answer}");
    }
    let growth = during.saturating_sub(before);
    eprintln!(
        "{} bodies of {BODY} bytes their senders may not apply, all but the last byte sent: \
         {before} KiB before, {during} KiB during (+{growth})",
        credentials.len()
    );
    assert!(
        growth < MAX_GROWTH_KIB,
        "{} clients that may not apply, {BODY} bytes each: the server grew from {before} KiB to \
         {during} KiB",
        credentials.len()
    );
}

/// Sends `head` and then `body` whole on new connections until the answer is 503 (a request of
/// a node that reaches the server before the held one took its budget goes through), within
/// 30 s; returns that answer.
async fn until_busy(port: u16, ca: &[u8], head: &str, body: &[u8]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut c = raw_tls(port, ca).await;
        c.write_all(head.as_bytes()).await.unwrap();
        c.write_all(body).await.unwrap();
        let answer = read_response(&mut c).await;
        if answer.starts_with("HTTP/1.1 503") || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Nodes' request bodies are held within one budget: while one node's report of the largest
/// size is being read, another node's is answered 503 with `Retry-After`; an admin's apply is
/// not held back, and neither are enrollments (a budget of their own); once the first report is
/// answered, the second node goes through. Enrollments whose token is in the body likewise:
/// while one is held, another is 503, and a node's report goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_enrollments_have_budgets_of_their_own_and_an_admins_bodies_do_not_count() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        dir.path(),
        hearth_server::app::Options {
            node_bodies: hearth_server::http::limits::MAX_BODY + 1024,
            enroll_bodies: hearth_server::http::limits::MAX_ENROLL_BODY + 1024,
            ..options(5)
        },
    )
    .await;
    let admin = Api::admin(&s);
    let token = bootstrap_token(&s, "worker");
    let a = admin.enroll(&token, "w-a", serde_json::json!({})).await;
    let b = admin.enroll(&token, "w-b", serde_json::json!({})).await;
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let port = s.addr.port();
    let head = |path: &str, bearer: &str, len: usize| {
        let auth = if bearer.is_empty() {
            String::new()
        } else {
            format!("authorization: Bearer {bearer}\r\n")
        };
        format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{auth}\
             content-length: {len}\r\n\r\n"
        )
    };
    // Node a: a report of the largest size, all but its last byte.
    let len = hearth_server::http::limits::MAX_BODY;
    let mut held = raw_tls(port, &ca).await;
    held.write_all(head("/api/v1/agent/status", &a.token, len).as_bytes())
        .await
        .unwrap();
    held.write_all(&vec![b' '; len - 1]).await.unwrap();
    held.flush().await.unwrap();
    // Node b, meanwhile, with a body that does not fit in what is left (1 KiB): 503.
    let report = vec![b' '; 4096];
    let answer = until_busy(
        port,
        &ca,
        &head("/api/v1/agent/status", &b.token, report.len()),
        &report,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 5"),
        "{answer}"
    );
    assert!(answer.contains("retry in 5 s"), "{answer}");
    // An admin's apply is not counted against it, nor is an enrollment.
    let applied = admin
        .apply(&[(
            "mc.yaml".into(),
            worker_mc("10-held", "while a node's body is held"),
        )])
        .await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    admin.enroll(&token, "w-c", serde_json::json!({})).await;
    // Node a's body ends (not a report: refused as such); then b reports as usual.
    held.write_all(b" ").await.unwrap();
    let answer = read_response(&mut held).await;
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    let d = b.desired_name().await.unwrap();
    b.report("Done", Some(&d), Some(&d), None).await;

    // An enrollment whose token is in its body, of the largest size, held by its last byte.
    let len = hearth_server::http::limits::MAX_ENROLL_BODY;
    let mut enrolling = raw_tls(port, &ca).await;
    enrolling
        .write_all(head("/api/v1/enroll", "", len).as_bytes())
        .await
        .unwrap();
    enrolling.write_all(&vec![b' '; len - 1]).await.unwrap();
    enrolling.flush().await.unwrap();
    // Another is 503; a node's report is not held back by it.
    let body =
        serde_json::to_vec(&serde_json::json!({"node": "w-d", "bootstrapToken": token})).unwrap();
    let padded = [body, vec![b' '; 4096]].concat();
    let answer = until_busy(
        port,
        &ca,
        &head("/api/v1/enroll", "", padded.len()),
        &padded,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    b.report("Done", Some(&d), Some(&d), None).await;
    enrolling.write_all(b" ").await.unwrap();
    let answer = read_response(&mut enrolling).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    s.shutdown().await;
}

/// Every answer of the API carries `X-Content-Type-Options: nosniff`: JSON documents, errors,
/// plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_nosniff() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let admin = Api::admin(&s);
    for (api, path) in [
        (&admin, "/api/v1/pools"),
        (&admin, "/api/v1/nodes/none-such"),
        (&admin.with_token(""), "/api/v1/pools"),
        (&admin, "/healthz"),
        (&admin, "/metrics"),
        (&admin, "/api/v1/no-such-endpoint"),
    ] {
        let r = api
            .client
            .get(format!("{}{path}", api.base))
            .bearer_auth(&api.token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap()),
            Some("nosniff"),
            "{path} ({})",
            r.status()
        );
    }
    s.shutdown().await;
}
