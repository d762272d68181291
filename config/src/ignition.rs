//! Ignition configs: the internal model (spec 3.5.0 field set), the 2.x wire format, and the
//! translations between them.
//!
//! Input may be any of spec 2.2.0 to 2.4.0 and 3.0.0 to 3.5.0; it is translated to one model
//! ([`Config`]). Output may be any of those versions ([`Config::to_version`]); what the chosen
//! version cannot express is refused with the field that needs it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An Ignition spec version that hearth reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpecVersion {
    /// 2.2.0 (the MCO's original format).
    V2_2,
    /// 2.3.0.
    V2_3,
    /// 2.4.0.
    V2_4,
    /// 3.0.0.
    V3_0,
    /// 3.1.0.
    V3_1,
    /// 3.2.0.
    V3_2,
    /// 3.3.0.
    V3_3,
    /// 3.4.0.
    V3_4,
    /// 3.5.0 (the internal model).
    V3_5,
}

impl SpecVersion {
    /// Every supported version, oldest first.
    pub const ALL: [SpecVersion; 9] = [
        SpecVersion::V2_2,
        SpecVersion::V2_3,
        SpecVersion::V2_4,
        SpecVersion::V3_0,
        SpecVersion::V3_1,
        SpecVersion::V3_2,
        SpecVersion::V3_3,
        SpecVersion::V3_4,
        SpecVersion::V3_5,
    ];
    /// The newest version: the one rendered configs use.
    pub const LATEST: SpecVersion = SpecVersion::V3_5;

    /// Parses `"3.2.0"` (also `"3.2"`).
    pub fn parse(text: &str) -> Option<SpecVersion> {
        let t = text.trim();
        let t = t
            .strip_suffix(".0")
            .filter(|s| s.matches('.').count() == 1)
            .unwrap_or(t);
        Some(match t {
            "2.2" => SpecVersion::V2_2,
            "2.3" => SpecVersion::V2_3,
            "2.4" => SpecVersion::V2_4,
            "3.0" => SpecVersion::V3_0,
            "3.1" => SpecVersion::V3_1,
            "3.2" => SpecVersion::V3_2,
            "3.3" => SpecVersion::V3_3,
            "3.4" => SpecVersion::V3_4,
            "3.5" => SpecVersion::V3_5,
            _ => return None,
        })
    }

    /// `"3.2.0"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecVersion::V2_2 => "2.2.0",
            SpecVersion::V2_3 => "2.3.0",
            SpecVersion::V2_4 => "2.4.0",
            SpecVersion::V3_0 => "3.0.0",
            SpecVersion::V3_1 => "3.1.0",
            SpecVersion::V3_2 => "3.2.0",
            SpecVersion::V3_3 => "3.3.0",
            SpecVersion::V3_4 => "3.4.0",
            SpecVersion::V3_5 => "3.5.0",
        }
    }

    /// True for the 2.x family.
    pub fn is_v2(self) -> bool {
        self < SpecVersion::V3_0
    }

    /// The list of supported versions, for error messages.
    pub fn supported_list() -> String {
        Self::ALL
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn is_false(b: &Option<bool>) -> bool {
    b.is_none()
}

macro_rules! empty_check {
    ($ty:ty { $($field:ident),* }) => {
        impl $ty {
            /// True when no field is set.
            pub fn is_empty(&self) -> bool {
                true $(&& self.$field.is_empty_value())*
            }
        }
    };
}

/// Emptiness for serialisation (`skip_serializing_if`).
pub trait EmptyValue {
    /// True when the value carries nothing.
    fn is_empty_value(&self) -> bool;
}
impl<T> EmptyValue for Vec<T> {
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}
impl<T> EmptyValue for Option<T> {
    fn is_empty_value(&self) -> bool {
        self.is_none()
    }
}

// ---------------------------------------------------------------------------------------------
// The internal model: Ignition spec 3.5.0.
// ---------------------------------------------------------------------------------------------

/// An Ignition config in the internal model (spec 3.5.0 field set).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The `ignition` section.
    #[serde(default)]
    pub ignition: IgnitionSection,
    /// `kernelArguments` (3.3+).
    #[serde(default, skip_serializing_if = "KernelArguments::is_empty")]
    pub kernel_arguments: KernelArguments,
    /// `passwd`.
    #[serde(default, skip_serializing_if = "Passwd::is_empty")]
    pub passwd: Passwd,
    /// `storage`.
    #[serde(default, skip_serializing_if = "Storage::is_empty")]
    pub storage: Storage,
    /// `systemd`.
    #[serde(default, skip_serializing_if = "Systemd::is_empty")]
    pub systemd: Systemd,
}

/// The `ignition` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnitionSection {
    /// `version`: required in input; set by hearth on output.
    #[serde(default)]
    pub version: Option<String>,
    /// `config` (merge/replace).
    #[serde(default, skip_serializing_if = "IgnitionConfigRefs::is_empty")]
    pub config: IgnitionConfigRefs,
    /// `proxy` (3.1+).
    #[serde(default, skip_serializing_if = "Proxy::is_empty")]
    pub proxy: Proxy,
    /// `security`.
    #[serde(default, skip_serializing_if = "Security::is_empty")]
    pub security: Security,
    /// `timeouts`.
    #[serde(default, skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
}

impl IgnitionSection {
    /// True when nothing but the version is set.
    pub fn is_empty_but_version(&self) -> bool {
        self.config.is_empty()
            && self.proxy.is_empty()
            && self.security.is_empty()
            && self.timeouts.is_empty()
    }
}

/// `ignition.config`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IgnitionConfigRefs {
    /// `merge`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merge: Vec<Resource>,
    /// `replace`.
    #[serde(default, skip_serializing_if = "Resource::is_empty")]
    pub replace: Resource,
}
empty_check!(IgnitionConfigRefs { merge });

/// `ignition.proxy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    /// `httpProxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    /// `httpsProxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<String>,
    /// `noProxy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_proxy: Vec<String>,
}
empty_check!(Proxy {
    http_proxy,
    https_proxy,
    no_proxy
});

/// `ignition.security`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    /// `tls`.
    #[serde(default, skip_serializing_if = "Tls::is_empty")]
    pub tls: Tls,
}
impl Security {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.tls.is_empty()
    }
}

/// `ignition.security.tls`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tls {
    /// `certificateAuthorities`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_authorities: Vec<Resource>,
}
empty_check!(Tls {
    certificate_authorities
});

/// `ignition.timeouts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeouts {
    /// `httpResponseHeaders` (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_response_headers: Option<i64>,
    /// `httpTotal` (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_total: Option<i64>,
}
empty_check!(Timeouts {
    http_response_headers,
    http_total
});

/// A resource: file contents, an appended fragment, a merged config, a CA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// `compression` (`gzip` or empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// `httpHeaders` (3.1+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
    /// `source`: a URL (`data:` for day-2 configs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `verification`.
    #[serde(default, skip_serializing_if = "Verification::is_empty")]
    pub verification: Verification,
}
impl Resource {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.compression.is_none()
            && self.http_headers.is_empty()
            && self.source.is_none()
            && self.verification.is_empty()
    }
}

/// An HTTP header of a resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpHeader {
    /// Header name.
    pub name: String,
    /// Header value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `verification`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// `hash`: `sha512-<hex>` or `sha256-<hex>` (3.1+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}
empty_check!(Verification { hash });

/// `kernelArguments` (3.3+).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelArguments {
    /// Arguments that must be present.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub should_exist: Vec<String>,
    /// Arguments that must be absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub should_not_exist: Vec<String>,
}
empty_check!(KernelArguments {
    should_exist,
    should_not_exist
});

/// `passwd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Passwd {
    /// `users`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
    /// `groups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Group>,
}
empty_check!(Passwd { users, groups });

/// `passwd.users[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    /// User name (the key).
    pub name: String,
    /// `gecos`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gecos: Option<String>,
    /// `groups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// `homeDir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_dir: Option<String>,
    /// `noCreateHome`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_create_home: Option<bool>,
    /// `noLogInit`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_log_init: Option<bool>,
    /// `noUserGroup`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_user_group: Option<bool>,
    /// `passwordHash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    /// `primaryGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_group: Option<String>,
    /// `shell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// `shouldExist` (3.2+).
    #[serde(default, skip_serializing_if = "is_false")]
    pub should_exist: Option<bool>,
    /// `sshAuthorizedKeys`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    /// `system`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub system: Option<bool>,
    /// `uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<i64>,
}

impl User {
    /// The fields other than `name`, `sshAuthorizedKeys` and `passwordHash` that are set: what a
    /// day-2 update cannot change for user `core`.
    pub fn other_fields_set(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let checks: [(&'static str, bool); 11] = [
            ("gecos", self.gecos.is_some()),
            ("groups", !self.groups.is_empty()),
            ("homeDir", self.home_dir.is_some()),
            ("noCreateHome", self.no_create_home.is_some()),
            ("noLogInit", self.no_log_init.is_some()),
            ("noUserGroup", self.no_user_group.is_some()),
            ("primaryGroup", self.primary_group.is_some()),
            ("shell", self.shell.is_some()),
            ("shouldExist", self.should_exist.is_some()),
            ("system", self.system.is_some()),
            ("uid", self.uid.is_some()),
        ];
        for (name, set) in checks {
            if set {
                out.push(name);
            }
        }
        out
    }
}

/// `passwd.groups[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// Group name (the key).
    pub name: String,
    /// `gid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<i64>,
    /// `passwordHash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    /// `shouldExist` (3.2+).
    #[serde(default, skip_serializing_if = "is_false")]
    pub should_exist: Option<bool>,
    /// `system`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub system: Option<bool>,
}

/// `storage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    /// `directories`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<Directory>,
    /// `disks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
    /// `files`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    /// `filesystems`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Filesystem>,
    /// `links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// `luks` (3.2+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub luks: Vec<Luks>,
    /// `raid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raid: Vec<Raid>,
}
empty_check!(Storage {
    directories,
    disks,
    files,
    filesystems,
    links,
    luks,
    raid
});

/// A user or group reference by id or name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeOwner {
    /// Numeric id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Name, resolved in the target root's passwd/group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
empty_check!(NodeOwner { id, name });

/// `storage.files[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct File {
    /// Absolute path (the key).
    pub path: String,
    /// `overwrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// Owner.
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub user: NodeOwner,
    /// Group.
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub group: NodeOwner,
    /// `append` fragments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub append: Vec<Resource>,
    /// `contents`.
    #[serde(default, skip_serializing_if = "Resource::is_empty")]
    pub contents: Resource,
    /// Permission bits (decimal in JSON; `0644` in YAML is octal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
}

/// `storage.directories[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Directory {
    /// Absolute path (the key).
    pub path: String,
    /// `overwrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// Owner.
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub user: NodeOwner,
    /// Group.
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub group: NodeOwner,
    /// Permission bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
}

/// `storage.links[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Absolute path (the key).
    pub path: String,
    /// `overwrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// Owner.
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub user: NodeOwner,
    /// Group.
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub group: NodeOwner,
    /// Link target.
    pub target: Option<String>,
    /// Hard link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard: Option<bool>,
}

/// `storage.disks[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// Device path (the key).
    pub device: String,
    /// `partitions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<Partition>,
    /// `wipeTable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_table: Option<bool>,
}

/// `storage.disks[].partitions[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Partition {
    /// `guid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guid: Option<String>,
    /// `label`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `number`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<i64>,
    /// `resize` (3.2+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize: Option<bool>,
    /// `shouldExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_exist: Option<bool>,
    /// `sizeMiB`.
    #[serde(default, rename = "sizeMiB", skip_serializing_if = "Option::is_none")]
    pub size_mib: Option<i64>,
    /// `startMiB`.
    #[serde(default, rename = "startMiB", skip_serializing_if = "Option::is_none")]
    pub start_mib: Option<i64>,
    /// `typeGuid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_guid: Option<String>,
    /// `wipePartitionEntry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_partition_entry: Option<bool>,
}

/// `storage.filesystems[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Filesystem {
    /// Device (the key).
    pub device: String,
    /// `format` (`none` is 3.3+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// `label`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `mountOptions` (3.1+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_options: Vec<String>,
    /// `options`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// `path`: mount point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `uuid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `wipeFilesystem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_filesystem: Option<bool>,
}

/// `storage.luks[]` (3.2+). Clevis and CEX settings are kept as given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Luks {
    /// Volume name (the key).
    pub name: String,
    /// `cex` (3.5+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cex: Option<serde_json::Value>,
    /// `clevis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clevis: Option<serde_json::Value>,
    /// `device`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `discard` (3.4+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<bool>,
    /// `keyFile`.
    #[serde(default, skip_serializing_if = "Resource::is_empty")]
    pub key_file: Resource,
    /// `label`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `openOptions` (3.4+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_options: Vec<String>,
    /// `options`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// `uuid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `wipeVolume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_volume: Option<bool>,
}

/// `storage.raid[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Raid {
    /// Array name (the key).
    pub name: String,
    /// Member devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// RAID level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// `options`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// `spares`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spares: Option<i64>,
}

/// `systemd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Systemd {
    /// `units`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<Unit>,
}
empty_check!(Systemd { units });

/// `systemd.units[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    /// Unit name with suffix (the key).
    pub name: String,
    /// Unit file contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    /// Drop-ins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropins: Vec<Dropin>,
    /// `enabled`: `Some(true)` enable, `Some(false)` disable, `None` leave to presets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `mask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<bool>,
}

/// `systemd.units[].dropins[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropin {
    /// File name, ending in `.conf` (the key).
    pub name: String,
    /// Contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Spec 2.x wire format.
// ---------------------------------------------------------------------------------------------

/// Ignition spec 2.2-2.4, as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Config {
    /// `ignition`.
    #[serde(default)]
    pub ignition: V2Ignition,
    /// `networkd` (no 3.x equivalent).
    #[serde(default, skip_serializing_if = "V2Networkd::is_empty")]
    pub networkd: V2Networkd,
    /// `passwd`.
    #[serde(default, skip_serializing_if = "V2Passwd::is_empty")]
    pub passwd: V2Passwd,
    /// `storage`.
    #[serde(default, skip_serializing_if = "V2Storage::is_empty")]
    pub storage: V2Storage,
    /// `systemd`.
    #[serde(default, skip_serializing_if = "V2Systemd::is_empty")]
    pub systemd: V2Systemd,
}

/// 2.x `ignition`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Ignition {
    /// `version`.
    #[serde(default)]
    pub version: Option<String>,
    /// `config` (append/replace).
    #[serde(default, skip_serializing_if = "V2ConfigRefs::is_empty")]
    pub config: V2ConfigRefs,
    /// `proxy` (2.3+ in hearth's output; kept as given).
    #[serde(default, skip_serializing_if = "Proxy::is_empty")]
    pub proxy: Proxy,
    /// `security`.
    #[serde(default, skip_serializing_if = "Security::is_empty")]
    pub security: Security,
    /// `timeouts`.
    #[serde(default, skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
}

/// 2.x `ignition.config`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2ConfigRefs {
    /// `append`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub append: Vec<Resource>,
    /// `replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<Resource>,
}
impl V2ConfigRefs {
    /// True when nothing is set (an empty `replace: {verification: {}}` counts as empty).
    pub fn is_empty(&self) -> bool {
        self.append.is_empty() && self.replace.as_ref().is_none_or(Resource::is_empty)
    }
}

/// 2.x `networkd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Networkd {
    /// `units`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<serde_json::Value>,
}
empty_check!(V2Networkd { units });

/// 2.x `passwd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Passwd {
    /// `users`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<V2User>,
    /// `groups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Group>,
}
empty_check!(V2Passwd { users, groups });

/// 2.x `passwd.users[]`: the 3.x fields plus the deprecated `create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V2User {
    /// Name.
    pub name: String,
    /// `create` (deprecated in 2.x, dropped in 3.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<serde_json::Value>,
    /// `gecos`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gecos: Option<String>,
    /// `groups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// `homeDir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_dir: Option<String>,
    /// `noCreateHome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_create_home: Option<bool>,
    /// `noLogInit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_log_init: Option<bool>,
    /// `noUserGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_user_group: Option<bool>,
    /// `passwordHash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    /// `primaryGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_group: Option<String>,
    /// `shell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// `sshAuthorizedKeys`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    /// `system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<bool>,
    /// `uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<i64>,
}

/// 2.x `storage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Storage {
    /// `directories`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<V2Node>,
    /// `disks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Disk>,
    /// `files`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<V2Node>,
    /// `filesystems`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<V2Filesystem>,
    /// `links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<V2Node>,
    /// `raid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raid: Vec<Raid>,
}
empty_check!(V2Storage {
    directories,
    disks,
    files,
    filesystems,
    links,
    raid
});

/// A 2.x file, directory or link (they share one shape on the wire).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Node {
    /// `filesystem`: the name of the filesystem; hearth reads only `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<String>,
    /// Path.
    pub path: String,
    /// `append` (files; boolean in 2.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    /// `contents` (files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<Resource>,
    /// `mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
    /// `overwrite`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<NodeOwner>,
    /// `group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<NodeOwner>,
    /// `target` (links).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `hard` (links).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard: Option<bool>,
}

/// 2.x `storage.filesystems[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Filesystem {
    /// Name, referenced by files' `filesystem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `mount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<V2Mount>,
    /// `path` (an already mounted path; no 3.x equivalent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// 2.x `filesystems[].mount`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V2Mount {
    /// Device.
    pub device: String,
    /// Format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `wipeFilesystem`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wipe_filesystem: Option<bool>,
    /// `create` (deprecated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<serde_json::Value>,
}

/// 2.x `systemd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Systemd {
    /// `units`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<V2Unit>,
}
empty_check!(V2Systemd { units });

/// 2.x `systemd.units[]`: adds the deprecated `enable`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct V2Unit {
    /// Name.
    pub name: String,
    /// Contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    /// Drop-ins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropins: Vec<Dropin>,
    /// `enable` (deprecated: means enabled: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `mask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<bool>,
}

/// A problem translating between versions: the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TranslateError {
    /// Field path within the Ignition config (`storage.files[0].filesystem`).
    pub path: String,
    /// What is wrong and what to do.
    pub message: String,
}

fn terr(path: impl Into<String>, message: impl Into<String>) -> TranslateError {
    TranslateError {
        path: path.into(),
        message: message.into(),
    }
}

/// Upper bound on list lengths that 2.x configs may duplicate-merge quadratically.
fn dedup_by_key<T, K: std::hash::Hash + Eq>(
    items: Vec<T>,
    key: impl Fn(&T) -> K,
    merge: impl Fn(&mut T, T),
) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    let mut index: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    for item in items {
        match index.entry(key(&item)) {
            std::collections::hash_map::Entry::Occupied(e) => merge(&mut out[*e.get()], item),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(out.len());
                out.push(item);
            }
        }
    }
    out
}

impl V2Config {
    /// Translates to the internal model with the MCO's rules: files must be on filesystem
    /// `root` (dropped in 3.x); duplicate files and units are de-duplicated (the last wins; drop-ins
    /// of duplicate units are concatenated); SSH keys of every user entry are merged into user
    /// `core`. Things 3.x has no form for (networkd units, path-only filesystems) are refused.
    pub fn into_v3(self) -> Result<Config, Vec<TranslateError>> {
        let mut errors = Vec::new();
        let mut out = Config::default();
        out.ignition.version = Some(SpecVersion::LATEST.as_str().to_string());
        out.ignition.config.merge = self.ignition.config.append;
        if let Some(replace) = self.ignition.config.replace {
            out.ignition.config.replace = replace;
        }
        out.ignition.proxy = self.ignition.proxy;
        out.ignition.security = self.ignition.security;
        out.ignition.timeouts = self.ignition.timeouts;

        if !self.networkd.units.is_empty() {
            errors.push(terr(
                "networkd.units",
                "networkd units have no Ignition 3 form; write them as files under /etc/systemd/network/ instead",
            ));
        }

        // Filesystems: only mount-style ones translate; `root` is implicit in 3.x.
        for (i, fs) in self.storage.filesystems.into_iter().enumerate() {
            let p = format!("storage.filesystems[{i}]");
            match (fs.mount, fs.path) {
                (Some(m), None) => {
                    if fs.name.as_deref().is_some_and(|n| n != "root") {
                        errors.push(terr(
                            format!("{p}.name"),
                            format!(
                                "files can only be placed on filesystem \"root\" when translating from 2.x; filesystem {:?} needs an explicit mount path in Ignition 3",
                                fs.name.unwrap_or_default()
                            ),
                        ));
                        continue;
                    }
                    out.storage.filesystems.push(Filesystem {
                        device: m.device,
                        format: m.format,
                        label: m.label,
                        options: m.options,
                        uuid: m.uuid,
                        wipe_filesystem: m.wipe_filesystem,
                        ..Default::default()
                    });
                }
                _ => errors.push(terr(
                    p,
                    "a 2.x filesystem given by path (or without mount) has no Ignition 3 form",
                )),
            }
        }
        out.storage.disks = self.storage.disks;
        out.storage.raid = self.storage.raid;

        let check_fs = |kind: &str,
                        i: usize,
                        fs: &Option<String>,
                        errors: &mut Vec<TranslateError>| {
            if let Some(name) = fs {
                if name != "root" {
                    errors.push(terr(
                        format!("storage.{kind}[{i}].filesystem"),
                        format!("filesystem {name:?} is not supported; only \"root\" translates to Ignition 3 (write the full path instead)"),
                    ));
                }
            }
        };

        let mut files = Vec::new();
        for (i, f) in self.storage.files.into_iter().enumerate() {
            check_fs("files", i, &f.filesystem, &mut errors);
            let contents = f.contents.unwrap_or_default();
            let (contents, append) = if f.append == Some(true) {
                (Resource::default(), vec![contents])
            } else {
                (contents, Vec::new())
            };
            files.push(File {
                path: f.path,
                // 2.x always replaced existing files; 3.x defaults to refusing to.
                overwrite: Some(f.overwrite.unwrap_or(true)),
                user: f.user.unwrap_or_default(),
                group: f.group.unwrap_or_default(),
                append,
                contents,
                mode: f.mode,
            });
        }
        out.storage.files = dedup_by_key(files, |f| f.path.clone(), |a, b| *a = b);

        let mut dirs = Vec::new();
        for (i, d) in self.storage.directories.into_iter().enumerate() {
            check_fs("directories", i, &d.filesystem, &mut errors);
            dirs.push(Directory {
                path: d.path,
                overwrite: d.overwrite,
                user: d.user.unwrap_or_default(),
                group: d.group.unwrap_or_default(),
                mode: d.mode,
            });
        }
        out.storage.directories = dedup_by_key(dirs, |d| d.path.clone(), |a, b| *a = b);

        let mut links = Vec::new();
        for (i, l) in self.storage.links.into_iter().enumerate() {
            check_fs("links", i, &l.filesystem, &mut errors);
            links.push(Link {
                path: l.path,
                overwrite: l.overwrite,
                user: l.user.unwrap_or_default(),
                group: l.group.unwrap_or_default(),
                target: l.target,
                hard: l.hard,
            });
        }
        out.storage.links = dedup_by_key(links, |l| l.path.clone(), |a, b| *a = b);

        let units: Vec<Unit> = self
            .systemd
            .units
            .into_iter()
            .map(|u| Unit {
                name: u.name,
                contents: u.contents,
                dropins: u.dropins,
                enabled: u.enabled.or(u.enable.filter(|e| *e)),
                mask: u.mask,
            })
            .collect();
        out.systemd.units = dedup_by_key(
            units,
            |u| u.name.clone(),
            |a, b| {
                let mut dropins = std::mem::take(&mut a.dropins);
                let mut index: std::collections::HashMap<String, usize> =
                    std::collections::HashMap::new();
                for (i, d) in dropins.iter().enumerate() {
                    index.entry(d.name.clone()).or_insert(i);
                }
                for d in b.dropins.iter().cloned() {
                    match index.get(&d.name) {
                        Some(&i) => dropins[i] = d,
                        None => {
                            index.insert(d.name.clone(), dropins.len());
                            dropins.push(d);
                        }
                    }
                }
                *a = b;
                a.dropins = dropins;
            },
        );

        // Users: the MCO only manages `core` on day 2 and folds every key into it.
        let mut users: Vec<User> = Vec::new();
        let mut user_index: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        let mut user_keys: Vec<std::collections::HashSet<String>> = Vec::new();
        for u in self.passwd.users {
            let user = User {
                name: u.name,
                gecos: u.gecos,
                groups: u.groups,
                home_dir: u.home_dir,
                no_create_home: u.no_create_home,
                no_log_init: u.no_log_init,
                no_user_group: u.no_user_group,
                password_hash: u.password_hash,
                primary_group: u.primary_group,
                shell: u.shell,
                should_exist: None,
                ssh_authorized_keys: u.ssh_authorized_keys,
                system: u.system,
                uid: u.uid,
            };
            if let Some(&i) = user_index.get(&user.name) {
                let existing = &mut users[i];
                for k in user.ssh_authorized_keys.iter() {
                    if user_keys[i].insert(k.clone()) {
                        existing.ssh_authorized_keys.push(k.clone());
                    }
                }
                let keys = std::mem::take(&mut existing.ssh_authorized_keys);
                *existing = User {
                    ssh_authorized_keys: keys,
                    ..user
                };
            } else {
                user_index.insert(user.name.clone(), users.len());
                user_keys.push(user.ssh_authorized_keys.iter().cloned().collect());
                users.push(user);
            }
        }
        crate::mco::dedup_users_ssh_keys(&mut users);
        out.passwd.users = users;
        out.passwd.groups = dedup_by_key(self.passwd.groups, |g| g.name.clone(), |a, b| *a = b);

        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }
}

impl Config {
    /// Every field set in this config that needs a spec version newer than `version`, as
    /// `(path, minimum version)` pairs.
    pub fn fields_needing_newer(&self, version: SpecVersion) -> Vec<(String, SpecVersion)> {
        let mut out = Vec::new();
        let mut need = |path: String, min: SpecVersion| {
            if version < min {
                out.push((path, min));
            }
        };
        let v3_1 = SpecVersion::V3_1;
        // Version-specific features of resources.
        let resource = |path: String, r: &Resource, need: &mut dyn FnMut(String, SpecVersion)| {
            if !r.http_headers.is_empty() {
                need(format!("{path}.httpHeaders"), v3_1);
            }
            if r.verification
                .hash
                .as_deref()
                .is_some_and(|h| h.starts_with("sha256-"))
            {
                need(format!("{path}.verification.hash"), v3_1);
            }
            if let Some(src) = &r.source {
                if src.starts_with("gs://") {
                    need(format!("{path}.source"), SpecVersion::V3_2);
                }
                if src.starts_with("arn:") {
                    need(format!("{path}.source"), SpecVersion::V3_4);
                }
            }
        };
        for (i, r) in self.ignition.config.merge.iter().enumerate() {
            let p = format!("ignition.config.merge[{i}]");
            if r.compression.is_some() {
                need(format!("{p}.compression"), v3_1);
            }
            resource(p, r, &mut need);
        }
        if !self.ignition.config.replace.is_empty() {
            if self.ignition.config.replace.compression.is_some() {
                need("ignition.config.replace.compression".into(), v3_1);
            }
            resource(
                "ignition.config.replace".into(),
                &self.ignition.config.replace,
                &mut need,
            );
        }
        for (i, r) in self
            .ignition
            .security
            .tls
            .certificate_authorities
            .iter()
            .enumerate()
        {
            let p = format!("ignition.security.tls.certificateAuthorities[{i}]");
            if r.compression.is_some() {
                need(format!("{p}.compression"), v3_1);
            }
            resource(p, r, &mut need);
        }
        if !self.ignition.proxy.is_empty() {
            need("ignition.proxy".into(), v3_1);
        }
        for (i, f) in self.storage.files.iter().enumerate() {
            resource(
                format!("storage.files[{i}].contents"),
                &f.contents,
                &mut need,
            );
            for (j, a) in f.append.iter().enumerate() {
                resource(format!("storage.files[{i}].append[{j}]"), a, &mut need);
            }
        }
        for (i, fs) in self.storage.filesystems.iter().enumerate() {
            if !fs.mount_options.is_empty() {
                need(format!("storage.filesystems[{i}].mountOptions"), v3_1);
            }
            if fs.format.as_deref() == Some("none") {
                need(
                    format!("storage.filesystems[{i}].format"),
                    SpecVersion::V3_3,
                );
            }
        }
        for (i, d) in self.storage.disks.iter().enumerate() {
            for (j, p) in d.partitions.iter().enumerate() {
                if p.resize.is_some() {
                    need(
                        format!("storage.disks[{i}].partitions[{j}].resize"),
                        SpecVersion::V3_2,
                    );
                }
            }
        }
        for (i, l) in self.storage.luks.iter().enumerate() {
            need(format!("storage.luks[{i}]"), SpecVersion::V3_2);
            if l.discard.is_some() {
                need(format!("storage.luks[{i}].discard"), SpecVersion::V3_4);
            }
            if !l.open_options.is_empty() {
                need(format!("storage.luks[{i}].openOptions"), SpecVersion::V3_4);
            }
            if l.cex.is_some() {
                need(format!("storage.luks[{i}].cex"), SpecVersion::V3_5);
            }
        }
        for (i, u) in self.passwd.users.iter().enumerate() {
            if u.should_exist.is_some() {
                need(format!("passwd.users[{i}].shouldExist"), SpecVersion::V3_2);
            }
        }
        for (i, g) in self.passwd.groups.iter().enumerate() {
            if g.should_exist.is_some() {
                need(format!("passwd.groups[{i}].shouldExist"), SpecVersion::V3_2);
            }
        }
        if !self.kernel_arguments.is_empty() {
            need("kernelArguments".into(), SpecVersion::V3_3);
        }
        out
    }

    /// Serialises this config as Ignition of spec `version`, refusing (with every offending
    /// field) what that version cannot express.
    pub fn to_version(
        &self,
        version: SpecVersion,
    ) -> Result<serde_json::Value, Vec<TranslateError>> {
        let mut errors: Vec<TranslateError> = self
            .fields_needing_newer(version)
            .into_iter()
            .map(|(path, min)| {
                terr(
                    path,
                    format!("needs Ignition spec {min} or newer; the target asked for {version}"),
                )
            })
            .collect();
        if version.is_v2() {
            let v2 = self.to_v2(version, &mut errors);
            if errors.is_empty() {
                return serde_json::to_value(v2).map_err(|e| vec![terr("", e.to_string())]);
            }
            return Err(errors);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut out = self.clone();
        out.ignition.version = Some(version.as_str().to_string());
        serde_json::to_value(out).map_err(|e| vec![terr("", e.to_string())])
    }

    fn to_v2(&self, version: SpecVersion, errors: &mut Vec<TranslateError>) -> V2Config {
        let mut out = V2Config::default();
        out.ignition.version = Some(version.as_str().to_string());
        out.ignition.config.append = self.ignition.config.merge.clone();
        if !self.ignition.config.replace.is_empty() {
            out.ignition.config.replace = Some(self.ignition.config.replace.clone());
        }
        out.ignition.security = self.ignition.security.clone();
        out.ignition.timeouts = self.ignition.timeouts.clone();
        for (i, fs) in self.storage.filesystems.iter().enumerate() {
            if fs.path.as_deref().is_some_and(|p| p != "/") {
                errors.push(terr(
                    format!("storage.filesystems[{i}].path"),
                    "a filesystem mounted at a path cannot be expressed in spec 2.x (2.x has no mount points); ask for a 3.x version",
                ));
            }
            out.storage.filesystems.push(V2Filesystem {
                name: Some(format!("fs{i}")),
                mount: Some(V2Mount {
                    device: fs.device.clone(),
                    format: fs.format.clone(),
                    label: fs.label.clone(),
                    options: fs.options.clone(),
                    uuid: fs.uuid.clone(),
                    wipe_filesystem: fs.wipe_filesystem,
                    create: None,
                }),
                path: None,
            });
        }
        out.storage.disks = self.storage.disks.clone();
        out.storage.raid = self.storage.raid.clone();
        let root = Some("root".to_string());
        for (i, f) in self.storage.files.iter().enumerate() {
            let (contents, append) = match (f.contents.is_empty(), f.append.len()) {
                (_, 0) => (Some(f.contents.clone()), None),
                (true, 1) => (Some(f.append[0].clone()), Some(true)),
                _ => {
                    errors.push(terr(
                        format!("storage.files[{i}].append"),
                        "spec 2.x can append exactly one fragment and only without contents; ask for a 3.x version",
                    ));
                    (None, None)
                }
            };
            out.storage.files.push(V2Node {
                filesystem: root.clone(),
                path: f.path.clone(),
                append,
                contents,
                mode: f.mode,
                overwrite: f.overwrite,
                user: Some(f.user.clone()).filter(|u| !u.is_empty()),
                group: Some(f.group.clone()).filter(|g| !g.is_empty()),
                target: None,
                hard: None,
            });
        }
        for d in &self.storage.directories {
            out.storage.directories.push(V2Node {
                filesystem: root.clone(),
                path: d.path.clone(),
                mode: d.mode,
                overwrite: d.overwrite,
                user: Some(d.user.clone()).filter(|u| !u.is_empty()),
                group: Some(d.group.clone()).filter(|g| !g.is_empty()),
                ..Default::default()
            });
        }
        for l in &self.storage.links {
            out.storage.links.push(V2Node {
                filesystem: root.clone(),
                path: l.path.clone(),
                overwrite: l.overwrite,
                user: Some(l.user.clone()).filter(|u| !u.is_empty()),
                group: Some(l.group.clone()).filter(|g| !g.is_empty()),
                target: l.target.clone(),
                hard: l.hard,
                ..Default::default()
            });
        }
        out.systemd.units = self
            .systemd
            .units
            .iter()
            .map(|u| V2Unit {
                name: u.name.clone(),
                contents: u.contents.clone(),
                dropins: u.dropins.clone(),
                enable: None,
                enabled: u.enabled,
                mask: u.mask,
            })
            .collect();
        out.passwd.groups = self.passwd.groups.clone();
        out.passwd.users = self
            .passwd
            .users
            .iter()
            .map(|u| V2User {
                name: u.name.clone(),
                create: None,
                gecos: u.gecos.clone(),
                groups: u.groups.clone(),
                home_dir: u.home_dir.clone(),
                no_create_home: u.no_create_home,
                no_log_init: u.no_log_init,
                no_user_group: u.no_user_group,
                password_hash: u.password_hash.clone(),
                primary_group: u.primary_group.clone(),
                shell: u.shell.clone(),
                ssh_authorized_keys: u.ssh_authorized_keys.clone(),
                system: u.system,
                uid: u.uid,
            })
            .collect();
        out
    }
}

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

    #[test]
    fn v2_duplicates_merge_like_the_mco() {
        let v2 = V2Config {
            storage: V2Storage {
                files: vec![
                    V2Node {
                        filesystem: Some("root".into()),
                        path: "/etc/a".into(),
                        contents: Some(Resource {
                            source: Some("data:,one".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    V2Node {
                        filesystem: Some("root".into()),
                        path: "/etc/a".into(),
                        contents: Some(Resource {
                            source: Some("data:,two".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            systemd: V2Systemd {
                units: vec![
                    V2Unit {
                        name: "a.service".into(),
                        dropins: vec![Dropin {
                            name: "1.conf".into(),
                            contents: Some("x".into()),
                        }],
                        ..Default::default()
                    },
                    V2Unit {
                        name: "a.service".into(),
                        enable: Some(true),
                        dropins: vec![Dropin {
                            name: "2.conf".into(),
                            contents: Some("y".into()),
                        }],
                        ..Default::default()
                    },
                ],
            },
            passwd: V2Passwd {
                users: vec![
                    V2User {
                        name: "core".into(),
                        ssh_authorized_keys: vec!["k1".into()],
                        ..Default::default()
                    },
                    V2User {
                        name: "core".into(),
                        ssh_authorized_keys: vec!["k2".into(), "k1".into()],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            ..Default::default()
        };
        let v3 = v2.into_v3().unwrap();
        assert_eq!(v3.storage.files.len(), 1);
        assert_eq!(
            v3.storage.files[0].contents.source.as_deref(),
            Some("data:,two")
        );
        assert_eq!(v3.storage.files[0].overwrite, Some(true));
        assert_eq!(v3.systemd.units.len(), 1);
        assert_eq!(v3.systemd.units[0].enabled, Some(true));
        let names: Vec<_> = v3.systemd.units[0]
            .dropins
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["1.conf", "2.conf"]);
        assert_eq!(v3.passwd.users.len(), 1);
        assert_eq!(v3.passwd.users[0].ssh_authorized_keys, ["k1", "k2"]);
    }

    #[test]
    fn down_conversion_refuses_what_old_versions_lack() {
        let mut c = Config::default();
        c.kernel_arguments.should_exist.push("enforcing=0".into());
        let errs = c.to_version(SpecVersion::V3_2).unwrap_err();
        assert_eq!(errs[0].path, "kernelArguments");
        assert!(errs[0].message.contains("3.3.0"));
        assert!(c.to_version(SpecVersion::V3_3).is_ok());
    }

    #[test]
    fn networkd_is_refused_with_advice() {
        let v2 = V2Config {
            networkd: V2Networkd {
                units: vec![serde_json::json!({"name": "a.network"})],
            },
            ..Default::default()
        };
        let errs = v2.into_v3().unwrap_err();
        assert_eq!(errs[0].path, "networkd.units");
        assert!(errs[0].message.contains("/etc/systemd/network"));
    }
}
