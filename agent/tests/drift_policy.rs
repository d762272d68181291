//! Drift and the result of an apply, on a real host (`hearth-agent apply --once-from` in a booted
//! systemd container): a host whose managed file was changed by hand is never reported "Done",
//! and a hand edit left in place under `report` or `ignore` does not fail the next, unrelated
//! config.

use crate::common;

use common::*;

const POLICY: &str = "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: None}]\n";

/// A config with files under /etc/demo (no reboot needed: the policy above).
fn config(name: &str, files: &[(&str, &str)]) -> String {
    let mut spec = String::from(
        "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n",
    );
    for (path, content) in files {
        spec.push_str(&format!(
            "      - path: {path}\n        contents:\n          source: data:,{content}%0A\n"
        ));
    }
    mc(name, &spec)
}

fn apply(
    host: &hearth_vm_tests::SystemdHost,
    file: &str,
    extra: &[&str],
) -> hearth_vm_tests::ExecOutput {
    let mut args = vec![
        "apply",
        "--once-from",
        file,
        "--policy",
        "/etc/hearth/policy.yaml",
    ];
    args.extend_from_slice(extra);
    let out = agent(host, &args);
    eprintln!("{out}");
    out
}

#[test]
fn a_drifted_host_is_not_reported_done() {
    let host = host_with_agent();
    put(&host, "/etc/hearth/policy.yaml", POLICY);
    put(
        &host,
        "/etc/hearth/a.yaml",
        &config(
            "demo-a",
            &[("/etc/demo/a.conf", "a"), ("/etc/demo/b.conf", "b")],
        ),
    );
    let out = apply(&host, "/etc/hearth/a.yaml", &[]);
    assert_eq!(out.status.code(), Some(0), "{out}");
    assert!(out.stdout.contains("Done"), "{out}");

    // A hand edit: the host no longer is in the config.
    put(&host, "/etc/demo/a.conf", "edited by hand\n");
    let out = apply(&host, "/etc/hearth/a.yaml", &[]);
    assert_eq!(out.status.code(), Some(4), "not in the config: {out}");
    assert!(!out.stdout.contains("Done"), "{out}");
    assert!(out.stderr.contains("/etc/demo/a.conf"), "{out}");
    assert!(!out.stderr.contains("/etc/demo/b.conf"), "{out}");
    let st = status(&host);
    assert!(
        st["drift"].to_string().contains("/etc/demo/a.conf"),
        "{st:#}"
    );
    assert!(
        st["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("/etc/demo/a.conf"),
        "{st:#}"
    );
    // report leaves the edit in place.
    assert_eq!(get(&host, "/etc/demo/a.conf").unwrap(), "edited by hand\n");

    // Exempt under ignore: the host is in the config as far as it is asked to be.
    let out = apply(
        &host,
        "/etc/hearth/a.yaml",
        &["--drift", "/etc/demo/a.conf=ignore"],
    );
    assert_eq!(out.status.code(), Some(0), "{out}");
    assert!(status(&host)["drift"]
        .as_array()
        .is_none_or(|d| d.is_empty()));

    // Put back under revert.
    let out = apply(
        &host,
        "/etc/hearth/a.yaml",
        &["--drift", "/etc/demo=revert"],
    );
    assert_eq!(out.status.code(), Some(0), "{out}");
    assert_eq!(get(&host, "/etc/demo/a.conf").unwrap(), "a\n");
    let st = status(&host);
    assert_eq!(st["state"], "Done", "{st:#}");
    assert!(st["reason"].is_null(), "{st:#}");
}

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    hearth_vm_tests::wait_for(what, std::time::Duration::from_secs(60), f);
}

/// The daemon, as an admin runs it, with `ignore` for one path and `report` for the rest.
#[test]
fn drift_left_in_place_does_not_fail_unrelated_configs() {
    let host = host_with_agent();
    put(&host, "/etc/hearth/policy.yaml", POLICY);
    install_service(
        &host,
        Some("[Service]\nExecStart=\nExecStart=/usr/bin/hearth-agent run --watch /etc/hearth/desired --interval 1 --policy /etc/hearth/policy.yaml --drift /etc/demo/ign.conf=ignore\n"),
    );
    let v1 = [("/etc/demo/ign.conf", "ign"), ("/etc/demo/rep.conf", "rep")];
    let mut v2 = v1.to_vec();
    v2.push(("/etc/demo/new.conf", "new"));
    let mut v3 = v2.clone();
    v3.push(("/etc/demo/newer.conf", "newer"));
    let settled = |name: &str| {
        let st = status(&host);
        st["state"] != "Working" && st["desired"] == name
    };
    put(
        &host,
        "/etc/hearth/desired/config.yaml",
        &config("demo-v1", &v1),
    );
    host.exec_ok(&["systemctl", "start", "hearth-agent.service"])
        .unwrap();
    wait_for("demo-v1", || settled("demo-v1"));
    assert_eq!(status(&host)["state"], "Done");

    // ignore: the hand-edited path is exempt; the unrelated config applies.
    host.exec_ok(&["sh", "-c", "echo mine > /etc/demo/ign.conf"])
        .unwrap();
    put(
        &host,
        "/etc/hearth/desired/config.yaml",
        &config("demo-v2", &v2),
    );
    wait_for("demo-v2", || settled("demo-v2"));
    let st = status(&host);
    assert_eq!(st["state"], "Done", "{st:#}");
    assert_eq!(st["current"], "demo-v2", "{st:#}");
    assert_eq!(get(&host, "/etc/demo/new.conf").unwrap(), "new\n");
    assert_eq!(get(&host, "/etc/demo/ign.conf").unwrap(), "mine\n");
    assert!(!st["drift"].to_string().contains("ign.conf"), "{st:#}");

    // report: the edit is reported and stays; the unrelated config is applied all the same
    // (not undone as "undo was incomplete").
    host.exec_ok(&["sh", "-c", "echo hand edit > /etc/demo/rep.conf"])
        .unwrap();
    wait_for("the drift reported", || {
        status(&host)["drift"]
            .to_string()
            .contains("/etc/demo/rep.conf")
    });
    put(
        &host,
        "/etc/hearth/desired/config.yaml",
        &config("demo-v3", &v3),
    );
    wait_for("demo-v3", || settled("demo-v3"));
    let st = status(&host);
    assert_eq!(st["state"], "Done", "{st:#}");
    assert_eq!(st["current"], "demo-v3", "{st:#}");
    let drift = st["drift"].to_string();
    assert!(drift.contains("/etc/demo/rep.conf"), "{st:#}");
    assert!(!drift.contains("/etc/demo/ign.conf"), "{st:#}");
    assert!(
        st["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("/etc/demo/rep.conf"),
        "{st:#}"
    );
    assert_eq!(get(&host, "/etc/demo/newer.conf").unwrap(), "newer\n");
    assert_eq!(get(&host, "/etc/demo/rep.conf").unwrap(), "hand edit\n");
}
