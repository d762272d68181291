//! Admin client certificates against a real server (in-process on 127.0.0.1:0, real TLS): a
//! certificate issued by `hearth-server issue-admin-cert` from the fleet CA is an admin; one
//! from another CA, an expired one, or one not issued for an admin is not; a node's credential
//! stays a node's whatever certificate comes with it.

use crate::common;

use common::{start, Api};
use hearth_server::pki::{self, Layout, ADMIN_ORGANIZATION};
use reqwest::StatusCode;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// An HTTPS client trusting only the server's CA and presenting `cert` + `key` (PEM).
fn client_with(ca_pem: &[u8], cert: &str, key: &str) -> reqwest::Client {
    let identity = reqwest::Identity::from_pem(format!("{cert}\n{key}").as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(ca_pem).unwrap())
        .identity(identity)
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap()
}

fn ca(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("pki/ca.crt")).unwrap()
}

/// What a request with `client` (no token) gets: a status, or the transport error's text (a
/// certificate refused during the handshake).
async fn pools_with(client: &reqwest::Client, base: &str) -> Result<StatusCode, String> {
    match client.get(format!("{base}/api/v1/pools")).send().await {
        Ok(r) => Ok(r.status()),
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                src = s.source();
            }
            Err(msg)
        }
    }
}

#[tokio::test]
async fn issued_admin_certificate_is_an_admin_without_a_token() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let running = start(&state, common::options(5)).await;
    let admin = Api::admin(&running);

    // Issued by the binary, as an operator does (the server keeps running).
    let out = d.path().join("certs");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-server"))
        .args(["issue-admin-cert", "--state-dir"])
        .arg(&state)
        .args(["--name", "alice", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for f in ["alice.crt", "alice.key"] {
        let mode = std::fs::metadata(out.join(f)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
    // Issuing again does not overwrite the key.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_hearth-server"))
        .args(["issue-admin-cert", "--state-dir"])
        .arg(&state)
        .args(["--name", "alice", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not overwritten"));

    let cert = std::fs::read_to_string(out.join("alice.crt")).unwrap();
    let key = std::fs::read_to_string(out.join("alice.key")).unwrap();
    let with_cert = Api {
        client: client_with(&ca(&state), &cert, &key),
        token: String::new(),
        ..admin.clone()
    };
    let a = with_cert.get("/api/v1/pools").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json["items"].as_array().unwrap().len(), 2);
    // Changes too: apply the example fleet.
    let files: Vec<(String, String)> = std::fs::read_dir(common::examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    let a = with_cert.apply(&files).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let a = admin.get("/api/v1/pools/infra").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    // The events name the certificate's holder.
    let a = admin
        .get("/api/v1/events?object=MachineConfigPool/infra")
        .await;
    assert!(
        a.text.contains("created by apply (admin alice)"),
        "{}",
        a.text
    );

    // The first-boot config too (as with the admin token: without a bootstrap token in it).
    let a = with_cert.get("/config/worker").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let env = a.json["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/hearth/agent.env")
        .expect("the first-boot config holds agent.env")["contents"]["source"]
        .as_str()
        .unwrap()
        .to_string();
    let env = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        env.split_once("base64,").unwrap().1,
    )
    .unwrap();
    let env = String::from_utf8(env).unwrap();
    assert!(env.contains("HEARTH_SERVER="), "{env}");
    assert!(!env.contains("hearth-bootstrap-"), "{env}");

    // Without the certificate and without a token: 401.
    let a = admin.with_token("").get("/config/worker").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.text);
    let a = admin.with_token("").get("/api/v1/pools").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.text);
    running.shutdown().await;
}

#[tokio::test]
async fn certificates_from_another_ca_or_expired_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let running = start(&state, common::options(5)).await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());

    // Another CA (another state directory's), with a certificate that looks like an admin's.
    let other = Layout {
        dir: d.path().join("other"),
    };
    pki::init(&other, &["localhost".to_string()]).unwrap();
    let foreign = pki::issue_admin_cert(&other, "mallory", 30).unwrap();
    let r = pools_with(
        &client_with(&ca(&state), &foreign.cert_pem, &foreign.key_pem),
        &base,
    )
    .await;
    assert!(
        r.is_err() || r == Ok(StatusCode::UNAUTHORIZED),
        "a certificate of another CA must be refused: {r:?}"
    );

    // Expired, from the fleet CA.
    let layout = Layout { dir: state.clone() };
    let now = time::OffsetDateTime::now_utc();
    let expired = pki::issue_client_cert(
        &layout,
        "bob",
        Some(ADMIN_ORGANIZATION),
        now - time::Duration::days(10),
        now - time::Duration::days(1),
    )
    .unwrap();
    let r = pools_with(
        &client_with(&ca(&state), &expired.cert_pem, &expired.key_pem),
        &base,
    )
    .await;
    assert!(
        r.is_err() || r == Ok(StatusCode::UNAUTHORIZED),
        "an expired certificate must be refused: {r:?}"
    );

    // The same name, valid: accepted (so the refusals above are about the CA and the dates).
    let valid = pki::issue_admin_cert(&layout, "bob", 1).unwrap();
    let r = pools_with(
        &client_with(&ca(&state), &valid.cert_pem, &valid.key_pem),
        &base,
    )
    .await;
    assert_eq!(r, Ok(StatusCode::OK));
    running.shutdown().await;
}

#[tokio::test]
async fn nodes_and_non_admin_certificates_get_no_admin_rights() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let running = start(&state, common::options(5)).await;
    let admin = Api::admin(&running);
    let files: Vec<(String, String)> = std::fs::read_dir(common::examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    assert_eq!(admin.apply(&files).await.status, StatusCode::OK);
    let layout = Layout { dir: state.clone() };

    // A fleet-CA certificate that was not issued for an admin (no admin organization): 403.
    let now = time::OffsetDateTime::now_utc();
    let plain = pki::issue_client_cert(
        &layout,
        "worker-0",
        None,
        now - time::Duration::hours(1),
        now + time::Duration::days(1),
    )
    .unwrap();
    let plain_api = Api {
        client: client_with(&ca(&state), &plain.cert_pem, &plain.key_pem),
        token: String::new(),
        ..admin.clone()
    };
    let a = plain_api.get("/api/v1/pools").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert!(a.text.contains("not issued for an admin"), "{}", a.text);

    // A node's credential stays a node's, even on a connection with an admin certificate:
    // it reads neither the pools nor another node's config.
    let bootstrap = std::fs::read_to_string(state.join("tokens/worker.token")).unwrap();
    let node = admin.enroll(bootstrap.trim(), "worker-0", json!({})).await;
    let alice = pki::issue_admin_cert(&layout, "alice", 1).unwrap();
    let node_with_cert = Api {
        client: client_with(&ca(&state), &alice.cert_pem, &alice.key_pem),
        ..node.clone()
    };
    for api in [&node, &node_with_cert] {
        let a = api.get("/api/v1/pools").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
        let a = api.get("/api/v1/agent/desired?node=worker-1").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
        let a = api.get("/api/v1/agent/desired").await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    }
    running.shutdown().await;
}
