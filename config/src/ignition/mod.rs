//! Ignition configs: the module's public face (re-exports); each concept lives in a room of its
//! own:
//!
//! - `version.rs`: the spec versions hearth reads and writes ([`SpecVersion`]).
//! - `empty.rs`: the emptiness helpers the model and the wire types share ([`EmptyValue`]).
//! - `v3.rs`: the internal model (spec 3.5.0 field set) and which 3.x version each field needs.
//! - `v2.rs`: the spec 2.x wire format, as written.
//! - `translate.rs`: 2.x into the internal model, and the internal model out to any version.
//! - `ssh_keys.rs`: each SSH key of a user kept once, in order (the MCO's
//!   `dedupePasswdUserSSHKeys`), which the 2.x translation and rendering both apply.
//!
//! Input may be any of spec 2.2.0 to 2.4.0 and 3.0.0 to 3.5.0; it is translated to one model
//! ([`Config`]). Output may be any of those versions ([`Config::to_version`]); what the chosen
//! version cannot express is refused with the field that needs it.

// `empty` first: its `empty_check!` macro is used by `v2` and `v3` (macros are scoped by text
// order).
#[macro_use]
mod empty;
mod ssh_keys;
mod translate;
mod v2;
mod v3;
mod version;

pub use empty::EmptyValue;
pub use ssh_keys::{dedup_ssh_keys, dedup_users_ssh_keys};
pub use translate::TranslateError;
pub use v2::{
    V2Config, V2ConfigRefs, V2Filesystem, V2Ignition, V2Mount, V2Networkd, V2Node, V2Passwd,
    V2Storage, V2Systemd, V2Unit, V2User,
};
pub use v3::{
    Config, Directory, Disk, Dropin, File, Filesystem, Group, HttpHeader, IgnitionConfigRefs,
    IgnitionSection, KernelArguments, Link, Luks, NodeOwner, Partition, Passwd, Proxy, Raid,
    Resource, Security, Storage, Systemd, Timeouts, Tls, Unit, User, Verification,
};
pub use version::SpecVersion;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(SpecVersion::parse("3.2.0"), Some(SpecVersion::V3_2));
        assert_eq!(SpecVersion::parse("2.2.0"), Some(SpecVersion::V2_2));
        assert_eq!(SpecVersion::parse("3.6.0"), None);
        assert_eq!(SpecVersion::parse("2.1.0"), None);
        assert!(SpecVersion::V2_4 < SpecVersion::V3_0);
        for v in SpecVersion::ALL {
            assert_eq!(SpecVersion::parse(v.as_str()), Some(v));
        }
    }
}
