//! The kubectl conventions admins expect (issue 13), with the real `hearth` binary against a
//! real hearth-server: `hearth version`, `--no-headers`, `-l` label selectors, `get events`,
//! `get -w`, and `rollout status` failing on a halt.

use crate::common;

use common::{columns, examples, setup, Env, JsonValue};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: gold\n  labels:\n    tier: gold\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: gold\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/gold: \"\"\n";

fn exit_code(env: &Env, args: &[&str]) -> (Option<i32>, String, String) {
    let o = env.hearth(args);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn names(out: &str) -> Vec<&str> {
    let mut v: Vec<&str> = out.lines().collect();
    v.sort_unstable();
    v
}

#[test]
fn version_shows_the_client_and_the_server_build() {
    let env = setup();
    env.login();
    let v: Value = serde_json::from_str(&env.ok(&["version", "-o", "json"])).unwrap();
    assert_eq!(
        v["clientVersion"],
        json!({"version": env!("CARGO_PKG_VERSION"), "commit": env!("HEARTH_BUILD_COMMIT")}),
        "{v}"
    );
    assert_eq!(
        v["serverVersion"],
        serde_json::to_value(hearth_server::views::version_info()).unwrap(),
        "{v}"
    );
    let text = env.ok(&["version"]);
    assert_eq!(
        text,
        format!(
            "Client Version: {} (commit {})\nServer Version: {} (commit {})\n",
            env!("CARGO_PKG_VERSION"),
            env!("HEARTH_BUILD_COMMIT"),
            env!("CARGO_PKG_VERSION"),
            hearth_server::views::COMMIT
        )
    );
    // --client needs no server.
    let o = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["version", "--client"])
        .env("HEARTH_CONFIG", env.dir.path().join("nowhere.json"))
        .env_remove("HEARTH_SERVER")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("Client Version: "));
    // The server's build is for admins only, like the rest of the API.
    let r = env
        .http()
        .get(format!("{}/api/v1/version", env.url))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = env
        .http()
        .get(format!("{}/api/v1/version", env.url))
        .bearer_auth(env.token())
        .send()
        .unwrap()
        .json_value();
    assert_eq!(r["commit"], hearth_server::views::COMMIT);
}

#[test]
fn selectors_no_headers_events_and_a_halted_rollout() {
    let env = setup();
    env.login();
    env.ok(&["apply", "-f", examples().to_str().unwrap()]);
    let pool = env.dir.path().join("gold.yaml");
    std::fs::write(&pool, POOL).unwrap();
    env.ok(&["apply", "-f", pool.to_str().unwrap()]);
    env.ok(&["label", "node", "worker-1", "rack=r1"]);
    // apply reads a directory's subdirectories only with -R.
    let nested = env.dir.path().join("nested");
    std::fs::create_dir_all(nested.join("sub")).unwrap();
    std::fs::write(
        nested.join("sub/silver.yaml"),
        POOL.replace("gold", "silver"),
    )
    .unwrap();
    let (code, _, err) = exit_code(&env, &["apply", "-f", nested.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no manifest files"), "{err}");
    let out = env.ok(&["apply", "-R", "-f", nested.to_str().unwrap()]);
    assert!(out.contains("machineconfigpool/silver created"), "{out}");

    // -l on nodes and pools.
    let sel = |kind: &str, s: &str| env.ok(&["get", kind, "-l", s, "-o", "name"]);
    assert_eq!(names(&sel("nodes", "rack=r1")), ["node/worker-1"]);
    assert_eq!(
        names(&sel("nodes", "rack!=r1")),
        ["node/infra-0", "node/worker-0"]
    );
    assert_eq!(
        names(&sel("nodes", "node-role.kubernetes.io/infra")),
        ["node/infra-0"]
    );
    assert_eq!(
        names(&sel("nodes", "!node-role.kubernetes.io/infra,!rack")),
        ["node/worker-0"]
    );
    assert_eq!(names(&sel("mcp", "tier=gold")), ["machineconfigpool/gold"]);
    let table = env.ok(&["get", "nodes", "-l", "rack==r1"]);
    assert_eq!(table.lines().count(), 2, "{table}");
    let (code, _, err) = exit_code(&env, &["get", "nodes", "-l", "rack in (r1,r2)"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("set-based"), "{err}");

    // --no-headers on every table.
    for args in [
        vec!["get", "nodes"],
        vec!["get", "nodes", "-o", "wide"],
        vec!["get", "mcp"],
        vec!["get", "mc"],
        vec!["get", "events"],
        vec!["rollout", "status", "worker"],
    ] {
        let with = env.ok(&args);
        let mut no = args.clone();
        no.push("--no-headers");
        let without = env.ok(&no);
        let body = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with("pool ") && !l.starts_with("rollout "))
                .map(str::to_string)
                .collect()
        };
        let (with, without) = (body(&with), body(&without));
        assert!(
            with[0].starts_with("NAME")
                || with[0].starts_with("LAST SEEN")
                || with[0].starts_with("NODE"),
            "{args:?}: {with:?}"
        );
        assert_eq!(with[1..].len(), without.len(), "{args:?}: {without:?}");
        assert!(
            !without
                .iter()
                .any(|l| l.contains("NAME ") || l.contains("NODE ")),
            "{args:?}: {without:?}"
        );
    }

    // get events, all and for one object.
    let cred = env.enroll("worker-0");
    let out = env.ok(&["get", "events", "--for", "node/worker-0"]);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert!(!rows.is_empty(), "{out}");
    assert!(
        rows.iter()
            .all(|l| l.split_whitespace().nth(3) == Some("Node/worker-0")),
        "{out}"
    );
    assert!(rows.iter().any(|l| l.contains("Enrolled")), "{out}");
    let all = env.ok(&["get", "events"]);
    assert!(all.contains("MachineConfigPool/gold"), "{all}");
    let pool_events = env.ok(&["get", "events", "--for", "pool/gold", "--no-headers"]);
    assert!(
        !pool_events.is_empty()
            && pool_events
                .lines()
                .all(|l| l.contains("MachineConfigPool/gold")),
        "{pool_events}"
    );
    let v: Value =
        serde_json::from_str(&env.ok(&["get", "events", "--for", "node/worker-0", "-o", "json"]))
            .unwrap();
    assert!(v["items"].as_array().is_some_and(|i| !i.is_empty()), "{v}");
    for bad in [
        vec!["get", "events", "--for", "worker-0"],
        vec!["get", "events", "x"],
        vec!["get", "nodes", "--for", "node/worker-0"],
        vec!["get", "events", "-l", "a=b"],
        vec!["get", "nodes", "worker-0", "-l", "a=b", "-o", "json"],
        vec!["get", "nodes", "-w", "-o", "json"],
    ] {
        let (code, _, err) = exit_code(&env, &bad);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
    }

    // rollout status fails on a halt without --watch too.
    let d = env.desired(&cred);
    env.report(
        &cred,
        json!({"state": "Degraded", "current": null, "desired": d, "reason": "step 1 of 1 (write file /etc/a): EIO"}),
    );
    let (code, out, _) = exit_code(&env, &["rollout", "status", "worker"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("rollout halted: node worker-0 is degraded"),
        "{out}"
    );
    assert_eq!(columns(&out, "worker-0")[1], "Degraded", "{out}");
    // Only what went wrong: the node's Degraded event, no routine one.
    let warnings = env.ok(&["get", "events", "--type", "warning", "--no-headers"]);
    assert!(
        !warnings.is_empty()
            && warnings
                .lines()
                .all(|l| l.split_whitespace().nth(1) == Some("Warning")),
        "{warnings}"
    );
    assert!(
        warnings.contains("Degraded") && warnings.contains("Node/worker-0"),
        "{warnings}"
    );
    let normal = env.ok(&[
        "get",
        "events",
        "--type",
        "Normal",
        "--for",
        "node/worker-0",
    ]);
    assert!(
        normal.contains("Enrolled") && !normal.contains("Degraded"),
        "{normal}"
    );
    let (code, _, err) = exit_code(&env, &["get", "nodes", "--type", "warning"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = exit_code(
        &env,
        &["rollout", "status", "worker", "--watch", "--timeout", "10"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("halted"), "{err}");
}

/// Reads `child`'s stdout lines into a channel.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (at most 30 s) for a line `want` accepts; every line read on the way is kept in `seen`.
fn wait_for(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, want: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let hit = want(&l);
                seen.push(l);
                if hit {
                    return;
                }
            }
            Err(_) => panic!("no such line; got:\n{}", seen.join("\n")),
        }
    }
}

#[test]
fn get_watch_prints_changed_rows_and_new_events() {
    let env = setup();
    env.login();
    env.ok(&["apply", "-f", examples().to_str().unwrap()]);
    let spawn = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(args)
            .env("HEARTH_CONFIG", env.config())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut nodes = spawn(&["get", "nodes", "-w"]);
    let mut events = spawn(&[
        "get",
        "events",
        "-w",
        "--for",
        "node/worker-0",
        "--no-headers",
    ]);
    let node_lines = lines_of(&mut nodes);
    let event_lines = lines_of(&mut events);
    let mut seen = Vec::new();
    wait_for(&node_lines, &mut seen, |l| l.starts_with("worker-1 "));
    assert!(seen[0].starts_with("NAME"), "{seen:?}");

    // worker-0 enrols and reports: its row is printed again with its new state.
    let cred = env.enroll("worker-0");
    wait_for(&event_lines, &mut Vec::new(), |l| l.contains("Enrolled"));
    let d = env.desired(&cred);
    env.report(
        &cred,
        json!({"state": "Working", "current": null, "desired": d}),
    );
    wait_for(&node_lines, &mut seen, |l| {
        l.starts_with("worker-0 ") && l.split_whitespace().nth(2) == Some("Working")
    });
    // One more round of polls: rows that did not change were printed once only.
    env.report(&cred, json!({"state": "Done", "current": d, "desired": d}));
    wait_for(&node_lines, &mut seen, |l| {
        l.starts_with("worker-0 ") && l.split_whitespace().nth(2) == Some("Done")
    });
    nodes.kill().unwrap();
    events.kill().unwrap();
    let _ = nodes.wait();
    let _ = events.wait();
    let count = |name: &str| seen.iter().filter(|l| l.starts_with(name)).count();
    assert_eq!(count("worker-1 "), 1, "{seen:?}");
    assert_eq!(count("infra-0 "), 1, "{seen:?}");
    assert_eq!(count("NAME"), 1, "{seen:?}");
}

#[test]
fn viewer_tokens_read_change_nothing_and_can_be_revoked() {
    let env = setup();
    env.login();
    let ex = examples();
    env.ok(&["apply", "-f", ex.to_str().unwrap()]);
    let out = env.hearth(&["viewer-token", "create", "--ttl", "3600"]);
    assert!(out.status.success(), "{out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token.starts_with("hearth-viewer-"), "{token}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let name = stderr
        .split_whitespace()
        .find(|w| w.starts_with("viewer-"))
        .expect("the token's name")
        .to_string();
    // Where to open it, on this server, and how a browser trusts it (issue 35).
    assert!(
        stderr.contains(&format!("{}/ui/", env.url.trim_end_matches('/')))
            && stderr.contains("pki/ca.crt"),
        "{stderr}"
    );
    let ca = env.state("pki/ca.crt");
    let as_viewer = |args: &[&str]| {
        let mut all = vec!["--server", &env.url, "--ca", ca.to_str().unwrap()];
        all.extend(["--token", &token]);
        let mut argv: Vec<&str> = args.to_vec();
        argv.extend(all);
        exit_code(&env, &argv)
    };
    let (code, out, err) = as_viewer(&["get", "mcp"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("worker"), "{out}");
    let (code, _, err) = as_viewer(&["pause", "mcp", "worker"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("viewer"), "{err}");
    env.ok(&["viewer-token", "delete", &name]);
    let (code, _, err) = as_viewer(&["get", "mcp"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("unknown token"), "{err}");
    // What to do, whichever token was meant (issue 35).
    for hint in [
        "<state-dir>/admin.token",
        "hearth bootstrap-token POOL",
        "hearth viewer-token create",
    ] {
        assert!(err.contains(hint), "{hint}: {err}");
    }
}

/// Issue 35: a wrong CA read "cannot reach … UnknownIssuer" and a forgotten port "Connection
/// refused", with nothing to do. Now the message says: pass the server's CA, or add :22623.
#[test]
fn a_wrong_ca_and_a_missing_port_say_what_to_do() {
    let env = setup();
    let token = env.token();
    // `get nodes` against `server`, trusting `ca`: its exit code and standard error.
    let get_nodes = |server: &str, ca: &std::path::Path| {
        let (code, _, err) = exit_code(
            &env,
            &[
                "get",
                "nodes",
                "--server",
                server,
                "--ca",
                ca.to_str().unwrap(),
                "--token",
                &token,
            ],
        );
        (code, err)
    };
    // A CA that did not sign this server's certificate: another server's.
    let other = setup();
    let (code, err) = get_nodes(&env.url, &other.state("pki/ca.crt"));
    assert_ne!(code, Some(0));
    // Another hearth fleet's CA has the same name: rustls says BadSignature (UnknownIssuer for
    // a CA of another name); both are "invalid peer certificate".
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(err.contains("pass --ca with the server's CA"), "{err}");
    // No port: 443, where nothing listens here.
    let (code, err) = get_nodes("https://127.0.0.1", &env.state("pki/ca.crt"));
    assert_ne!(code, Some(0));
    assert!(
        err.contains("hearth-server listens on 22623: https://127.0.0.1:22623"),
        "{err}"
    );
}
