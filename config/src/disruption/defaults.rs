//! The MCO's default node-disruption rules, as data (files, units, SSH keys), with where they
//! come from ([`MCO_DEFAULTS_SOURCE`]).

use crate::model::{DisruptionPolicies, FilePolicy, PolicyAction, UnitPolicy};

/// Where the MCO defaults below come from.
pub const MCO_DEFAULTS_SOURCE: &str =
    "openshift/machine-config-operator, pkg/apihelpers/apihelpers.go \
     (defaultClusterPolicies) with paths from pkg/daemon/constants/constants.go, at commit \
     7ff337a4ffac8e7562692181178ede61e4b2eec5";

/// A policy action in a `const` table (the [`PolicyAction`] equivalents without owned strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultAction {
    /// [`PolicyAction::None`].
    None,
    /// [`PolicyAction::DaemonReload`].
    DaemonReload,
    /// [`PolicyAction::Reload`].
    Reload(&'static str),
    /// [`PolicyAction::Restart`].
    Restart(&'static str),
    /// [`PolicyAction::Special`].
    Special,
}

impl DefaultAction {
    /// The owned form.
    pub fn to_policy_action(self) -> PolicyAction {
        match self {
            DefaultAction::None => PolicyAction::None,
            DefaultAction::DaemonReload => PolicyAction::DaemonReload,
            DefaultAction::Reload(s) => PolicyAction::Reload {
                service: s.to_string(),
            },
            DefaultAction::Restart(s) => PolicyAction::Restart {
                service: s.to_string(),
            },
            DefaultAction::Special => PolicyAction::Special,
        }
    }
}
pub(super) const CRIO: &str = "crio.service";
const KUBELET: &str = "kubelet.service";
const UPDATE_CA_TRUST: &str = "coreos-update-ca-trust.service";
const IRI_REGISTRY: &str = "iri-registry.service";

/// The MCO's default file rules, in the MCO's order (see [`MCO_DEFAULTS_SOURCE`]).
pub const MCO_DEFAULT_FILES: &[(&str, &[DefaultAction])] = &[
    // constants.KubeletAuthFile
    ("/var/lib/kubelet/config.json", &[DefaultAction::None]),
    // constants.GPGNoRebootPath
    (
        "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
        &[DefaultAction::Reload(CRIO)],
    ),
    // constants.ContainerRegistryPolicyPath
    (
        "/etc/containers/policy.json",
        &[DefaultAction::Reload(CRIO)],
    ),
    // constants.ContainerRegistryConfPath
    ("/etc/containers/registries.conf", &[DefaultAction::Special]),
    // constants.SigstoreRegistriesConfigDir
    (
        "/etc/containers/registries.d",
        &[DefaultAction::Reload(CRIO)],
    ),
    // constants.CrioPoliciesDir
    ("/etc/crio/policies", &[DefaultAction::Reload(CRIO)]),
    // constants.OpenShiftNMStateConfigDir (first-boot only configuration)
    ("/etc/nmstate/openshift", &[DefaultAction::None]),
    // constants.UserCABundlePath
    (
        "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        &[
            DefaultAction::Restart(UPDATE_CA_TRUST),
            DefaultAction::Restart(CRIO),
        ],
    ),
    // constants.KubernetesCredentialProvidersDir
    (
        "/etc/kubernetes/credential-providers",
        &[DefaultAction::Restart(KUBELET)],
    ),
    // constants.KubeletCrioImageCredProviderConfPath
    (
        "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
        &[DefaultAction::DaemonReload, DefaultAction::Restart(KUBELET)],
    ),
    // constants.IRIRegistryConfigPath
    ("/etc/iri-registry", &[DefaultAction::Restart(IRI_REGISTRY)]),
    // constants.IRILoadImageScriptPath
    (
        "/usr/local/bin/load-registry-image.sh",
        &[DefaultAction::Restart(IRI_REGISTRY)],
    ),
    // constants.IRIRootCAPath
    (
        "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
        &[DefaultAction::Restart(UPDATE_CA_TRUST)],
    ),
];

/// The MCO's default unit rules (see [`MCO_DEFAULTS_SOURCE`]).
pub const MCO_DEFAULT_UNITS: &[(&str, &[DefaultAction])] = &[(
    IRI_REGISTRY,
    &[
        DefaultAction::DaemonReload,
        DefaultAction::Restart(IRI_REGISTRY),
    ],
)];

/// The MCO's default rule for SSH key changes.
pub const MCO_DEFAULT_SSH_KEY: &[DefaultAction] = &[DefaultAction::None];

/// The MCO's defaults as [`DisruptionPolicies`].
pub fn mco_defaults() -> DisruptionPolicies {
    let owned = |actions: &[DefaultAction]| actions.iter().map(|a| a.to_policy_action()).collect();
    DisruptionPolicies {
        files: MCO_DEFAULT_FILES
            .iter()
            .map(|(path, actions)| FilePolicy {
                path: path.to_string(),
                actions: owned(actions),
            })
            .collect(),
        units: MCO_DEFAULT_UNITS
            .iter()
            .map(|(name, actions)| UnitPolicy {
                name: name.to_string(),
                actions: owned(actions),
            })
            .collect(),
        ssh_key: Some(owned(MCO_DEFAULT_SSH_KEY)),
    }
}
