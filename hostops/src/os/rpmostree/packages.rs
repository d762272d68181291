//! The packages rpm-ostree layers or overrides for a kernel type or an extension (the MCO's
//! lists), and the kernel type a deployment's packages say.

use hearth_config::model::KernelType;

/// The default kernel's packages, removed (overridden) for another kernel type (MCO
/// `pkg/daemon/update.go`, `getKernelPackagesForTargetRelease`).
pub const DEFAULT_KERNEL_PACKAGES: [&str; 5] = [
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
];
/// The realtime kernel's packages (the MCO's list in `update.go`: not the `kernel-rt`
/// meta-package, and without `kernel-rt-kvm`, which only its controller's table lists).
pub const REALTIME_KERNEL_PACKAGES: [&str; 3] = [
    "kernel-rt-core",
    "kernel-rt-modules",
    "kernel-rt-modules-extra",
];
/// The 64k-pages kernel's packages (aarch64 only).
pub const KERNEL_64K_PACKAGES: [&str; 4] = [
    "kernel-64k-core",
    "kernel-64k-modules",
    "kernel-64k-modules-core",
    "kernel-64k-modules-extra",
];

/// The extensions the MCO supports on RHCOS and their packages
/// (`pkg/controller/common/helpers.go`, `SupportedExtensions`).
pub const EXTENSIONS: [(&str, &[&str]); 7] = [
    ("two-node-ha", &["pacemaker", "pcs", "fence-agents-all"]),
    (
        "ipsec",
        &[
            "NetworkManager-libreswan",
            "libreswan",
            "openvswitch3.5-ipsec",
        ],
    ),
    ("usbguard", &["usbguard"]),
    ("kerberos", &["krb5-workstation", "libkadm5"]),
    ("kernel-devel", &["kernel-devel", "kernel-headers"]),
    ("sandboxed-containers", &["kata-containers"]),
    ("sysstat", &["sysstat"]),
];

/// The packages of an extension.
pub fn extension_packages(name: &str) -> Option<&'static [&'static str]> {
    EXTENSIONS.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
}

/// The packages a kernel type installs on top of (or instead of) the default kernel.
pub fn kernel_type_packages(kernel_type: KernelType) -> &'static [&'static str] {
    match kernel_type {
        KernelType::Default => &[],
        KernelType::Realtime => &REALTIME_KERNEL_PACKAGES,
        KernelType::Pages64k => &KERNEL_64K_PACKAGES,
    }
}

/// The kernel type a deployment's requested (layered) packages say.
pub(super) fn kernel_type_of(packages: &[String]) -> KernelType {
    if packages.iter().any(|p| p.starts_with("kernel-rt-")) {
        KernelType::Realtime
    } else if packages.iter().any(|p| p.starts_with("kernel-64k-")) {
        KernelType::Pages64k
    } else {
        KernelType::Default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_types_come_from_requested_packages() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(kernel_type_of(&s(&["usbguard"])), KernelType::Default);
        assert_eq!(
            kernel_type_of(&s(&["kernel-rt-core", "kernel-rt-modules"])),
            KernelType::Realtime
        );
        assert_eq!(
            kernel_type_of(&s(&["kernel-64k-core"])),
            KernelType::Pages64k
        );
        assert_eq!(
            extension_packages("kerberos"),
            Some(&["krb5-workstation", "libkadm5"][..])
        );
        assert_eq!(extension_packages("nope"), None);
    }
}
