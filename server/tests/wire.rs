//! The agent's own client (`hearth_agent::remote`) against a real server. Both sides use the
//! wire types of `hearth-api`, so they cannot drift apart at compile time; this checks that
//! they also agree at run time, over real HTTPS: enrollment, the long poll, status reports,
//! reboot slots, enrolling again.

use crate::common;

use common::*;
use hearth_agent::journal::Journal;
use hearth_agent::remote::{self, DesiredConfigExt};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_client_against_a_real_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let admin = Api::admin(&s);
    admin.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let token = bootstrap_token(&s, "worker");

    // A wrong token and a wrong CA are told apart.
    let e = remote::Remote::enroll(&admin.base, &ca, "nope", "w0", &BTreeMap::new())
        .await
        .unwrap_err();
    assert!(e.needs_enrollment(), "{e}");
    let other = tempfile::tempdir().unwrap();
    hearth_server::pki::init(
        &hearth_server::pki::Layout {
            dir: other.path().to_path_buf(),
        },
        &["localhost".into()],
    )
    .unwrap();
    let wrong_ca = std::fs::read(other.path().join("pki/ca.crt")).unwrap();
    let e = remote::Remote::enroll(&admin.base, &wrong_ca, &token, "w0", &BTreeMap::new())
        .await
        .unwrap_err();
    assert!(matches!(e, remote::RemoteError::Transport { .. }), "{e}");

    let r = remote::Remote::enroll(&admin.base, &ca, &token, "w0", &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(r.pool.as_deref(), Some("worker"));
    let again = remote::Remote::new(&admin.base, &ca, r.credential()).unwrap();
    let d = again
        .desired(None, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(d.name.starts_with("rendered-worker-"));
    assert_eq!(
        again
            .desired(Some(&d.name), Duration::from_secs(1))
            .await
            .unwrap(),
        None
    );
    let (named, _policies) = d.clone().into_parts();

    // Report through the agent's own status document.
    let j = Journal {
        current: Some(named.clone()),
        desired: Some(named.clone()),
        ..Default::default()
    };
    again
        .report(&hearth_agent::cli::status_document(&j))
        .await
        .unwrap();
    let n = admin.get("/api/v1/nodes/w0").await.json;
    assert_eq!(n["status"]["state"], "Done");
    assert_eq!(n["status"]["current"], d.name.as_str());
    assert_eq!(counts(&admin, "worker").await, (1, 1, 1, 0));

    let slot = again.reboot_slot(true).await.unwrap();
    assert!(slot.granted);
    assert!(!again.reboot_slot(false).await.unwrap().granted);

    // Enrolling the name again: refused with the bootstrap token alone (409, not "enroll
    // again"), granted with the node's credential, which it replaces.
    let e = remote::Remote::enroll(&admin.base, &ca, &token, "w0", &BTreeMap::new())
        .await
        .unwrap_err();
    assert!(
        matches!(e, remote::RemoteError::Status { status: 409, .. }),
        "{e}"
    );
    assert!(!e.needs_enrollment());
    let renewed = remote::Remote::enroll_again(
        &admin.base,
        &ca,
        &token,
        "w0",
        &BTreeMap::new(),
        again.credential(),
    )
    .await
    .unwrap();
    assert_ne!(renewed.credential(), again.credential());
    let e = again
        .desired(None, Duration::from_secs(0))
        .await
        .unwrap_err();
    assert!(e.needs_enrollment(), "{e}");
    let again = renewed;

    // An idle agent sees a change within a second.
    let waiter = {
        let again = again.clone();
        let known = d.name.clone();
        tokio::spawn(async move {
            let got = again.desired(Some(&known), Duration::from_secs(60)).await;
            (got, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    admin.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let (got, when) = waiter.await.unwrap();
    let got = got.unwrap().unwrap();
    assert_ne!(got.name, d.name);
    assert!(when.duration_since(sent) < Duration::from_secs(2));

    // Deleted: the agent is told to enroll again.
    admin.delete("/api/v1/nodes/w0").await;
    let e = again
        .desired(None, Duration::from_secs(0))
        .await
        .unwrap_err();
    assert!(e.needs_enrollment(), "{e}");
    s.shutdown().await;
}

/// An enrolled agent pointed at its server under another URL (a new name, another replica of
/// the same store) keeps its credential: the new list replaces the saved one, and the node is
/// not enrolled again (a bootstrap token alone could not take it back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enrolled_agent_keeps_its_credential_under_a_new_url() {
    use hearth_agent::enrolment::{self, Server, ServerState};
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let admin = Api::admin(&s);
    admin.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let token = bootstrap_token(&s, "worker");
    let host = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(host.path().join("var/lib/hearth")).unwrap();
    let root = hearth_hostops::fs::Root::open(host.path()).unwrap();
    let server = Server {
        urls: vec![admin.base.clone()],
        ca_pem: ca.clone(),
        bootstrap_token: Some(token.clone()),
        node: "w0".into(),
        labels: BTreeMap::new(),
        wait: Duration::from_secs(1),
    };
    let (_first, state) = enrolment::connect(&root, &server).await.unwrap();
    // The saved state names the server by another URL (as after a DNS rename), in the form an
    // agent before server lists wrote (`url` alone).
    let old_file = serde_json::json!({
        "url": "https://old-name.example:22623",
        "node": state.node,
        "pool": state.pool,
        "credential": state.credential,
    });
    std::fs::write(
        host.path().join("var/lib/hearth/server.json"),
        serde_json::to_vec(&old_file).unwrap(),
    )
    .unwrap();
    let (again, kept) = enrolment::connect(&root, &server).await.unwrap();
    assert_eq!(kept.credential, state.credential);
    assert_eq!(kept.urls(), vec![admin.base.clone()]);
    let d = again.desired(None, Duration::from_secs(5)).await.unwrap();
    assert!(d.unwrap().name.starts_with("rendered-worker-"));
    // Saved with the new list: read back, and by an older agent (`url`).
    let saved = ServerState::load(&root).unwrap();
    assert_eq!(saved, kept);
    assert_eq!(saved.url, admin.base);
    s.shutdown().await;
}

/// The agent's client asks for deferred reports (`defer=true`) and reads the time it is given:
/// with one report a second, of three agents woken by one apply the first reports at once, the
/// others within the first and the second second after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_client_reads_when_to_report() {
    let dir = tempfile::tempdir().unwrap();
    let options = hearth_server::app::Options {
        desired_answers_at_once: 1,
        deferred_reports_per_second: 1,
        ..options(5)
    };
    let s = start(dir.path(), options).await;
    let admin = Api::admin(&s);
    admin.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    admin.apply_text("pool.yaml", ALL_AT_ONCE).await;
    let ca = std::fs::read(dir.path().join("pki/ca.crt")).unwrap();
    let token = bootstrap_token(&s, "worker");
    let mut polls = Vec::new();
    for name in ["w0", "w1", "w2"] {
        let r = remote::Remote::enroll(&admin.base, &ca, &token, name, &BTreeMap::new())
            .await
            .unwrap();
        // The first config through the client that does not defer (a turn, ended by the
        // report).
        let d = r
            .desired(None, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        let (named, _) = d.clone().into_parts();
        let j = Journal {
            current: Some(named.clone()),
            desired: Some(named),
            ..Default::default()
        };
        r.report(&hearth_agent::cli::status_document(&j))
            .await
            .unwrap();
        polls.push(tokio::spawn(async move {
            r.desired_and_requests(Some(&d.name), Some(0), Duration::from_secs(60))
                .await
        }));
    }
    long_polls_waiting(&admin, 3).await;
    admin.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let mut afters = Vec::new();
    for p in polls {
        let a = p.await.unwrap().unwrap().expect("the new config");
        afters.push(a.report_after);
    }
    afters.sort();
    assert_eq!(afters[0], None, "{afters:?}");
    let second = Duration::from_secs(1);
    assert!(afters[1].is_some_and(|d| d <= second), "{afters:?}");
    assert!(
        afters[2].is_some_and(|d| d > second && d <= 2 * second),
        "{afters:?}"
    );
    s.shutdown().await;
}
