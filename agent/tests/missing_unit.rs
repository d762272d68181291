//! A plan that reloads or restarts a unit this host does not have, on a real host (the real
//! agent in a booted systemd container): never a silent "Done".
//!
//! - named by the admin's own node-disruption policy (a typo in `serviceName`): the change would
//!   not take effect, so the step fails: Degraded naming the unit and the policy, undone;
//! - named by the MCO's built-in policy (crio on a host without it): the host is in the config,
//!   the node is Done, and the skipped step is a warning in the reason and on stderr.

use crate::common;

use common::*;

fn file_config(name: &str, path: &str) -> String {
    mc(
        name,
        &format!("  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n      - path: {path}\n        contents:\n          source: data:,%7B%7D%0A\n"),
    )
}

#[test]
fn a_unit_named_by_the_admins_policy_that_does_not_exist_fails_the_step() {
    let host = host_with_agent();
    put(
        &host,
        "/etc/hearth/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/demo\n      actions: [{type: Reload, reload: {serviceName: demo-typo.service}}]\n",
    );
    put(
        &host,
        "/etc/hearth/c.yaml",
        &file_config("typo", "/etc/demo/app.json"),
    );
    let out = agent(
        &host,
        &[
            "apply",
            "--once-from",
            "/etc/hearth/c.yaml",
            "--policy",
            "/etc/hearth/policy.yaml",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(
        out.stderr.contains("reload demo-typo.service")
            && out.stderr.contains("does not exist on this host")
            && out.stderr.contains("policy"),
        "{out}"
    );
    let st = status(&host);
    assert_eq!(st["state"], "Degraded", "{st:#}");
    assert!(get(&host, "/etc/demo/app.json").is_none(), "undone");
}

#[test]
fn a_unit_named_by_the_built_in_policy_that_does_not_exist_is_a_visible_warning() {
    let host = host_with_agent();
    assert!(
        !host
            .exec(&["systemctl", "cat", "crio.service"])
            .unwrap()
            .status
            .success(),
        "the test host has no crio"
    );
    // The MCO's built-in policy: /etc/containers/policy.json → reload crio.service.
    put(
        &host,
        "/etc/hearth/c.yaml",
        &file_config("registries", "/etc/containers/policy.json"),
    );
    let out = agent(&host, &["apply", "--once-from", "/etc/hearth/c.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{out}");
    assert!(
        out.stderr
            .contains("warning: reload crio.service skipped: unit crio.service does not exist"),
        "{out}"
    );
    let st = status(&host);
    assert_eq!(st["state"], "Done", "{st:#}");
    assert!(
        st["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("reload crio.service skipped"),
        "{st:#}"
    );
    assert_eq!(get(&host, "/etc/containers/policy.json").unwrap(), "{}\n");
}
