//! Changes on trial ("commit confirmed"): which applied changes must be confirmed by a round
//! trip to hearth-server before they are kept, and for how long the agent waits for it.
//!
//! A pool sets it with two annotations on its `MachineConfigPool`:
//!
//! * [`ANNOTATION`] (`hearth.io/trial`): `network` (the default: a change that touches one of
//!   the [`NETWORK_PATHS`] is on trial), `always` (every change is), `never`.
//! * [`SECONDS_ANNOTATION`] (`hearth.io/trial-seconds`): the deadline, [`MIN_SECONDS`] to
//!   [`MAX_SECONDS`], default [`DEFAULT_SECONDS`].
//!
//! Pure logic: the server reads the annotations ([`TrialPolicy::of`]) and sends the policy with
//! the desired config; the agent asks [`TrialPolicy::covers`] with the paths its plan wrote.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The annotation naming which changes are on trial.
pub const ANNOTATION: &str = "hearth.io/trial";
/// The annotation with the deadline in seconds.
pub const SECONDS_ANNOTATION: &str = "hearth.io/trial-seconds";
/// The default deadline: how long the agent waits for the server after applying.
pub const DEFAULT_SECONDS: u32 = 120;
/// The shortest deadline a pool may set (a TLS handshake and a report over a slow link).
pub const MIN_SECONDS: u32 = 10;
/// The longest deadline a pool may set (a node cut off stays cut off at most this long).
pub const MAX_SECONDS: u32 = 3600;

/// The paths whose change puts a config on trial under [`TrialMode::Network`]: a path equal to
/// one of these or under it (a `/` boundary), and for `/etc/nftables` any path that starts with
/// it (`/etc/nftables.conf`, `/etc/nftables.d/…`).
pub const NETWORK_PATHS: &[&str] = &[
    "/etc/NetworkManager",
    "/etc/systemd/network",
    "/etc/sysconfig/network-scripts",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nftables",
    "/etc/firewalld",
    "/etc/netplan",
];

/// Which changes are on trial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TrialMode {
    /// A change that touches one of the [`NETWORK_PATHS`].
    #[default]
    Network,
    /// Every change.
    Always,
    /// None.
    Never,
}

/// A pool's trial policy, as sent to its agents with the desired config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrialPolicy {
    /// Which changes.
    pub mode: TrialMode,
    /// The deadline after applying, in seconds.
    pub seconds: u32,
}

impl Default for TrialPolicy {
    fn default() -> Self {
        TrialPolicy {
            mode: TrialMode::Network,
            seconds: DEFAULT_SECONDS,
        }
    }
}

/// Why a pool's trial annotations cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrialError {
    /// An unknown mode.
    #[error("metadata.annotations[{ANNOTATION}] is {0:?}: use \"network\" (the default), \"always\" or \"never\"")]
    Mode(String),
    /// A deadline that is not a number in bounds.
    #[error("metadata.annotations[{SECONDS_ANNOTATION}] is {0:?}: give whole seconds from {MIN_SECONDS} to {MAX_SECONDS} (default {DEFAULT_SECONDS})")]
    Seconds(String),
}

impl TrialPolicy {
    /// The policy a pool's annotations set (the default without them).
    pub fn of(annotations: &BTreeMap<String, String>) -> Result<TrialPolicy, TrialError> {
        let mode = match annotations.get(ANNOTATION).map(|s| s.trim()) {
            None | Some("network") => TrialMode::Network,
            Some("always") => TrialMode::Always,
            Some("never") => TrialMode::Never,
            Some(other) => return Err(TrialError::Mode(bounded(other))),
        };
        let seconds = match annotations.get(SECONDS_ANNOTATION) {
            None => DEFAULT_SECONDS,
            Some(s) => s
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (MIN_SECONDS..=MAX_SECONDS).contains(n))
                .ok_or_else(|| TrialError::Seconds(bounded(s)))?,
        };
        Ok(TrialPolicy { mode, seconds })
    }

    /// Whether a change that wrote or removed `paths` is on trial.
    pub fn covers<'a>(&self, mut paths: impl Iterator<Item = &'a str>) -> bool {
        match self.mode {
            TrialMode::Never => false,
            TrialMode::Always => true,
            TrialMode::Network => paths.any(is_network_path),
        }
    }
}

/// Whether `path` is one of the [`NETWORK_PATHS`] or under one.
pub fn is_network_path(path: &str) -> bool {
    NETWORK_PATHS.iter().any(|p| {
        if *p == "/etc/nftables" {
            return path.starts_with(p);
        }
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// A value quoted in an error, cut to 64 characters (it comes from a manifest).
fn bounded(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn network_paths_match_on_a_boundary() {
        for p in [
            "/etc/NetworkManager/system-connections/eth0.nmconnection",
            "/etc/systemd/network/10-eth0.network",
            "/etc/resolv.conf",
            "/etc/hosts",
            "/etc/nftables.conf",
            "/etc/nftables.d/drop.nft",
            "/etc/firewalld/zones/public.xml",
            "/etc/netplan/01.yaml",
            "/etc/sysconfig/network-scripts/ifcfg-eth0",
        ] {
            assert!(is_network_path(p), "{p}");
        }
        for p in [
            "/etc/hostsx",
            "/etc/hosts.allow",
            "/etc/systemd/networkd.conf",
            "/etc/motd",
            "/etc/resolv.conf.d",
        ] {
            assert!(!is_network_path(p), "{p}");
        }
    }

    #[test]
    fn annotations_set_the_mode_and_bounded_seconds() {
        assert_eq!(TrialPolicy::of(&ann(&[])), Ok(TrialPolicy::default()));
        assert_eq!(
            TrialPolicy::of(&ann(&[(ANNOTATION, "always"), (SECONDS_ANNOTATION, "30")])),
            Ok(TrialPolicy {
                mode: TrialMode::Always,
                seconds: 30
            })
        );
        assert!(matches!(
            TrialPolicy::of(&ann(&[(ANNOTATION, "sometimes")])),
            Err(TrialError::Mode(_))
        ));
        for bad in ["9", "3601", "-1", "2m", ""] {
            assert!(
                matches!(
                    TrialPolicy::of(&ann(&[(SECONDS_ANNOTATION, bad)])),
                    Err(TrialError::Seconds(_))
                ),
                "{bad}"
            );
        }
        assert!(TrialPolicy::of(&ann(&[(SECONDS_ANNOTATION, "3600")])).is_ok());
    }

    #[test]
    fn the_mode_decides_what_is_on_trial() {
        let net = ["/etc/motd", "/etc/hosts"];
        let other = ["/etc/motd"];
        let p = |mode| TrialPolicy { mode, seconds: 120 };
        assert!(p(TrialMode::Network).covers(net.iter().copied()));
        assert!(!p(TrialMode::Network).covers(other.iter().copied()));
        assert!(p(TrialMode::Always).covers(other.iter().copied()));
        assert!(!p(TrialMode::Never).covers(net.iter().copied()));
    }
}
