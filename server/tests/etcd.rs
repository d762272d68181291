//! The etcd store against a real etcd (the binary `etcd-bin-vendored` ships, on loopback):
//! a three-member cluster whose leader is killed while commits go on, a dead member left in the
//! endpoint list, two clients on one prefix (compare-and-swap and watch), and TLS with client
//! certificates. No timed assertions: waits have generous bounds that only fail a hung test.

use crate::test_cluster;

use hearth_server::store::etcd::{EtcdConfig, EtcdStore, EtcdTls};
use hearth_server::store::{Expect, Kind, Op, Store, StoreError};
use std::time::Duration;
use test_cluster::{Cluster, MemberTls};

fn config(endpoints: Vec<String>, prefix: &str) -> EtcdConfig {
    EtcdConfig {
        endpoints,
        prefix: prefix.into(),
        tls: None,
    }
}

fn put(name: &str, value: String, expect: Expect) -> Op {
    Op::Put {
        kind: Kind::Node,
        name: name.into(),
        value: value.into_bytes().into(),
        expect,
    }
}

/// Waits (bounded: a hang fails the test) until `store`'s watch reaches `revision`.
async fn watch_reaches(store: &EtcdStore, revision: u64) {
    let mut w = store.watch();
    tokio::time::timeout(Duration::from_secs(60), w.wait_for(|r| *r >= revision))
        .await
        .unwrap_or_else(|_| panic!("the watch never reached revision {revision}"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_commits_go_on_and_a_dead_member_fails_nothing() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.wait_leader().await;
    let endpoints = cluster.endpoints();
    // Both clients talk to the leader first: killing it cuts their connections mid-way (the
    // commits' and the second client's watch stream).
    let mut leader_first = endpoints.clone();
    leader_first.swap(0, leader);
    let store = EtcdStore::connect(&config(leader_first.clone(), "/hearth/"))
        .await
        .unwrap();
    let watcher = EtcdStore::connect(&config(leader_first, "/hearth/"))
        .await
        .unwrap();

    // A chain of compare-and-swap commits on one counter: a commit applied twice (a retry of
    // one whose answer was lost) would break the chain with a conflict.
    let mut rev = store
        .commit(vec![put("counter", "0".into(), Expect::Absent)])
        .await
        .unwrap();
    let mut failed = Vec::new();
    for i in 1..=50 {
        if i == 10 {
            cluster.kill(leader);
        }
        match store
            .commit(vec![put("counter", i.to_string(), Expect::Revision(rev))])
            .await
        {
            Ok(r) => {
                assert!(r > rev);
                rev = r;
            }
            Err(e) => failed.push(format!("commit {i}: {e}")),
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 50 commits failed: {failed:?}",
        failed.len()
    );
    let counter = store.get(Kind::Node, "counter").await.unwrap().unwrap();
    assert_eq!(counter.value, b"50");
    assert_eq!(counter.mod_revision, rev);
    // The other client's watch followed, over another member.
    watch_reaches(&watcher, rev).await;
    assert_eq!(
        watcher
            .get(Kind::Node, "counter")
            .await
            .unwrap()
            .unwrap()
            .value,
        b"50"
    );

    // A new client with the dead member first in its list: no request fails.
    let mut dead_first = endpoints.clone();
    dead_first.swap(0, leader);
    let fresh = EtcdStore::connect(&config(dead_first, "/hearth/"))
        .await
        .unwrap();
    let mut failed = 0;
    for i in 0..50 {
        let name = format!("n{i}");
        if fresh
            .commit(vec![put(&name, i.to_string(), Expect::Absent)])
            .await
            .is_err()
        {
            failed += 1;
        }
        match fresh.get(Kind::Node, &name).await {
            Ok(Some(v)) if v.value == i.to_string().as_bytes() => {}
            _ => failed += 1,
        }
    }
    assert_eq!(
        failed, 0,
        "{failed} of 100 requests failed with a dead member listed"
    );
    assert_eq!(fresh.list(Kind::Node).await.unwrap().len(), 51);

    // For comparison (printed, not asserted: it is etcd-client's behaviour, not ours): the
    // client's own balanced channel over the same list.
    let mut raw = etcd_client::Client::connect(
        cluster.endpoints(),
        Some(etcd_client::ConnectOptions::new().with_timeout(Duration::from_secs(2))),
    )
    .await
    .unwrap();
    let mut raw_failed = 0;
    for i in 0..50 {
        if raw.put(format!("/raw/{i}"), "x", None).await.is_err() {
            raw_failed += 1;
        }
    }
    eprintln!("etcd-client's balanced channel with one dead member: {raw_failed} of 50 puts failed; EtcdStore: 0 of 100");

    // The member comes back and is used again.
    cluster.restart(leader);
    cluster.wait_leader().await;
    let r = store
        .commit(vec![put("after", "x".into(), Expect::Absent)])
        .await
        .unwrap();
    watch_reaches(&fresh, r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_conflict_and_watch_each_other() {
    let cluster = Cluster::start(1);
    cluster.wait_leader().await;
    let a = EtcdStore::connect(&config(cluster.endpoints(), "/site/"))
        .await
        .unwrap();
    let b = EtcdStore::connect(&config(cluster.endpoints(), "/site/"))
        .await
        .unwrap();
    let mut bw = b.watch();
    bw.borrow_and_update();
    let ra = a
        .commit(vec![put("x", "from a".into(), Expect::Absent)])
        .await
        .unwrap();
    // b's watch ticks on a's commit.
    tokio::time::timeout(Duration::from_secs(60), bw.wait_for(|r| *r >= ra))
        .await
        .expect("b's watch ticks on a's commit")
        .unwrap();
    // b's create conflicts, naming what it found.
    match b
        .commit(vec![put("x", "from b".into(), Expect::Absent)])
        .await
    {
        Err(StoreError::Conflict {
            kind: Kind::Node,
            name,
            expected: Expect::Absent,
            found: Some(found),
        }) => assert_eq!((name.as_str(), found), ("x", ra)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // b replaces it knowing the revision; a's stale compare-and-swap then conflicts.
    let rb = b
        .commit(vec![put("x", "from b".into(), Expect::Revision(ra))])
        .await
        .unwrap();
    match a
        .commit(vec![put("x", "from a again".into(), Expect::Revision(ra))])
        .await
    {
        Err(StoreError::Conflict { found, .. }) => assert_eq!(found, Some(rb)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        a.get(Kind::Node, "x").await.unwrap().unwrap().value,
        b"from b"
    );
    watch_reaches(&a, rb).await;
    // A list longer than a page (500 keys) is whole, sorted and one snapshot.
    for chunk in 0..6 {
        let ops = (0..200)
            .map(|i| {
                put(
                    &format!("bulk-{:04}", chunk * 200 + i),
                    "v".into(),
                    Expect::Absent,
                )
            })
            .collect();
        a.commit(ops).await.unwrap();
    }
    let listed = b.list(Kind::Node).await.unwrap();
    assert_eq!(listed.len(), 1201);
    assert!(listed.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(listed[0].0, "bulk-0000");
    assert_eq!(listed[1200].0, "x");
    // Another prefix sees none of it.
    let other = EtcdStore::connect(&config(cluster.endpoints(), "/other/"))
        .await
        .unwrap();
    assert!(other.list(Kind::Node).await.unwrap().is_empty());
}

/// A certificate and its key (PEM).
type CertKey = (Vec<u8>, Vec<u8>);

/// A CA, a serving certificate for 127.0.0.1, a client certificate, and a client certificate
/// from another CA, all from rcgen.
fn pki(dir: &std::path::Path) -> (MemberTls, Vec<u8>, CertKey, CertKey) {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, &ca_key);
    let leaf =
        |sans: Vec<String>, usage: ExtendedKeyUsagePurpose, issuer: &Issuer<'_, &KeyPair>| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(sans).unwrap();
            p.extended_key_usages = vec![usage];
            let cert = p.signed_by(&key, issuer).unwrap();
            (cert.pem().into_bytes(), key.serialize_pem().into_bytes())
        };
    let server = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        &issuer,
    );
    let client = leaf(
        vec!["hearth".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        &issuer,
    );
    // A client certificate from a CA etcd does not trust.
    let other_key = KeyPair::generate().unwrap();
    let mut other = CertificateParams::new(Vec::<String>::new()).unwrap();
    other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let other_issuer = Issuer::new(other, &other_key);
    let stranger = leaf(
        vec!["stranger".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        &other_issuer,
    );
    let ca_pem = ca_cert.pem().into_bytes();
    std::fs::write(dir.join("ca.crt"), &ca_pem).unwrap();
    std::fs::write(dir.join("server.crt"), &server.0).unwrap();
    std::fs::write(dir.join("server.key"), &server.1).unwrap();
    (
        MemberTls {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            client_ca: dir.join("ca.crt"),
        },
        ca_pem,
        client,
        stranger,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let (member_tls, ca_pem, client, stranger) = pki(dir.path());
    let cluster = Cluster::start_with(1, Some(member_tls));
    let tls = |identity: Option<CertKey>| EtcdConfig {
        endpoints: cluster.endpoints(),
        prefix: "/tls/".into(),
        tls: Some(EtcdTls {
            ca_pem: Some(ca_pem.clone()),
            identity,
        }),
    };
    // The member may still be starting: the first connection waits for it (bounded).
    let mut store = None;
    for _ in 0..100 {
        if let Ok(s) = EtcdStore::connect(&tls(Some(client.clone()))).await {
            store = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let store = store.expect("a TLS connection with a client certificate");
    let r = store
        .commit(vec![put("secure", "yes".into(), Expect::Absent)])
        .await
        .unwrap();
    let v = store.get(Kind::Node, "secure").await.unwrap().unwrap();
    assert_eq!((v.value.as_slice(), v.mod_revision), (&b"yes"[..], r));
    watch_reaches(&store, r).await;

    // Without a client certificate, or with one from another CA, etcd lets nobody in.
    for identity in [None, Some(stranger)] {
        let refused = match EtcdStore::connect(&tls(identity)).await {
            Err(e) => e.to_string(),
            Ok(s) => s.get(Kind::Node, "secure").await.unwrap_err().to_string(),
        };
        assert!(refused.contains("etcd"), "{refused}");
    }
    // Plain http to a TLS member is refused too.
    let plain = EtcdStore::connect(&config(
        cluster
            .endpoints()
            .iter()
            .map(|u| u.replace("https://", "http://"))
            .collect(),
        "/tls/",
    ))
    .await;
    assert!(plain.is_err());
    // An https:// endpoint without the CA, and a prefix that is not a directory, are refused
    // before anything is sent.
    let no_ca = EtcdStore::connect(&config(cluster.endpoints(), "/tls/"))
        .await
        .unwrap_err()
        .to_string();
    assert!(no_ca.contains("--etcd-ca"), "{no_ca}");
    let prefix = EtcdStore::connect(&config(cluster.endpoints(), "hearth"))
        .await
        .unwrap_err()
        .to_string();
    assert!(prefix.contains("must start and end with '/'"), "{prefix}");
}
