//! The dashboard in a real headless browser (Debian's `chromium`, driven over WebDriver by
//! Debian's `chromedriver`) against a real server over TLS, signed in with a viewer token:
//! the pools and nodes load, a Degraded node's reason shows in full and as text (an HTML tag in
//! it is not markup), a node's change and a rollout show up live without a page reload, and the
//! viewer can change nothing. Screenshots go to the test's temporary directory, and to
//! `docs/img/` with `HEARTH_DOCS_SCREENSHOTS=1`.

use crate::common;

use common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const REASON: &str = "step 2 of 3 (start demo.service) failed: unit demo.service failed: <img src=x onerror=alert(1)> exit-code 3";

/// chromedriver and the Chromium it starts, killed on drop, also when the test fails: the
/// whole process group chromedriver leads, then any process still naming the test's profile
/// directory (a browser process that left the group).
struct Driver {
    child: Child,
    profile: PathBuf,
    base: String,
    http: reqwest::Client,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        use nix::sys::signal::{killpg, Signal};
        use nix::unistd::Pid;
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
        for pid in using_profile(&self.profile) {
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        }
    }
}

/// The processes whose command line names `profile` (the browser's `--user-data-dir`).
fn using_profile(profile: &Path) -> Vec<nix::unistd::Pid> {
    let needle = profile.to_string_lossy().into_owned();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .map(nix::unistd::Pid::from_raw)
        .collect()
}

impl Driver {
    async fn start(profile: &Path) -> Driver {
        for p in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(p).exists(),
                "{p} is missing: install Debian's chromium and chromium-driver (vm-tests/scripts/install-deps.sh)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            // A group of its own, which the drop kills whole (the browser included).
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut d = Driver {
            child,
            profile: profile.to_path_buf(),
            base,
            http,
            session: String::new(),
        };
        // Headless, no sandbox (root), none of Chromium's own network traffic (this machine has
        // no internet), and the test server's certificate accepted (TLS is not what is tested).
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1360,1000",
                format!("--user-data-dir={}", profile.display()),
            ]},
        }}});
        let v = d.call("POST", "/session", Some(caps)).await;
        d.session = v["sessionId"].as_str().expect("a session").to_string();
        d
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "POST" => self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(body.unwrap_or_else(|| json!({})).to_string()),
            "DELETE" => self.http.delete(url),
            _ => self.http.get(url),
        };
        let r = req.send().await.expect("chromedriver answers");
        let status = r.status();
        let v: Value =
            serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or_default();
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.call(
            "POST",
            &format!("/session/{}/url", self.session),
            Some(json!({"url": url})),
        )
        .await;
    }

    async fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            &format!("/session/{}/execute/sync", self.session),
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    async fn text(&self) -> String {
        self.js("return document.body.innerText")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until `what` holds of the page's text.
    async fn wait_text(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let t = self.text().await;
            if f(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {what}:\n{t}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The text of the table row of a node or pool (`data-node` / `data-pool`), "" if none.
    async fn row(&self, kind: &str, name: &str) -> String {
        self.js(&format!(
            "const r = document.querySelector('tr[data-{kind}=\"{name}\"]'); return r ? r.innerText : ''"
        ))
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// Waits until the row of a node or pool says `what`.
    async fn wait_row(&self, kind: &str, name: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.row(kind, name).await;
            if r.contains(what) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{kind} {name} never showed {what}: {r:?}\n{}",
                self.text().await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn screenshot(&self, name: &str) {
        use base64::Engine as _;
        let v = self
            .call(
                "GET",
                &format!("/session/{}/screenshot", self.session),
                None,
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        let mut dirs = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR"))];
        if std::env::var("HEARTH_DOCS_SCREENSHOTS").is_ok_and(|v| v == "1") {
            dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/img"));
        }
        for d in dirs {
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(name), &png).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_fleet_live_in_a_real_browser_for_a_viewer() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(&dir.path().join("state"), options(5)).await;
    let api = Api::admin(&s);
    let a = api
        .apply_text("base.yaml", &worker_mc("50-base", "base"))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let boot = bootstrap_token(&s, "worker");
    let w0 = api.enroll_done(&boot, "w0").await;
    // Done, with three drift lines: the table (the summary view) shows how many.
    let d0 = w0.desired_name().await.unwrap();
    let drift = json!([
        "/etc/a: content differs",
        "/etc/b: missing",
        "/etc/c: mode differs"
    ]);
    w0.post_status(&json!({"state": "Done", "current": d0, "desired": d0, "drift": drift}))
        .await;
    let w1 = api.enroll(&boot, "w1", json!({})).await;
    let d1 = w1.desired_name().await.unwrap();
    w1.report("Degraded", None, Some(&d1), Some(REASON)).await;

    // A viewer token: it reads, it cannot change anything.
    let t = api.post("/api/v1/viewer-tokens", &json!({})).await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    let viewer = t.json["token"].as_str().unwrap().to_string();
    // A validity past ten years is refused (it would wrap the expiry round into the past).
    let a = api
        .post("/api/v1/viewer-tokens", &json!({"ttlSeconds": u64::MAX}))
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.text);
    assert!(a.text.contains("ttlSeconds"), "{}", a.text);
    assert!(viewer.starts_with("hearth-viewer-"));
    let v = api.with_token(&viewer);
    assert_eq!(v.get("/api/v1/nodes").await.status, StatusCode::OK);
    let a = v.post("/api/v1/pools/worker/pause", &json!({})).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert!(a.text.contains("viewer"), "{}", a.text);
    assert_eq!(v.get("/config/worker").await.status, StatusCode::FORBIDDEN);
    // The page carries its Content-Security-Policy (no inline script, no other origin).
    let page = api.with_token("").get("/ui/").await;
    assert_eq!(page.status, StatusCode::OK);
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );

    let profile = tempfile::tempdir().unwrap();
    let browser = Driver::start(profile.path()).await;
    let url = format!("https://127.0.0.1:{}/ui/#token={viewer}", s.addr.port());
    browser.open(&url).await;
    let text = browser
        .wait_text("both nodes and the Degraded reason", |t| {
            t.contains("w0") && t.contains("Degraded") && t.contains("unit demo.service failed")
        })
        .await;
    assert!(browser.row("node", "w0").await.contains("Done"), "{text}");
    assert_eq!(
        browser
            .js("return document.querySelector('tr[data-node=\"w0\"]').cells[5].textContent")
            .await,
        json!("3")
    );
    assert!(
        browser.row("node", "w1").await.contains("Degraded"),
        "{text}"
    );
    // The token left the address bar; the tag in the node's reason is text, not an element.
    let href = browser.js("return location.href").await;
    assert!(!href.as_str().unwrap().contains("token"), "{href}");
    assert_eq!(
        browser
            .js("return document.querySelectorAll('img').length")
            .await,
        json!(0)
    );
    assert!(text.contains("<img src=x onerror=alert(1)>"), "{text}");

    // The node in full: its reason, history and events.
    browser
        .js("document.querySelector('tr[data-node=\"w1\"]').click(); return 0")
        .await;
    let text = browser
        .wait_text("w1's details", |t| {
            t.contains("Node w1") && t.contains("History")
        })
        .await;
    assert!(text.contains(REASON), "{text}");
    browser.screenshot("dashboard-degraded-node.png").await;

    // Live: the node recovers and a rollout starts, with no page reload.
    browser.js("window.hearthMarker = 42; return 0").await;
    w1.report("Done", Some(&d1), Some(&d1), None).await;
    browser.wait_row("node", "w1", "Done").await;
    let a = api
        .apply_text("next.yaml", &worker_mc("60-next", "next"))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    browser.wait_row("pool", "worker", "Updating").await;
    assert_eq!(browser.js("return window.hearthMarker").await, json!(42));
    assert!(
        browser
            .js("return window.hearthDashboard.refreshes")
            .await
            .as_u64()
            .unwrap()
            >= 3
    );
    // The pool: its rendered config and the diff of its last two.
    browser
        .js("document.querySelector('tr[data-pool=\"worker\"]').click(); return 0")
        .await;
    let text = browser
        .wait_text("the diff of two renders", |t| {
            // The diff arrives after the rendered config: wait for it, not for the config.
            t.contains("Pool worker") && t.contains("+++ rendered-worker-")
        })
        .await;
    assert!(
        text.contains("\"path\": \"/etc/hearth-test-60-next\""),
        "{text}"
    );
    // The pair the user chose stays chosen through the live refreshes.
    browser
        .js(
            "const [a, b] = document.querySelectorAll('#detail select'); a.value = b.value; \
             a.dispatchEvent(new Event('change')); return 0",
        )
        .await;
    let chosen = browser
        .js("return document.querySelectorAll('#detail select')[0].value")
        .await;
    let before = browser
        .js("return window.hearthDashboard.refreshes")
        .await
        .as_u64()
        .unwrap();
    w1.report("Done", Some(&d1), Some(&d1), Some("a new report"))
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while browser
        .js("return window.hearthDashboard.refreshes")
        .await
        .as_u64()
        .unwrap()
        <= before
    {
        assert!(Instant::now() < deadline, "no refresh after a change");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        browser
            .js("return document.querySelectorAll('#detail select')[0].value")
            .await,
        chosen
    );
    browser.screenshot("dashboard-pool-diff.png").await;
    // The test leaves no browser running (it was left orphaned once).
    drop(browser);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = using_profile(profile.path());
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = using_profile(profile.path());
    }
    assert!(left.is_empty(), "browser processes left running: {left:?}");
    s.shutdown().await;
}
