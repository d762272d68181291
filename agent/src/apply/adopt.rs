//! Adopting what Ignition wrote: a node provisioned from hearth-server's `/config/<pool>` has
//! every file, unit and user of its rendered config already, written by Ignition before the
//! agent ever ran. Re-applying it would rewrite the same bytes and, under the default
//! disruption policy, reboot a machine that has just booted. The served config carries a stamp
//! ([`FIRSTBOOT_STAMP`], the rendered config's name); on its first sync, an agent with no
//! current config whose desired config is the stamped one verifies the host against it and, when
//! nothing differs, takes it as the current config for files, units and users. What Ignition
//! cannot do (kernel arguments, kernel type, OS image, extensions) is still planned from the
//! booted OS and applied, with a reboot when it needs one.

use super::agent::Agent;
use hearth_config::model::MachineConfigSpec;

/// Written by hearth-server into every first-boot config: the rendered config's name.
pub const FIRSTBOOT_STAMP: &str = hearth_api::firstboot::STAMP_PATH;

/// A longer stamp is not one hearth-server wrote (rendered names are short).
const MAX_STAMP_BYTES: usize = 512;

impl Agent {
    /// Whether the host is already `name` (with `spec`) as Ignition wrote it: the stamp names it
    /// and verification finds no difference. Logs why not when the stamp is there.
    pub(super) async fn adopt_first_boot(&self, name: &str, spec: &MachineConfigSpec) -> bool {
        let stamp = match self.root.read(FIRSTBOOT_STAMP) {
            Ok(Some(bytes)) if bytes.len() <= MAX_STAMP_BYTES => {
                String::from_utf8_lossy(&bytes).trim().to_string()
            }
            Ok(Some(_)) => {
                tracing::warn!(path = FIRSTBOOT_STAMP, "first-boot stamp too long: ignored");
                return false;
            }
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(path = FIRSTBOOT_STAMP, error = %e, "cannot read the first-boot stamp");
                return false;
            }
        };
        if stamp != name {
            tracing::info!(
                stamped = %stamp,
                desired = %name,
                "the config written at first boot is not the desired one any more: applying it in full"
            );
            return false;
        }
        let mismatches = self.verify(&spec.config).await;
        if let Some(first) = mismatches.first() {
            tracing::info!(
                config = %name,
                differences = mismatches.len(),
                first = %first,
                "the host differs from the config written at first boot: applying it in full"
            );
            return false;
        }
        tracing::info!(
            config = %name,
            "adopted the config Ignition wrote at first boot: files, units and users verified, none rewritten"
        );
        true
    }
}
