//! What the agent owns on a node, which no config may write: its state, runtime and helper
//! directories, its binaries and its unit. A config that wrote there would overwrite the agent's
//! journal or credential, or replace or stop the agent itself: the node would then be refused by
//! the server, or keep reporting a state that is no longer true. Validation refuses such paths
//! and units naming the field (`validate.rs`), so `hearth validate`, the server's apply, render
//! and the agent's own reading of a config all refuse them before anything is written.
//!
//! Also the agent's own files in `/etc/hearth`: `agent.env` (the server's addresses, the node's
//! name and bootstrap token, written at first boot), `ca.crt` (the fleet CA the agent trusts) and
//! `desired/` (the configs the agent follows before it has a server).
//!
//! What a config may still do: give the agent's unit drop-ins (`systemd.units[]` named
//! `hearth-agent.service` with `dropins` only), e.g. `Environment=HTTPS_PROXY=…` for a proxy,
//! and write `/etc/hearth/os.json` (the OS layer's settings, the same for a pool). The agent itself
//! is upgraded with the OS image, its package, or `--serve-agent` at first boot, not by a config.

/// The agent's state: journal, credential, server list, stored configs, originals, lock.
pub const STATE_DIR: &str = "/var/lib/hearth";
/// The agent's runtime files: its daemon lock, the reboot marker.
pub const RUNTIME_DIR: &str = "/run/hearth";
/// Where packages install `hearth-ostree-helper`.
pub const LIBEXEC_DIR: &str = "/usr/libexec/hearth";
/// The agent's unit.
pub const AGENT_UNIT: &str = "hearth-agent.service";

/// The configs `hearth-agent run` follows from files (before it has a server).
pub const DESIRED_DIR: &str = "/etc/hearth/desired";

/// The node's kubeconfig in Kubernetes mode.
pub const KUBE_DIR: &str = "/etc/hearth/kube";

/// Directories the agent owns whole.
const DIRS: [&str; 5] = [STATE_DIR, RUNTIME_DIR, LIBEXEC_DIR, DESIRED_DIR, KUBE_DIR];
/// The agent's own files in `/etc/hearth`, written at first boot (`hearth_api::firstboot`
/// names the same paths for the server that writes them).
const ETC_FILES: [&str; 3] = [
    "/etc/hearth/agent.env",
    "/etc/hearth/ca.crt",
    "/etc/hearth/firstboot-config",
];
/// The agent's binaries where packages (`/usr/bin`) and `--serve-agent` (`/usr/local/bin`,
/// which is `/var/usrlocal/bin` on Fedora CoreOS) put them; the helper beside the agent is the
/// one the agent runs first.
const BINARIES: [&str; 6] = [
    "/usr/bin/hearth-agent",
    "/usr/bin/hearth-ostree-helper",
    "/usr/local/bin/hearth-agent",
    "/usr/local/bin/hearth-ostree-helper",
    "/var/usrlocal/bin/hearth-agent",
    "/var/usrlocal/bin/hearth-ostree-helper",
];
/// Where systemd reads system unit files from, each of which may hold the agent's unit.
const UNIT_DIRS: [&str; 6] = [
    "/etc/systemd/system.control",
    "/run/systemd/system",
    "/etc/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// Whether `path` is `root` or below it (on a `/` boundary).
fn under(path: &str, root: &str) -> bool {
    path == root || path.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
}

/// What is wrong with a config writing `path` (a file, directory or link), if it is the
/// agent's own.
pub fn check_path(path: &str) -> Option<String> {
    if let Some(dir) = DIRS.iter().find(|d| under(path, d)) {
        return Some(format!(
            "{path} is in {dir}, which belongs to hearth-agent (its state, runtime files, helper \
             or the configs it follows): a config may not write there; set the agent's \
             environment with a drop-in of {AGENT_UNIT} instead"
        ));
    }
    if ETC_FILES.contains(&path) {
        return Some(format!(
            "{path} belongs to hearth-agent (written at first boot: the server's addresses, the \
             node's name and token, the fleet CA): a config may not replace it; set the agent's \
             environment (a proxy) with a drop-in of {AGENT_UNIT} instead"
        ));
    }
    if BINARIES.contains(&path) {
        return Some(format!(
            "{path} is hearth-agent's own binary: a config may not replace it; upgrade the agent \
             with the OS image, its package or the server's --serve-agent"
        ));
    }
    if UNIT_DIRS
        .iter()
        .any(|d| path.strip_prefix(d).and_then(|r| r.strip_prefix('/')) == Some(AGENT_UNIT))
    {
        return Some(format!(
            "{path} is hearth-agent's own unit: a config may not replace it; give it a drop-in \
             (systemd.units[] named {AGENT_UNIT} with dropins only)"
        ));
    }
    None
}

/// What is wrong with a link at `link` to `target`, if the target is one of the agent's own
/// places: a file written through the link later would land there. The target is resolved as
/// written (relative to the link's directory, `.` and `..` taken lexically); a link through
/// another link is not followed.
pub fn check_link_target(link: &str, target: &str) -> Option<String> {
    let base = if target.starts_with('/') {
        ""
    } else {
        link.rsplit_once('/').map_or("", |(dir, _)| dir)
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in base.split('/').chain(target.split('/')) {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let resolved = format!("/{}", parts.join("/"));
    check_path(&resolved).map(|why| format!("the link leads to {resolved}: {why}"))
}

/// What is wrong with a config's `systemd.units[]` entry `name` setting `field` (`contents`,
/// `mask` or `enabled`), if the unit is the agent's own.
pub fn check_unit(name: &str, field: &str) -> Option<String> {
    (name == AGENT_UNIT).then(|| {
        format!(
            "{AGENT_UNIT} is hearth-agent's own unit: a config may not set its {field} (the agent \
             would replace, stop or disable itself); give it drop-ins (dropins) only"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_directories_binaries_and_unit_are_refused() {
        for p in [
            "/var/lib/hearth",
            "/var/lib/hearth/journal.json",
            "/var/lib/hearth/node-token",
            "/var/lib/hearth/server.json",
            "/var/lib/hearth/agent.lock",
            "/var/lib/hearth/configs/rendered-worker-1.json",
            "/run/hearth/daemon.lock",
            "/usr/libexec/hearth/hearth-ostree-helper",
            "/usr/bin/hearth-agent",
            "/usr/local/bin/hearth-agent",
            "/usr/local/bin/hearth-ostree-helper",
            "/etc/systemd/system/hearth-agent.service",
            "/usr/lib/systemd/system/hearth-agent.service",
            "/etc/systemd/system.control/hearth-agent.service",
            "/usr/bin/hearth-ostree-helper",
            "/var/usrlocal/bin/hearth-agent",
            "/etc/hearth/kube/kubeconfig",
        ] {
            assert!(check_path(p).is_some(), "{p}");
        }
        for (link, target) in [
            ("/etc/x", "../var/lib/hearth"),
            ("/etc/hearth-state", "/var/lib/hearth/"),
            ("/opt/a/b", "../../usr/bin/hearth-agent"),
        ] {
            let why = check_link_target(link, target).expect(link);
            assert!(why.contains("the link leads to /"), "{why}");
        }
        assert_eq!(check_link_target("/etc/x", "../var/lib/hearthx"), None);
        assert_eq!(
            check_link_target("/etc/localtime", "/usr/share/zoneinfo/UTC"),
            None
        );
        for p in [
            "/etc/hearth/agent.env",
            "/etc/hearth/ca.crt",
            "/etc/hearth/desired/worker.yaml",
        ] {
            assert!(check_path(p).is_some(), "{p}");
        }
        assert!(check_path("/var/lib/hearth/x")
            .unwrap()
            .contains("a drop-in of hearth-agent.service"));
    }

    #[test]
    fn neighbours_the_os_settings_and_drop_ins_are_allowed() {
        for p in [
            "/var/lib/hearthx",
            "/var/lib/hearth-server/db",
            "/run/hearth-force",
            "/etc/hearth/os.json",
            "/etc/hearth/desired-not",
            "/etc/systemd/system/hearth-agent.service.d/10-proxy.conf",
            "/usr/bin/hearth-agent-tool",
            "/etc/systemd/system/other.service",
        ] {
            assert_eq!(check_path(p), None, "{p}");
        }
        assert_eq!(check_unit("other.service", "contents"), None);
        assert!(check_unit(AGENT_UNIT, "mask").unwrap().contains("mask"));
    }
}
