//! The content address never changes for the same spec.

use super::*;
use crate::ignition::{File, Resource, Unit};
use crate::model::{KernelType, MachineConfigSpec};

/// The content address must never change for the same spec: rendered names are stored by
/// servers and nodes. This pins the hash of a fixed spec.
#[test]
fn spec_hash_is_stable() {
    let mut spec = MachineConfigSpec {
        kernel_arguments: vec!["nosmt".into(), "hugepages=32".into()],
        kernel_type: KernelType::Realtime,
        extensions: vec!["usbguard".into()],
        ..Default::default()
    };
    spec.config.storage.files.push(File {
        path: "/etc/chrony.conf".into(),
        mode: Some(0o644),
        contents: Resource {
            source: Some("data:,server%20a%0A".into()),
            ..Default::default()
        },
        ..Default::default()
    });
    spec.config.systemd.units.push(Unit {
        name: "a.service".into(),
        enabled: Some(true),
        contents: Some("[Service]\nExecStart=/bin/true\n".into()),
        ..Default::default()
    });
    assert_eq!(
        spec_hash(&spec),
        "3962cd1aa27d919cc4071b46086a23b4af88f8d688df3cd00f023a529af0e045"
    );
}
