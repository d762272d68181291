//! Who may hold the server's memory with a request body (issue 31, "unauthenticated bodies are
//! buffered before authentication"): a body whose credential does not authenticate is read and
//! dropped, never kept, however many such clients send at once; the bodies of nodes (and other
//! callers than admins) share one budget, beyond which the answer is 503; an admin's are not
//! counted against it. And every answer, JSON or not, says `X-Content-Type-Options: nosniff`.

use crate::common::{self, *};
use crate::refusals::{raw_tls, read_response, rss_kib};
use reqwest::StatusCode;
use tokio::io::AsyncWriteExt;

/// Clients without a valid credential that each send most of a large apply and then wait, all
/// at once: before, the server kept every body it was reading (24 clients of 63 MiB grew it by
/// 1.95 GB); now what it holds does not grow with them. The server is the built binary, so the
/// memory measured is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_without_a_valid_credential_are_never_kept() {
    const CLIENTS: usize = 6;
    const BODY: usize = 24 << 20;
    /// A sixth of what the clients hold back between them (144 MiB): kept bodies would pass it
    /// whatever the allocator does; read-and-dropped pieces stay far below.
    const MAX_GROWTH_KIB: u64 = 24 << 10;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut cmd = common::binary::command(&state);
    cmd.env("TOKIO_WORKER_THREADS", "2")
        .env("_RJEM_MALLOC_CONF", "narenas:2")
        .env("MALLOC_ARENA_MAX", "2");
    let server = common::binary::spawn(cmd);
    let ca = std::fs::read(state.join("pki/ca.crt")).unwrap();
    let pid = server.child.id();
    let mut first = raw_tls(server.port, &ca).await;
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(read_response(&mut first).await.starts_with("HTTP/1.1 200"));
    let before = rss_kib(pid);
    // Half with no credential, half with a token the server does not know.
    let piece = vec![b'x'; 1 << 20];
    let mut open = Vec::new();
    for i in 0..CLIENTS {
        let mut c = raw_tls(server.port, &ca).await;
        let auth = if i % 2 == 0 {
            String::new()
        } else {
            "authorization: Bearer not-a-token-of-this-server\r\n".to_string()
        };
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
    // What the server has taken in by now is in its memory or dropped: wait until it has read
    // what the clients sent (its own input buffers are small), then measure.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let during = rss_kib(pid);
    for c in &mut open {
        c.write_all(b"x").await.unwrap();
        let answer = read_response(c).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(answer.contains("\"reason\":\"Unauthorized\""), "{answer}");
    }
    let growth = during.saturating_sub(before);
    eprintln!(
        "{CLIENTS} unauthenticated bodies of {BODY} bytes, all but the last byte sent: \
         {before} KiB before, {during} KiB during (+{growth})"
    );
    assert!(
        growth < MAX_GROWTH_KIB,
        "{CLIENTS} clients without a valid credential, {BODY} bytes each: the server grew from \
         {before} KiB to {during} KiB"
    );
}

/// A node's request body is held within the budget of callers other than admins: while one
/// node's report of the largest size is being read, another node's is answered 503 with
/// `Retry-After` (and none of its body is read); an admin's apply is not held back; once the
/// first is answered, the second node goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bodies_of_nodes_share_one_budget_and_an_admins_do_not_count() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        dir.path(),
        hearth_server::app::Options {
            untrusted_bodies: hearth_server::limits::MAX_BODY + 1024,
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
    let head = |node: &Api, len: usize| {
        format!(
            "POST /api/v1/agent/status HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             authorization: Bearer {}\r\ncontent-length: {len}\r\n\r\n",
            node.token
        )
    };
    // Node a: a report of the largest size, all but its last byte.
    let len = hearth_server::limits::MAX_BODY;
    let mut held = raw_tls(port, &ca).await;
    held.write_all(head(&a, len).as_bytes()).await.unwrap();
    held.write_all(&vec![b' '; len - 1]).await.unwrap();
    held.flush().await.unwrap();
    // Node b, meanwhile, with a body that does not fit in what is left (1 KiB): 503 at once,
    // before its body.
    let mut other = raw_tls(port, &ca).await;
    other.write_all(head(&b, 4096).as_bytes()).await.unwrap();
    let answer = read_response(&mut other).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 5"),
        "{answer}"
    );
    assert!(answer.contains("retry in 5 s"), "{answer}");
    // An admin's apply is not counted against it.
    let applied = admin
        .apply(&[(
            "mc.yaml".into(),
            worker_mc("10-held", "while a node's body is held"),
        )])
        .await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    // Node a's body ends (not a report: refused as such, with its credential taken); then b
    // reports as usual.
    held.write_all(b" ").await.unwrap();
    let answer = read_response(&mut held).await;
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    let d = b.desired_name().await.unwrap();
    b.report("Done", Some(&d), Some(&d), None).await;
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
