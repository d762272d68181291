//! Semantic validation of a decoded MachineConfig: what the YAML shape cannot say.
//!
//! Paths are absolute and clean, nothing is defined twice, inline contents decode (and match
//! their `verification.hash`), modes are permission bits, unit and drop-in names are valid, and no
//! content is fetched from a remote URL (day-2 configs are applied by nodes in disconnected data
//! centres: the content must be in the manifest).

use crate::dataurl;
use crate::ignition::{Config, Resource, SpecVersion};
use crate::model::MachineConfigSpec;
use crate::unit_name;
use sha2::{Digest, Sha256, Sha512};
use std::collections::HashMap;

use crate::finding::Finding;

fn error(path: String, message: impl Into<String>) -> Finding {
    Finding::error(path, message)
}

fn warning(path: String, message: impl Into<String>) -> Finding {
    Finding::warning(path, message)
}

/// Checks an absolute path: returns what is wrong with it, if anything.
pub fn check_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("path is empty".into());
    }
    if !path.starts_with('/') {
        return Some(format!(
            "path {path:?} is relative; it must be absolute (start with /)"
        ));
    }
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return Some(format!(
            "path {path:?} contains the control character {c:?}; write the path without it"
        ));
    }
    if path.len() > PATH_MAX {
        return Some(format!(
            "path is {} bytes long; Linux paths are at most {PATH_MAX} bytes",
            path.len()
        ));
    }
    if let Some(long) = path.split('/').find(|c| c.len() > NAME_MAX) {
        return Some(format!(
            "path component {:?}… is {} bytes long; Linux file names are at most {NAME_MAX} bytes",
            long.chars().take(20).collect::<String>(),
            long.len()
        ));
    }
    if path != "/" && path.ends_with('/') {
        return Some(format!(
            "path {path:?} ends with '/'; name the file, not a directory"
        ));
    }
    for comp in path.split('/').skip(1) {
        match comp {
            ".." => {
                return Some(format!(
                    "path {path:?} contains '..'; write the path without it"
                ))
            }
            "." => {
                return Some(format!(
                    "path {path:?} contains '.'; write the path without it"
                ))
            }
            "" => return Some(format!("path {path:?} contains an empty component ('//')")),
            _ => {}
        }
    }
    if path == "/" {
        return Some("path \"/\" is the root directory, not a file".into());
    }
    None
}

/// Linux's `PATH_MAX`: the longest path a file can be written at.
pub const PATH_MAX: usize = 4096;
/// Linux's `NAME_MAX`: the longest file name (path component).
pub const NAME_MAX: usize = 255;

/// Virtual filesystems: the kernel's (`/proc`, `/sys`) and udev's (`/dev`). A file cannot be
/// replaced there atomically (write a temporary file, rename it over), and what is written does
/// not survive a reboot, so hearth refuses paths under them and says what to use instead.
const VIRTUAL_ROOTS: [(&str, &str); 3] = [
    (
        "/proc",
        "set kernel tunables with a file under /etc/sysctl.d/ instead",
    ),
    (
        "/sys",
        "set sysfs attributes with a udev rule (/etc/udev/rules.d/) or a systemd-tmpfiles rule (/etc/tmpfiles.d/) instead",
    ),
    (
        "/dev",
        "create or configure devices with a udev rule (/etc/udev/rules.d/) instead",
    ),
];

/// What is wrong with writing `path` because it is on a virtual filesystem, if it is.
pub fn check_virtual_path(path: &str) -> Option<String> {
    VIRTUAL_ROOTS.iter().find_map(|(root, advice)| {
        let under = path == *root || path.strip_prefix(root).is_some_and(|r| r.starts_with('/'));
        under.then(|| {
            format!(
                "{path} is on the virtual filesystem {root}, which hearth does not write to (it cannot replace files there atomically and nothing there survives a reboot); {advice}"
            )
        })
    })
}

/// Checks a unit name against systemd's grammar: `NAME.TYPE` (or `NAME@INSTANCE.TYPE`,
/// `NAME@.TYPE`) of at most 255 bytes, with letters, digits and `:-_.\@` only.
pub fn check_unit_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("unit name is empty".into());
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Some(format!(
            "unit name {name:?} contains the control character {c:?}; a unit name is a plain file name"
        ));
    }
    if name.contains('/') {
        return Some(format!(
            "unit name {name:?} must not contain '/': it is a file name in /etc/systemd/system, not a path"
        ));
    }
    if name.len() > unit_name::MAX_LEN {
        return Some(format!(
            "unit name is {} bytes long; systemd allows at most {}",
            name.len(),
            unit_name::MAX_LEN
        ));
    }
    if let Some(c) = name.chars().find(|&c| !unit_name::valid_char(c)) {
        return Some(format!(
            "unit name {name:?} contains {c:?}, which systemd does not allow in unit names (letters, digits and \":-_.\\@\" only; systemd-escape turns other text into a valid name)"
        ));
    }
    let suffix = name
        .rsplit_once('.')
        .map(|(_, t)| t)
        .filter(|t| unit_name::UNIT_TYPES.contains(t));
    let Some(suffix) = suffix else {
        let types: Vec<String> = unit_name::UNIT_TYPES
            .iter()
            .map(|t| format!(".{t}"))
            .collect();
        return Some(format!(
            "unit name {name:?} has no valid unit type suffix (one of {})",
            types.join(", ")
        ));
    };
    let stem = &name[..name.len() - suffix.len() - 1];
    if stem.is_empty() || stem.starts_with('@') {
        return Some(format!(
            "unit name {name:?} has no name before {}",
            if stem.is_empty() {
                format!(".{suffix}")
            } else {
                "'@'".to_string()
            }
        ));
    }
    // Every rule above is a part of the one grammar; whatever passed them parses.
    debug_assert!(unit_name::parse(name).is_some(), "{name}");
    None
}

/// Checks a drop-in file name: a plain file name ending in `.conf`.
pub fn check_dropin_name(name: &str) -> Option<String> {
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Some(format!(
            "drop-in name {name:?} contains the control character {c:?}; a drop-in name is a plain file name"
        ));
    }
    if name.contains('/') {
        return Some(format!(
            "drop-in name {name:?} must not contain '/': it is a file name in the unit's .d directory, not a path"
        ));
    }
    if name.len() > NAME_MAX {
        return Some(format!(
            "drop-in name is {} bytes long; file names are at most {NAME_MAX} bytes",
            name.len()
        ));
    }
    if name.len() <= ".conf".len() || !name.ends_with(".conf") {
        return Some(format!(
            "drop-in name {name:?} must be a file name ending in .conf (systemd reads only those)"
        ));
    }
    None
}

/// The most file contents (decoded and decompressed, appends, `ignition.config` and certificate
/// authorities included) one MachineConfig, or one rendered config, may hold in total: the same
/// as [`dataurl::MAX_DECODED_BYTES`] for a single file, so one maximal file still fits, while
/// twelve of them no longer make the node write 3 GB in one update. (The MCO keeps configs in
/// etcd, whose objects are at most about 1.5 MiB: real configs are far below this.)
pub const MAX_CONFIG_CONTENTS_BYTES: usize = 256 * 1024 * 1024;

/// How much of [`MAX_CONFIG_CONTENTS_BYTES`] is left while a config's contents are checked.
struct ContentsBudget {
    left: usize,
    /// Set once the limit was crossed (reported once, at the entry that crossed it).
    exhausted: bool,
}

impl ContentsBudget {
    fn new() -> Self {
        ContentsBudget {
            left: MAX_CONFIG_CONTENTS_BYTES,
            exhausted: false,
        }
    }

    /// Decodes (`keep`) or counts the contents of `source` within what is left; `Ok(None)` once
    /// the budget is exhausted (nothing more is decoded).
    fn take(
        &mut self,
        path: &str,
        source: &str,
        compression: Option<&str>,
        keep: bool,
        out: &mut Vec<Finding>,
    ) -> Result<Option<Vec<u8>>, dataurl::DataUrlError> {
        if self.exhausted {
            return Ok(None);
        }
        let result = if keep {
            dataurl::decode_limited(source, compression, self.left).map(|c| (c.len(), Some(c)))
        } else {
            dataurl::decoded_len(source, compression, self.left).map(|n| (n, None))
        };
        match result {
            Ok((n, content)) => {
                self.left -= n;
                Ok(content.or(Some(Vec::new())))
            }
            Err(dataurl::DataUrlError::TooLarge) if self.left < dataurl::MAX_DECODED_BYTES => {
                self.exhausted = true;
                out.push(error(
                    format!("{path}.source"),
                    format!(
                        "with this entry the config's file contents exceed {} MiB in total (decoded), hearth's limit for a MachineConfig and for a rendered config; ship large payloads in the OS image or split them over pools, not in one config",
                        MAX_CONFIG_CONTENTS_BYTES >> 20
                    ),
                ));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Checks that a config's contents stay within [`MAX_CONFIG_CONTENTS_BYTES`] in total, counting
/// decoded sizes without keeping the contents: for rendered configs, whose entries were each
/// checked when their MachineConfig was read but whose total is new. Contents that cannot be
/// decoded are left to [`validate_config`].
pub fn check_contents_total(base: &str, config: &Config, out: &mut Vec<Finding>) {
    let mut budget = ContentsBudget::new();
    for_each_resource(base, config, |path, r| {
        if let Some(source) = r
            .source
            .as_deref()
            .filter(|s| dataurl::scheme(s).as_deref() == Some("data"))
        {
            let _ = budget.take(path, source, r.compression.as_deref(), false, out);
        }
    });
}

/// Calls `f` with every resource of a config that has contents, in document order, with its
/// field path.
fn for_each_resource(base: &str, config: &Config, mut f: impl FnMut(&str, &Resource)) {
    for (i, file) in config.storage.files.iter().enumerate() {
        let p = format!("{base}.storage.files[{i}]");
        f(&format!("{p}.contents"), &file.contents);
        for (j, a) in file.append.iter().enumerate() {
            f(&format!("{p}.append[{j}]"), a);
        }
    }
    for (i, r) in config.ignition.config.merge.iter().enumerate() {
        f(&format!("{base}.ignition.config.merge[{i}]"), r);
    }
    if !config.ignition.config.replace.is_empty() {
        f(
            &format!("{base}.ignition.config.replace"),
            &config.ignition.config.replace,
        );
    }
    for (i, r) in config
        .ignition
        .security
        .tls
        .certificate_authorities
        .iter()
        .enumerate()
    {
        f(
            &format!("{base}.ignition.security.tls.certificateAuthorities[{i}]"),
            r,
        );
    }
}

fn check_resource(
    path: &str,
    r: &Resource,
    budget: &mut ContentsBudget,
    out: &mut Vec<Finding>,
) -> Option<Vec<u8>> {
    let source = r.source.as_deref()?;
    match dataurl::scheme(source).as_deref() {
        Some("data") => {}
        Some(s @ ("http" | "https" | "s3" | "tftp" | "gs" | "arn")) => {
            out.push(error(
                format!("{path}.source"),
                format!(
                    "remote {s}: sources are not allowed in day-2 configs: nodes must not fetch content at apply time; embed the content as a data: URL"
                ),
            ));
            return None;
        }
        Some(other) => {
            out.push(error(
                format!("{path}.source"),
                format!("unsupported URL scheme {other:?}; use a data: URL"),
            ));
            return None;
        }
        None => {
            out.push(error(
                format!("{path}.source"),
                format!("{:?} is not a URL; inline contents must be a data: URL (data:,text or data:;base64,...)", truncate(source)),
            ));
            return None;
        }
    }
    let content = match budget.take(path, source, r.compression.as_deref(), true, out) {
        Ok(Some(c)) => c,
        Ok(None) => return None,
        Err(e @ dataurl::DataUrlError::Compression(_)) => {
            out.push(error(format!("{path}.compression"), e.to_string()));
            return None;
        }
        Err(e) => {
            out.push(error(format!("{path}.source"), e.to_string()));
            return None;
        }
    };
    if let Some(hash) = r.verification.hash.as_deref() {
        let p = format!("{path}.verification.hash");
        match hash.split_once('-') {
            Some(("sha512", hex)) if hex.len() == 128 => {
                let got = hex::encode(Sha512::digest(&content));
                if !got.eq_ignore_ascii_case(hex) {
                    out.push(error(p, format!("content does not match: expected sha512-{hex}, the decoded content has sha512-{got}")));
                }
            }
            Some(("sha256", hex)) if hex.len() == 64 => {
                let got = hex::encode(Sha256::digest(&content));
                if !got.eq_ignore_ascii_case(hex) {
                    out.push(error(p, format!("content does not match: expected sha256-{hex}, the decoded content has sha256-{got}")));
                }
            }
            _ => out.push(error(
                p,
                format!("{hash:?} is not a hash of the form sha512-<128 hex digits> or sha256-<64 hex digits>"),
            )),
        }
    }
    Some(content)
}

fn truncate(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

fn check_mode(path: String, target: &str, mode: Option<i64>, out: &mut Vec<Finding>) {
    if let Some(m) = mode {
        if !(0..=0o7777).contains(&m) {
            out.push(error(
                path,
                format!(
                    "mode {m} (octal {m:o}) is not a permission mode: it must be between 0 and 0o7777 (in YAML write 0644 for rw-r--r--, or 420 in decimal)"
                ),
            ));
        } else if m & 0o7000 != 0 {
            let bits: Vec<&str> = [(0o4000, "setuid"), (0o2000, "setgid"), (0o1000, "sticky")]
                .iter()
                .filter(|(bit, _)| m & bit != 0)
                .map(|(_, name)| *name)
                .collect();
            out.push(error(
                path,
                format!(
                    "mode {m:04o} of {target} sets the {} bit; hearth refuses special mode bits, as the MCO does: write the file with mode {:04o} and set the bit with a systemd unit or tmpfiles.d if you really need it",
                    bits.join(" and "),
                    m & 0o777
                ),
            ));
        }
    }
}

fn check_owner(path: String, owner: &crate::ignition::NodeOwner, out: &mut Vec<Finding>) {
    if owner.id.is_some() && owner.name.is_some() {
        out.push(error(path.clone(), "set either id or name, not both"));
    }
    if let Some(id) = owner.id {
        if !(0..=u32::MAX as i64).contains(&id) {
            out.push(error(
                format!("{path}.id"),
                format!("{id} is not a valid id"),
            ));
        }
    }
}

/// Validates an Ignition config (paths are reported under `base`, usually `spec.config`).
pub fn validate_config(base: &str, config: &Config, out: &mut Vec<Finding>) {
    validate_config_with(base, config, true, out)
}

/// [`validate_config`] without decoding contents: for configs merged from configs whose
/// contents were already checked one by one (rendering), where only the structure can be new.
pub fn validate_structure(base: &str, config: &Config, out: &mut Vec<Finding>) {
    validate_config_with(base, config, false, out)
}

fn validate_config_with(base: &str, config: &Config, contents: bool, out: &mut Vec<Finding>) {
    let mut budget = ContentsBudget::new();
    let mut check_resource = |path: &str, r: &Resource, out: &mut Vec<Finding>| {
        if contents {
            check_resource(path, r, &mut budget, out);
        }
    };
    // Paths are shared between files, directories and links.
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut claim = |path: &str, at: String, out: &mut Vec<Finding>| {
        if let Some(first) = seen.get(path) {
            out.push(error(
                at,
                format!(
                    "{path:?} is already defined at {first}; each path may appear once per config"
                ),
            ));
        } else {
            seen.insert(path.to_string(), at);
        }
    };
    for (i, f) in config.storage.files.iter().enumerate() {
        let p = format!("{base}.storage.files[{i}]");
        if let Some(msg) = check_path(&f.path)
            .or_else(|| check_virtual_path(&f.path))
            .or_else(|| crate::own::check_path(&f.path))
        {
            out.push(error(format!("{p}.path"), msg));
        } else {
            claim(&f.path, format!("{p}.path"), out);
        }
        check_mode(format!("{p}.mode"), &f.path, f.mode, out);
        check_owner(format!("{p}.user"), &f.user, out);
        check_owner(format!("{p}.group"), &f.group, out);
        check_resource(&format!("{p}.contents"), &f.contents, out);
        for (j, a) in f.append.iter().enumerate() {
            check_resource(&format!("{p}.append[{j}]"), a, out);
        }
    }
    for (i, d) in config.storage.directories.iter().enumerate() {
        let p = format!("{base}.storage.directories[{i}]");
        if let Some(msg) = check_path(&d.path)
            .or_else(|| check_virtual_path(&d.path))
            .or_else(|| crate::own::check_path(&d.path))
        {
            out.push(error(format!("{p}.path"), msg));
        } else {
            claim(&d.path, format!("{p}.path"), out);
        }
        check_mode(format!("{p}.mode"), &d.path, d.mode, out);
    }
    for (i, l) in config.storage.links.iter().enumerate() {
        let p = format!("{base}.storage.links[{i}]");
        if let Some(msg) = check_path(&l.path)
            .or_else(|| check_virtual_path(&l.path))
            .or_else(|| crate::own::check_path(&l.path))
        {
            out.push(error(format!("{p}.path"), msg));
        } else {
            claim(&l.path, format!("{p}.path"), out);
        }
        match l.target.as_deref() {
            None | Some("") => out.push(error(format!("{p}.target"), "a link needs a target")),
            Some(target) => {
                if let Some(msg) = crate::own::check_link_target(&l.path, target) {
                    out.push(error(format!("{p}.target"), msg));
                }
            }
        }
    }
    for (i, d) in config.storage.disks.iter().enumerate() {
        if d.device.is_empty() {
            out.push(error(
                format!("{base}.storage.disks[{i}].device"),
                "device is empty",
            ));
        }
    }
    for (i, fs) in config.storage.filesystems.iter().enumerate() {
        if fs.device.is_empty() {
            out.push(error(
                format!("{base}.storage.filesystems[{i}].device"),
                "device is empty",
            ));
        }
    }

    let mut units: HashMap<&str, usize> = HashMap::new();
    for (i, u) in config.systemd.units.iter().enumerate() {
        let p = format!("{base}.systemd.units[{i}]");
        if let Some(msg) = check_unit_name(&u.name) {
            out.push(error(format!("{p}.name"), msg));
        } else if let Some(first) = units.insert(u.name.as_str(), i) {
            out.push(error(
                format!("{p}.name"),
                format!(
                    "unit {:?} is already defined at {base}.systemd.units[{first}]",
                    u.name
                ),
            ));
        }
        if u.mask == Some(true) && u.enabled == Some(true) {
            out.push(error(
                format!("{p}.enabled"),
                "a masked unit cannot be enabled; drop `enabled: true` or `mask: true`",
            ));
        }
        // The agent's own unit takes drop-ins only.
        for (field, set) in [
            ("contents", u.contents.is_some()),
            ("mask", u.mask.is_some()),
            ("enabled", u.enabled.is_some()),
        ] {
            if let Some(msg) = set
                .then(|| crate::own::check_unit(&u.name, field))
                .flatten()
            {
                out.push(error(format!("{p}.{field}"), msg));
            }
        }
        let mut dropins: HashMap<&str, usize> = HashMap::new();
        for (j, d) in u.dropins.iter().enumerate() {
            let dp = format!("{p}.dropins[{j}].name");
            if let Some(msg) = check_dropin_name(&d.name) {
                out.push(error(dp, msg));
            } else if let Some(first) = dropins.insert(d.name.as_str(), j) {
                out.push(error(
                    dp,
                    format!(
                        "drop-in {:?} is already defined at {p}.dropins[{first}]",
                        d.name
                    ),
                ));
            }
        }
    }

    let mut users: HashMap<&str, usize> = HashMap::new();
    for (i, u) in config.passwd.users.iter().enumerate() {
        // Each key becomes one line of authorized_keys: a line break would add a key nobody
        // sees in the manifest.
        for (j, key) in u.ssh_authorized_keys.iter().enumerate() {
            if let Some(c) = key.chars().find(|c| c.is_control() && *c != '\t') {
                out.push(error(
                    format!("{base}.passwd.users[{i}].sshAuthorizedKeys[{j}]"),
                    format!(
                        "SSH key {j} of user {:?} contains the control character {c:?}; a key is one line of text: give each key as its own list entry",
                        u.name
                    ),
                ));
            }
        }
        if let Some(c) = u
            .password_hash
            .as_deref()
            .and_then(|h| h.chars().find(|c| c.is_control()))
        {
            out.push(error(
                format!("{base}.passwd.users[{i}].passwordHash"),
                format!(
                    "the password hash of user {:?} contains the control character {c:?}; a crypt(3) hash is one line of printable text",
                    u.name
                ),
            ));
        }
        let p = format!("{base}.passwd.users[{i}].name");
        if u.name.is_empty() {
            out.push(error(p, "user name is empty"));
        } else if let Some(first) = users.insert(u.name.as_str(), i) {
            out.push(error(
                p,
                format!(
                    "user {:?} is already defined at {base}.passwd.users[{first}]",
                    u.name
                ),
            ));
        }
    }
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for (i, g) in config.passwd.groups.iter().enumerate() {
        let p = format!("{base}.passwd.groups[{i}].name");
        if g.name.is_empty() {
            out.push(error(p, "group name is empty"));
        } else if let Some(first) = groups.insert(g.name.as_str(), i) {
            out.push(error(
                p,
                format!(
                    "group {:?} is already defined at {base}.passwd.groups[{first}]",
                    g.name
                ),
            ));
        }
    }

    for (i, r) in config.ignition.config.merge.iter().enumerate() {
        check_resource(&format!("{base}.ignition.config.merge[{i}]"), r, out);
    }
    if !config.ignition.config.replace.is_empty() {
        check_resource(
            &format!("{base}.ignition.config.replace"),
            &config.ignition.config.replace,
            out,
        );
    }
    for (i, r) in config
        .ignition
        .security
        .tls
        .certificate_authorities
        .iter()
        .enumerate()
    {
        check_resource(
            &format!("{base}.ignition.security.tls.certificateAuthorities[{i}]"),
            r,
            out,
        );
    }
}

/// Validates a MachineConfig spec. `source_version` is the Ignition version the config was
/// written in (fields newer than it are refused, as Ignition itself would).
pub fn validate_spec(spec: &MachineConfigSpec, out: &mut Vec<Finding>) {
    if let Some(v) = spec.source_version.filter(|v| !v.is_v2()) {
        for (path, min) in spec.config.fields_needing_newer(v) {
            out.push(error(
                format!("spec.config.{path}"),
                format!("this field needs Ignition spec {min} or newer, but the config declares {v}; raise spec.config.ignition.version"),
            ));
        }
    }
    validate_config("spec.config", &spec.config, out);
    crate::mco::validate_spec(spec, out);
    crate::actions::validate(&spec.actions, out);
    for (i, k) in spec.kernel_arguments.iter().enumerate() {
        if let Some(msg) = crate::kargs::check_entry(k) {
            out.push(error(format!("spec.kernelArguments[{i}]"), msg));
        }
    }
    for (i, e) in spec.extensions.iter().enumerate() {
        if e.is_empty()
            || !e
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
        {
            out.push(error(
                format!("spec.extensions[{i}]"),
                format!("{e:?} is not an extension name"),
            ));
        }
    }
    if spec.fips {
        out.push(warning(
            "spec.fips".into(),
            "FIPS mode can only be set at installation; a node that is already running will report this as unreconcilable",
        ));
    }
}

/// The Ignition versions hearth reads, for messages.
pub fn supported_versions() -> String {
    SpecVersion::supported_list()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignition::{File, Unit, Verification};

    fn file(path: &str, source: &str) -> File {
        File {
            path: path.into(),
            contents: Resource {
                source: Some(source.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn findings(config: &Config) -> Vec<Finding> {
        let mut out = Vec::new();
        validate_config("spec.config", config, &mut out);
        out
    }

    #[test]
    fn paths() {
        assert!(check_path("/etc/a").is_none());
        assert!(check_path("etc/a").unwrap().contains("relative"));
        assert!(check_path("/etc/../a").unwrap().contains(".."));
        assert!(check_path("/etc//a").unwrap().contains("empty component"));
        assert!(check_path("/etc/").is_some());
        assert!(check_path("").is_some());
    }

    #[test]
    fn duplicates_across_kinds() {
        let mut c = Config::default();
        c.storage.files.push(file("/etc/a", "data:,x"));
        c.storage.files.push(file("/etc/a", "data:,y"));
        let f = findings(&c);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].path, "spec.config.storage.files[1].path");
        assert!(f[0].message.contains("storage.files[0]"));
    }

    #[test]
    fn remote_sources_are_refused() {
        let mut c = Config::default();
        c.storage
            .files
            .push(file("/etc/a", "https://example.invalid/a"));
        let f = findings(&c);
        assert!(f[0].message.contains("remote https"), "{f:?}");
        assert_eq!(f[0].path, "spec.config.storage.files[0].contents.source");
    }

    #[test]
    fn hash_must_match_decoded_content() {
        let mut c = Config::default();
        let mut f = file("/etc/a", "data:,hello");
        f.contents.verification = Verification {
            hash: Some(format!("sha256-{}", hex::encode(Sha256::digest(b"hello")))),
        };
        c.storage.files.push(f.clone());
        assert!(findings(&c).is_empty());
        c.storage.files[0].contents.verification.hash = Some(format!("sha256-{}", "0".repeat(64)));
        let out = findings(&c);
        assert!(out[0].message.contains("does not match"), "{out:?}");
    }

    #[test]
    fn modes_and_units() {
        let mut c = Config::default();
        let mut f = file("/etc/a", "data:,x");
        f.mode = Some(0o17777);
        c.storage.files.push(f);
        c.systemd.units.push(Unit {
            name: "foo".into(),
            ..Default::default()
        });
        let out = findings(&c);
        assert!(out
            .iter()
            .any(|f| f.path.ends_with("mode") && f.message.contains("0o7777")));
        assert!(out.iter().any(|f| f.path.ends_with("units[0].name")));
    }
}
