//! The Ignition spec 2.2-2.4 wire format, as written (read by [`V2Config::into_v3`], written
//! by [`Config::to_version`](super::Config::to_version)).

use super::empty::EmptyValue;
use super::v3::{Disk, Dropin, Group, NodeOwner, Proxy, Raid, Resource, Security, Timeouts};
use serde::{Deserialize, Serialize};

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
