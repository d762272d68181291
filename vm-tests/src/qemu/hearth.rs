//! hearth in the guest: this workspace's `hearth-agent` and `hearth-ostree-helper` (through the
//! share, stripped of debug info), the units from `units/` pointing at them, and
//! `/etc/hearth/os.json`. The image stays the same when hearth changes.

use std::fs;

use anyhow::{Context, Result};

use super::guest::SHARE_INSIDE;
use super::vm::Vm;
use super::workspace::workspace_binary;

/// Where the agent lives in the guest: in `/var`, which every deployment shares (a pivot must
/// not lose it, and it must start again after each reboot).
pub const GUEST_AGENT: &str = "/var/lib/hearth-test-bin/hearth-agent";

/// The helper process that runs libostree for the agent, beside it (where the agent looks).
pub const GUEST_HELPER: &str = "/var/lib/hearth-test-bin/hearth-ostree-helper";

/// The units installed from `units/` (with `/usr/bin/hearth-agent` replaced by
/// [`GUEST_AGENT`]).
const UNITS: [(&str, &str); 3] = [
    (
        "hearth-agent.service",
        include_str!("../../../units/hearth-agent.service"),
    ),
    (
        "hearth-boot-entries.service",
        include_str!("../../../units/hearth-boot-entries.service"),
    ),
    (
        "hearth-boot-complete.service",
        include_str!("../../../units/hearth-boot-complete.service"),
    ),
];

impl Vm {
    /// Installs hearth in the guest: the agent and its helper in `/var`, `os_json` as
    /// `/etc/hearth/os.json`, and the units: `hearth-agent.service` (running
    /// `run --interval 1`, watching `/etc/hearth/desired`; installed, not started),
    /// `hearth-boot-entries.service` (enabled and started: ostree's entries are on the ESP
    /// from now on, as systemd-boot needs) and `hearth-boot-complete.service` (enabled).
    pub fn install_hearth(&mut self, os_json: &str) -> Result<()> {
        let share = self.share_dir().to_path_buf();
        fs::create_dir_all(share.join("bin"))?;
        for name in ["hearth-agent", "hearth-ostree-helper"] {
            let binary = workspace_binary(name, name)?;
            // A debug build is mostly debug info (~170 MB): the guest gets it stripped
            // (binutils' `strip`, present wherever Rust links), much faster through 9p under
            // TCG.
            let stripped = std::process::Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(share.join("bin").join(name))
                .arg(&binary)
                .status()
                .is_ok_and(|s| s.success());
            if !stripped {
                fs::copy(&binary, share.join("bin").join(name))
                    .with_context(|| format!("copying {}", binary.display()))?;
            }
        }
        fs::create_dir_all(share.join("units"))?;
        for (name, text) in UNITS {
            fs::write(
                share.join("units").join(name),
                text.replace("/usr/bin/hearth-agent", GUEST_AGENT),
            )?;
        }
        fs::write(share.join("os.json"), os_json)?;
        self.exec_ok(&format!(
            "set -e
             install -D -m 0755 {SHARE_INSIDE}/bin/hearth-agent {GUEST_AGENT}
             install -D -m 0755 {SHARE_INSIDE}/bin/hearth-ostree-helper {GUEST_HELPER}
             install -D -m 0644 {SHARE_INSIDE}/os.json /etc/hearth/os.json
             install -m 0644 {SHARE_INSIDE}/units/*.service /etc/systemd/system/
             mkdir -p /etc/systemd/system/hearth-agent.service.d /etc/hearth/desired
             printf '[Service]\\nExecStart=\\nExecStart={GUEST_AGENT} run --interval 1\\nRestartSec=1s\\n' \\
                 >/etc/systemd/system/hearth-agent.service.d/10-test.conf
             systemctl daemon-reload
             systemctl enable hearth-boot-complete.service
             systemctl enable --now hearth-boot-entries.service"
        ))?;
        Ok(())
    }
}
