//! The `hearth` binary against a real hearth-server (in-process on 127.0.0.1:0, real TLS with
//! the server's generated CA): login, apply, get, describe, label, pause/resume, delete,
//! bootstrap-token, and the exit codes.

use crate::common;

use common::{columns, examples, setup, Env, JsonValue};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

#[test]
fn login_apply_get_describe_label_pause() {
    let env = setup();
    // Not configured yet: a usage error.
    let o = env.hearth(&["get", "mcp"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("hearth login"));

    env.login();
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(env.config()).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // apply
    let out = env.ok(&["apply", "-f", examples().to_str().unwrap()]);
    assert!(out.contains("machineconfigpool/infra created"), "{out}");
    assert!(
        out.contains("machineconfig/80-worker-1-static-ip created"),
        "{out}"
    );
    assert!(out.contains("node/worker-0 created"), "{out}");
    let out = env.ok(&["apply", "-f", examples().to_str().unwrap()]);
    assert!(out.lines().all(|l| l.ends_with(" unchanged")), "{out}");

    // get mcp: the oc columns
    let out = env.ok(&["get", "mcp"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "CONFIG",
            "UPDATED",
            "UPDATING",
            "DEGRADED",
            "MACHINECOUNT",
            "READYMACHINECOUNT",
            "UPDATEDMACHINECOUNT",
            "DEGRADEDMACHINECOUNT",
            "AGE"
        ]
    );
    let worker = columns(&out, "worker");
    assert_eq!(
        &worker[2..9],
        ["False", "True", "False", "2", "0", "0", "0"],
        "{out}"
    );
    // get mc: user configs and rendered ones
    let out = env.ok(&["get", "mc"]);
    let row = columns(&out, "80-worker-1-static-ip");
    assert_eq!(row[1], "3.4.0", "{out}");
    let rendered = out
        .lines()
        .find(|l| l.starts_with("rendered-worker-"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(rendered.contains("hearth-server"), "{rendered}");
    // -o json / yaml / name
    let v: Value = serde_json::from_str(&env.ok(&["get", "mcp", "worker", "-o", "json"])).unwrap();
    assert_eq!(v["kind"], "MachineConfigPool");
    let y = env.ok(&["get", "nodes", "-o", "yaml"]);
    assert!(
        y.contains("kind: List") && y.contains("name: worker-0"),
        "{y}"
    );
    let names = env.ok(&["get", "nodes", "-o", "name"]);
    assert!(names.contains("node/infra-0"), "{names}");

    // A node reports Degraded: the pool and describe show why.
    let cred = env.enroll("worker-0");
    let d = env.desired(&cred);
    env.report(
        &cred,
        json!({
            "state": "Degraded",
            "reason": "step 3 of 7 (write unit chronyd.service): Permission denied (os error 13)",
            "current": null,
            "desired": d,
            "progress": {"phase": "rollingBack", "step": 2, "total": 7, "failure": "Permission denied"},
            "history": [
                {"time": "2026-01-01T00:00:00Z", "state": "Working", "desired": d},
                {"time": "2026-01-01T00:00:05Z", "state": "Degraded", "desired": d, "reason": "step 3 of 7 (write unit chronyd.service): Permission denied (os error 13)"}
            ]
        }),
    );
    let out = env.ok(&["get", "mcp"]);
    let worker = columns(&out, "worker");
    assert_eq!(worker[4], "True", "DEGRADED\n{out}");
    assert_eq!(worker[8], "1", "DEGRADEDMACHINECOUNT\n{out}");
    let out = env.ok(&["describe", "node", "worker-0"]);
    assert!(out.contains("State:          Degraded"), "{out}");
    assert!(out.contains("write unit chronyd.service"), "{out}");
    // What to do next, named (issue 35: no failure named the next step).
    assert!(
        out.contains("Next step:") && out.contains("`hearth node force worker-0`"),
        "{out}"
    );
    assert!(out.contains("History:"), "{out}");
    assert!(out.contains(&format!("Desired config: {d}")), "{out}");
    assert!(out.contains("Events:") && out.contains("Enrolled"), "{out}");
    let out = env.ok(&["get", "nodes", "-o", "wide"]);
    let row = columns(&out, "worker-0");
    assert_eq!(row[2], "Degraded", "{out}");
    // Drift shows beside the state (issue 35: it showed only in `describe node`).
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    let drift = header
        .iter()
        .position(|c| *c == "DRIFT")
        .expect("a DRIFT column");
    assert_eq!(row[drift], "0", "{out}");
    let cred1 = env.enroll("worker-1");
    let d1 = env.desired(&cred1);
    env.report(
        &cred1,
        json!({
            "state": "Done", "reason": null, "current": d1, "desired": d1,
            "drift": ["/etc/chrony.conf: content changed", "/etc/motd: mode 644, expected 600"],
        }),
    );
    let out = env.ok(&["get", "nodes", "-o", "wide"]);
    assert_eq!(columns(&out, "worker-1")[drift], "2", "{out}");
    let out = env.ok(&["describe", "mcp", "worker"]);
    assert!(
        out.contains("NodeDegraded") && out.contains("1 degraded"),
        "{out}"
    );

    // label
    env.ok(&["label", "node", "worker-1", "rack=r1"]);
    let v: Value =
        serde_json::from_str(&env.ok(&["get", "node", "worker-1", "-o", "json"])).unwrap();
    assert_eq!(v["metadata"]["labels"]["rack"], "r1");
    let o = env.hearth(&["label", "node", "worker-1", "rack=r2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--overwrite"));
    env.ok(&["label", "node", "worker-1", "rack=r2", "--overwrite"]);
    env.ok(&["label", "node", "worker-1", "rack-"]);
    let v: Value =
        serde_json::from_str(&env.ok(&["get", "node", "worker-1", "-o", "json"])).unwrap();
    assert!(v["metadata"]["labels"].get("rack").is_none());

    // pause / resume
    assert!(env
        .ok(&["pause", "mcp", "worker"])
        .contains("machineconfigpool/worker paused"));
    let out = env.ok(&["get", "mcp", "-o", "wide"]);
    assert_eq!(columns(&out, "worker")[10], "True", "PAUSED\n{out}");
    // NOTE: the example fleet has no master node (issue 35).
    let master = out.lines().find(|l| l.starts_with("master ")).unwrap();
    assert!(master.trim_end().ends_with("selects no node"), "{out}");
    assert_eq!(columns(&out, "worker").last().unwrap(), "-", "{out}");
    let described = env.ok(&["describe", "mcp", "master"]);
    assert!(
        described.contains("Machines:") && described.contains("none: selects no node"),
        "{described}"
    );
    assert!(env.ok(&["resume", "mcp", "worker"]).contains("resumed"));

    // delete
    assert!(env
        .ok(&["delete", "mc", "50-examplecorp-chrony"])
        .contains("deleted"));
    let o = env.hearth(&["delete", "mc", "50-examplecorp-chrony"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));

    // bootstrap-token
    // The new pool's first token replaces nothing; the next one does, and says so (issue 35).
    let o = env.hearth(&["bootstrap-token", "infra", "--ttl", "600"]);
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        o.status.success() && t.trim().starts_with("hearth-bootstrap-"),
        "{t}{err}"
    );
    assert!(
        err.contains("the pool's first") && !err.contains("no longer works"),
        "{err}"
    );
    let o = env.hearth(&["bootstrap-token", "infra"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains("the previous one no longer works"), "{err}");

    // A pool with nodes is not deleted by mistake (issue 35): the refusal says what would
    // happen and how to go on; --force deletes it and says where its nodes went.
    let o = env.hearth(&["delete", "mcp", "infra"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("has 1 node(s); deleting it moves infra-0 to worker")
            && err.contains("--force"),
        "{err}"
    );
    let out = env.ok(&["delete", "mcp", "infra", "--force"]);
    assert!(
        out.contains("machineconfigpool/infra deleted; its 1 node(s) moved: infra-0 to worker"),
        "{out}"
    );
    drop(env.server);
}

#[test]
fn invalid_manifests_and_flags_and_env() {
    let env = setup();
    let ca = env.state("pki/ca.crt");
    let bad = env.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: bad\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: etc/relative\n        contents:\n          source: data:,x\n",
    )
    .unwrap();
    // Flags instead of a login file.
    let o = env.hearth(&[
        "apply",
        "-f",
        bad.to_str().unwrap(),
        "--server",
        &env.url,
        "--ca",
        ca.to_str().unwrap(),
        "--token",
        &env.token(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "{}:11: error: MachineConfig/bad: spec.config.storage.files[0].path",
            bad.display()
        )),
        "{err}"
    );
    // The environment works too, and nothing was stored.
    let o = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["get", "mc", "-o", "name"])
        .env("HEARTH_CONFIG", env.config())
        .env("HEARTH_SERVER", &env.url)
        .env("HEARTH_CA", &ca)
        .env("HEARTH_TOKEN", env.token())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("machineconfig/bad"));
    // A wrong token is a server error (exit 1), a wrong CA a TLS error (exit 1).
    let o = env.hearth(&[
        "get",
        "mcp",
        "--server",
        &env.url,
        "--ca",
        ca.to_str().unwrap(),
        "--token",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("401"));
    let other = tempfile::tempdir().unwrap();
    hearth_server::pki::init(
        &hearth_server::pki::Layout {
            dir: other.path().to_path_buf(),
        },
        &["localhost".into()],
    )
    .unwrap();
    let o = env.hearth(&[
        "get",
        "mcp",
        "--server",
        &env.url,
        "--ca",
        other.path().join("pki/ca.crt").to_str().unwrap(),
        "--token",
        &env.token(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
    assert!(
        err.contains("certificate") || err.contains("unknownissuer"),
        "{err}"
    );
    // Usage errors exit 2.
    let o = env.hearth(&["get", "things"]);
    assert_eq!(o.status.code(), Some(2));
    let _ = Path::new("");
}

#[test]
fn rollout_status_follows_a_rollout() {
    let (env, file, nodes) = two_workers_done();
    let out = env.ok(&["rollout", "status", "worker", "--watch", "--timeout", "10"]);
    assert!(
        out.contains("2/2 updated") && out.contains("every node runs"),
        "{out}"
    );

    std::fs::write(&file, worker_mc("two")).unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let out = env.ok(&["rollout", "status", "worker"]);
    assert!(
        out.contains("pool worker: 0 of 2 node(s) run rendered-worker-"),
        "{out}"
    );
    assert!(
        columns(&out, "w0")[2] == "in" && columns(&out, "w1")[2] == "waiting",
        "{out}"
    );

    // Follow it while the nodes update one after the other.
    let watcher = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["rollout", "status", "worker", "--watch", "--timeout", "30"])
        .env("HEARTH_CONFIG", env.config())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The watcher polls every second: leave each state up for longer than that.
    for n in &nodes {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let d = env.desired(n);
        env.report(n, json!({"state": "Done", "current": d, "desired": d}));
    }
    let o = watcher.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("1/2 updated") && out.contains("2/2 updated"),
        "{out}"
    );

    // A degraded node halts the rollout: --watch says so and exits 1.
    std::fs::write(&file, worker_mc("three")).unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let d = env.desired(&nodes[0]);
    env.report(
        &nodes[0],
        json!({"state": "Degraded", "current": null, "desired": d, "reason": "step 1 of 1 (write file /etc/a): EIO"}),
    );
    let o = env.hearth(&["rollout", "status", "worker", "--watch", "--timeout", "10"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("halted: node w0 is degraded: step 1 of 1 (write file /etc/a): EIO"),
        "{err}"
    );
}

#[test]
fn client_certificate_login_and_commands() {
    let env = setup();
    let layout = hearth_server::pki::Layout {
        dir: env.dir.path().join("state"),
    };
    let certs = env.dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let write = |name: &str, c: &hearth_server::pki::ClientCert| {
        let (crt, key) = (
            certs.join(format!("{name}.crt")),
            certs.join(format!("{name}.key")),
        );
        std::fs::write(&crt, &c.cert_pem).unwrap();
        std::fs::write(&key, &c.key_pem).unwrap();
        (crt, key)
    };
    let (crt, key) = write(
        "alice",
        &hearth_server::pki::issue_admin_cert(&layout, "alice", 1).unwrap(),
    );
    let ca = env.state("pki/ca.crt");
    let out = env.ok(&[
        "login",
        "--server",
        &env.url,
        "--ca",
        ca.to_str().unwrap(),
        "--client-cert",
        crt.to_str().unwrap(),
        "--client-key",
        key.to_str().unwrap(),
    ]);
    assert!(out.contains("Logged in"), "{out}");
    // The login file keeps the paths, no token.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(env.config()).unwrap()).unwrap();
    assert!(file.get("token").is_none(), "{file}");
    assert_eq!(file["clientCert"].as_str().unwrap(), crt.to_str().unwrap());
    let out = env.ok(&["apply", "-f", examples().to_str().unwrap()]);
    assert!(out.contains("machineconfigpool/infra created"), "{out}");
    let out = env.ok(&["get", "mcp", "-o", "name"]);
    assert!(out.contains("machineconfigpool/infra"), "{out}");

    // From the environment, without a login file.
    let other_home = env.dir.path().join("nohome/config.json");
    let o = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["get", "mcp", "-o", "name", "--server", &env.url, "--ca"])
        .arg(&ca)
        .env("HEARTH_CONFIG", &other_home)
        .env_remove("HEARTH_TOKEN")
        .env("HEARTH_CLIENT_CERT", &crt)
        .env("HEARTH_CLIENT_KEY", &key)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("machineconfigpool/worker"));

    // A certificate of another CA: refused, exit 1, nothing saved.
    let other = hearth_server::pki::Layout {
        dir: env.dir.path().join("other-state"),
    };
    hearth_server::pki::init(&other, &["localhost".to_string()]).unwrap();
    let (fcrt, fkey) = write(
        "mallory",
        &hearth_server::pki::issue_admin_cert(&other, "mallory", 1).unwrap(),
    );
    let before = std::fs::read(env.config()).unwrap();
    let o = env.hearth(&[
        "login",
        "--server",
        &env.url,
        "--ca",
        ca.to_str().unwrap(),
        "--client-cert",
        fcrt.to_str().unwrap(),
        "--client-key",
        fkey.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(env.config()).unwrap(), before);
    // A certificate without its key is a usage error.
    let o = env.hearth(&[
        "get",
        "mcp",
        "--server",
        &env.url,
        "--ca",
        ca.to_str().unwrap(),
        "--client-cert",
        crt.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs both"));
}

/// A node is not trusted: what it reports (reason, progress, drift, history, labels at
/// enrolment) reaches the admin's terminal through `get`, `describe` and `rollout status`.
/// None of it may carry a control character to the terminal: escape sequences that clear the
/// screen or retitle the window, carriage returns and newlines that forge lines, C1 controls
/// and bidirectional overrides all come out as visible escapes.
#[test]
fn node_strings_never_reach_the_terminal_raw() {
    let env = setup();
    env.login();
    env.apply_worker_mc();
    let hostile =
        "boom\x1b[2J\x1b]0;pwned\x07\r\nworker-9   Done   True\u{9b}31m\u{202e}txt.exe\u{7f}";
    let cred = env.enroll("w0");
    let d = env.desired(&cred);
    env.report(
        &cred,
        json!({
            "state": "Degraded",
            "current": null,
            "desired": d,
            "reason": hostile,
            "progress": {"phase": hostile, "step": 0, "total": 1, "failure": hostile},
            "drift": [hostile],
            "history": [{"time": "2026-01-01T00:00:00Z", "state": "Degraded", "reason": hostile, "desired": hostile}],
        }),
    );
    let unsafe_char = |text: &str| {
        text.chars()
            .find(|&c| hearth_cli::term::is_unsafe(c) && c != '\n')
    };
    let runs: Vec<Vec<&str>> = vec![
        vec!["get", "nodes"],
        vec!["get", "nodes", "-o", "wide"],
        vec!["get", "nodes", "-o", "json"],
        vec!["get", "nodes", "-o", "yaml"],
        vec!["get", "nodes", "-o", "name"],
        vec!["describe", "node", "w0"],
        vec!["rollout", "status", "worker"],
        vec!["rollout", "status", "worker", "--watch", "--timeout", "5"],
    ];
    for args in runs {
        let o = env.hearth(&args);
        let out = String::from_utf8(o.stdout).unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(unsafe_char(&out), None, "hearth {args:?} stdout:\n{out}");
        assert_eq!(unsafe_char(&err), None, "hearth {args:?} stderr:\n{err}");
        // No forged line: the text after the newline never starts a line of its own.
        for line in out.lines().chain(err.lines()) {
            assert!(
                !line.trim_start().starts_with("worker-9"),
                "hearth {args:?} printed a forged line: {line}\n{out}{err}"
            );
        }
        if args.contains(&"describe") || args.contains(&"wide") {
            assert!(
                out.contains(r"boom\x1b[2J\x1b]0;pwned\x07\r\nworker-9"),
                "hearth {args:?}: the reason is shown, escaped:\n{out}"
            );
        }
    }
    // -o json still carries the node's exact string (escaped as JSON, same value).
    let json_out = env.ok(&["get", "nodes", "w0", "-o", "json"]);
    let v: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(v["status"]["reason"], hostile);
}

/// A reinstalled machine lost its credential: its bootstrap token alone cannot take the
/// enrolled name over, `hearth node reset-credential` (an admin) lets it enroll again.
#[test]
fn node_reset_credential_lets_a_reinstalled_node_enroll_again() {
    let env = setup();
    env.login();
    env.apply_worker_mc();
    let old = env.enroll("w0");
    let token = std::fs::read_to_string(env.state("tokens/worker.token")).unwrap();
    let enroll = || {
        env.http()
            .post(format!("{}/api/v1/enroll", env.url))
            .header("content-type", "application/json")
            .body(json!({"node": "w0", "bootstrapToken": token.trim()}).to_string())
            .send()
            .unwrap()
    };
    assert_eq!(enroll().status().as_u16(), 409, "the name is taken");
    let out = env.ok(&["node", "reset-credential", "w0"]);
    assert!(out.contains("node/w0 credential revoked"), "{out}");
    let r = env
        .http()
        .get(format!("{}/api/v1/agent/desired", env.url))
        .bearer_auth(&old)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "the old credential is revoked");
    let again = enroll();
    assert_eq!(again.status().as_u16(), 200);
    let cred = again.json_value()["credential"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(env.desired(&cred).starts_with("rendered-worker-"));
    let o = env.hearth(&["node", "reset-credential", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("HTTP 404"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `hearth node pin|unpin|exclude|include` against a real server: what changed and where the
/// node stands in one line, the hold in `describe node` with who set it, and a pin to a config
/// that does not exist refused with the server's reason.
#[test]
fn node_pin_and_exclude_show_in_describe() {
    let env = setup();
    env.login();
    env.apply_worker_mc();
    let cred = env.enroll("w0");
    let config = env.desired(&cred);
    let out = env.ok(&["node", "pin", "w0", &config]);
    assert_eq!(
        out.trim(),
        format!("node/w0 pinned: pinned to {config}, in rollouts")
    );
    let out = env.ok(&["node", "exclude", "w0"]);
    assert_eq!(
        out.trim(),
        format!("node/w0 excluded: pinned to {config}, excluded from rollouts")
    );
    let out = env.ok(&["describe", "node", "w0"]);
    assert!(
        out.lines().any(|l| l.starts_with("Pinned:")
            && l.contains(&config)
            && l.contains("by the admin token")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("Excluded:") && l.contains("by the admin token")),
        "{out}"
    );
    let out = env.ok(&["node", "unpin", "w0"]);
    assert_eq!(
        out.trim(),
        "node/w0 unpinned: follows its pool, excluded from rollouts"
    );
    let out = env.ok(&["node", "include", "w0"]);
    assert_eq!(
        out.trim(),
        "node/w0 included: follows its pool, in rollouts"
    );
    let out = env.ok(&["describe", "node", "w0"]);
    assert!(
        !out.contains("Pinned:") && !out.contains("Excluded:"),
        "{out}"
    );
    let o = env.hearth(&["node", "pin", "w0", "rendered-worker-nope"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 404") && err.contains("rendered-worker-nope"),
        "{err}"
    );
}

/// `hearth rollback mcp POOL` against a real server: the line names both rendered configs, and
/// `describe mcp` shows the rollback with who made it; only pools can be rolled back (exit 2).
#[test]
fn rollback_mcp_shows_in_describe() {
    let env = setup();
    env.login();
    let file = env.dir.path().join("mc.yaml");
    std::fs::write(&file, worker_mc("one")).unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let cred = env.enroll("w0");
    let first = env.desired(&cred);
    std::fs::write(&file, worker_mc("two")).unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let out = env.ok(&["rollback", "mcp", "worker"]);
    assert!(
        out.starts_with(&format!(
            "machineconfigpool/worker rolled back to {first} (from rendered-worker-"
        )),
        "{out}"
    );
    let out = env.ok(&["describe", "mcp", "worker"]);
    assert!(
        out.lines().any(|l| l.starts_with("Rolled back:")
            && l.contains(&first)
            && l.contains("by the admin token")),
        "{out}"
    );
    let o = env.hearth(&["rollback", "node", "w0"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `hearth node force` and `hearth node restore-file` against a real server: the lines name
/// the request's id (the same one while pending), an unmanaged path is refused naming it, and
/// `describe node` lists the requests with the node's outcome escaped.
#[test]
fn node_force_and_restore_file_show_in_describe() {
    let env = setup();
    env.login();
    let file = env.dir.path().join("mc.yaml");
    std::fs::write(&file, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-a\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: /etc/a.conf\n        contents:\n          source: data:,a\n").unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let cred = env.enroll("w0");
    let config = env.desired(&cred);
    env.report(
        &cred,
        json!({"state": "Done", "current": config, "desired": config}),
    );
    let out = env.ok(&["node", "force", "w0"]);
    assert_eq!(
        out.trim(),
        "node/w0 re-apply in full (force) requested (request 1): the node acts on it once; `hearth describe node w0` shows its outcome"
    );
    let out = env.ok(&["node", "force", "w0"]);
    assert!(out.contains("already requested (request 1)"), "{out}");
    let out = env.ok(&["node", "restore-file", "w0", "/etc/a.conf"]);
    assert!(
        out.starts_with("node/w0 restore of /etc/a.conf requested (request 2)"),
        "{out}"
    );
    let o = env.hearth(&["node", "restore-file", "w0", "/etc/shadow"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 400") && err.contains("/etc/shadow") && err.contains(&config),
        "{err}"
    );
    // The node reports the force done, with a message that tries to reach the terminal.
    env.report(
        &cred,
        json!({"state": "Done", "current": config, "desired": config, "requestsDone": 1,
               "requestResults": [{"id": 1, "action": "force", "ok": true,
                                   "message": "re-applied\u{1b}[2J in full"}]}),
    );
    let out = env.ok(&["describe", "node", "w0"]);
    assert!(out.contains("Requests:"), "{out}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
    assert!(out.contains("re-applied\\x1b[2J in full"), "{out}");
    let row = |id: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        row("1").contains("force") && row("1").contains("Done"),
        "{out}"
    );
    assert!(
        row("2").contains("restoreFile /etc/a.conf") && row("2").contains("Pending"),
        "{out}"
    );
    assert!(
        out.contains("ForceRequested") && out.contains("ForceDone"),
        "{out}"
    );
}

/// A misspelled field (issue 35): refused by `hearth apply` naming the field it misspells,
/// nothing changed; `--validate=warn` applies it with the warning.
#[test]
fn apply_refuses_a_misspelled_field_unless_asked_to_warn() {
    let env = setup();
    env.login();
    let file = env.dir.path().join("typo.yaml");
    std::fs::write(
        &file,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-typo\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      file:\n      - path: /etc/a\n",
    )
    .unwrap();
    let o = env.hearth(&["apply", "-f", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "typo.yaml:13: error: MachineConfig/10-typo: spec.config.storage.file: unknown field"
        ) && stderr.contains("did you mean `files`?")
            && stderr.contains("--validate=warn"),
        "{stderr}"
    );
    let names = env.ok(&["get", "mc", "-o", "name"]);
    assert!(!names.contains("10-typo"), "{names}");
    let o = env.hearth(&["apply", "--validate=warn", "-f", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("did you mean `files`?"),
        "{stderr}"
    );
    let names = env.ok(&["get", "mc", "-o", "name"]);
    assert!(names.contains("machineconfig/10-typo"), "{names}");
}

/// An excluded node (issue 35): `rollout status` names it, and `--watch` ends once every other
/// node runs the target instead of waiting forever at 1/2.
#[test]
fn rollout_status_names_excluded_nodes_and_a_watch_ends_without_them() {
    let (env, file, nodes) = two_workers_done();
    env.ok(&["node", "exclude", "w1"]);
    std::fs::write(&file, worker_mc("two")).unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let d = env.desired(&nodes[0]);
    env.report(
        &nodes[0],
        json!({"state": "Done", "current": d, "desired": d}),
    );
    let o = env.hearth(&["rollout", "status", "worker"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("excluded from rollouts, not updated: w1")
            && out.contains("hearth node include NODE"),
        "{out}"
    );
    assert_eq!(columns(&out, "w1")[2], "excluded", "{out}");
    let wide = env.ok(&["get", "nodes", "-o", "wide"]);
    let row = wide
        .lines()
        .find(|l| l.starts_with("w1"))
        .unwrap_or_default();
    assert!(row.ends_with("excluded from rollouts"), "{wide}");
    let o = env.hearth(&["rollout", "status", "worker", "--watch", "--timeout", "20"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("1/2 updated")
            && out.contains("every node in the rollout runs rendered-worker-")
            && out.contains("excluded from rollouts, not updated: w1"),
        "{out}"
    );
}

/// The worker MachineConfig `10-a` writing `content` to `/etc/a`.
fn worker_mc(content: &str) -> String {
    format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-a\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: /etc/a\n        contents:\n          source: data:,{content}\n")
}

/// A logged-in server with `10-a` (`one`) applied from `mc.yaml` and two workers Done in it:
/// the server, that file, and the workers' credentials.
fn two_workers_done() -> (Env, std::path::PathBuf, Vec<String>) {
    let env = setup();
    env.login();
    let file = env.dir.path().join("mc.yaml");
    std::fs::write(&file, worker_mc("one")).unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let nodes: Vec<String> = (0..2).map(|i| env.enroll(&format!("w{i}"))).collect();
    for n in &nodes {
        let d = env.desired(n);
        env.report(n, json!({"state": "Done", "current": d, "desired": d}));
    }
    (env, file, nodes)
}
