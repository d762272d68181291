//! The internal model of an Ignition config: the spec 3.5.0 field set, and which 3.x version
//! each field needs ([`Config::fields_needing_newer`]).

use super::empty::EmptyValue;
use super::version::SpecVersion;
use serde::{Deserialize, Serialize};

fn is_false(b: &Option<bool>) -> bool {
    b.is_none()
}

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
}
