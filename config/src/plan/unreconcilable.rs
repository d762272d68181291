//! Unreconcilable changes: every changed field the MCO cannot apply on day 2 (users other than
//! `core`, groups, directories, links, the disk layout, appends, Ignition kernel arguments, the
//! `ignition` section, FIPS), each with what to do instead.

use super::action::CORE_USER;
use super::entries::keyed;
use super::output::Unreconcilable;
use crate::ignition::{Config, User};
use crate::model::MachineConfigSpec;

const REPROVISION: &str = "re-provision the node";

fn push(out: &mut Vec<Unreconcilable>, path: String, reason: String) {
    out.push(Unreconcilable { path, reason });
}

/// Every added, changed or removed entry of a keyed list, as unreconcilable.
fn keyed_changes<'a, T: PartialEq>(
    out: &mut Vec<Unreconcilable>,
    field: &str,
    what: &str,
    advice: &str,
    cur: &'a [T],
    des: &'a [T],
    key: impl Fn(&'a T) -> &'a str + Copy,
) {
    let c = keyed(cur, key);
    let d = keyed(des, key);
    for (k, (i, item)) in &d {
        let verb = match c.get(k) {
            None => "added",
            Some((_, old)) if *old != *item => "changed",
            Some(_) => continue,
        };
        push(
            out,
            format!("spec.config.{field}[{i}]"),
            format!("{what} {k:?} {verb}: {advice}"),
        );
    }
    for (k, (j, _)) in &c {
        if !d.contains_key(k) {
            push(
                out,
                format!("spec.config.{field}[{j}]"),
                format!("{what} {k:?} removed: {advice}"),
            );
        }
    }
}

type UserField = (&'static str, fn(&User) -> String);

/// The fields of a user other than `name`, `sshAuthorizedKeys` and `passwordHash`.
const OTHER_USER_FIELDS: [UserField; 11] = [
    ("gecos", |u| format!("{:?}", u.gecos)),
    ("groups", |u| format!("{:?}", u.groups)),
    ("homeDir", |u| format!("{:?}", u.home_dir)),
    ("noCreateHome", |u| format!("{:?}", u.no_create_home)),
    ("noLogInit", |u| format!("{:?}", u.no_log_init)),
    ("noUserGroup", |u| format!("{:?}", u.no_user_group)),
    ("primaryGroup", |u| format!("{:?}", u.primary_group)),
    ("shell", |u| format!("{:?}", u.shell)),
    ("shouldExist", |u| format!("{:?}", u.should_exist)),
    ("system", |u| format!("{:?}", u.system)),
    ("uid", |u| format!("{:?}", u.uid)),
];

fn unreconcilable_users(out: &mut Vec<Unreconcilable>, cur: &Config, des: &Config) {
    let c = keyed(&cur.passwd.users, |u| u.name.as_str());
    let d = keyed(&des.passwd.users, |u| u.name.as_str());
    let only_core = "only user core can be managed on day 2 (its sshAuthorizedKeys and \
                     passwordHash)";
    for (name, (i, user)) in &d {
        if *name == CORE_USER {
            continue;
        }
        let path = format!("spec.config.passwd.users[{i}]");
        match c.get(name) {
            None => push(
                out,
                path,
                format!("user {name:?} added: {only_core}; {REPROVISION} to create it"),
            ),
            Some((_, old)) if *old != *user => push(
                out,
                path,
                format!("user {name:?} changed: {only_core}; {REPROVISION} to change it"),
            ),
            Some(_) => {}
        }
    }
    for (name, (j, _)) in &c {
        if *name != CORE_USER && !d.contains_key(name) {
            push(
                out,
                format!("spec.config.passwd.users[{j}]"),
                format!(
                    "user {name:?} removed: {only_core}, and hearth does not delete users; \
                     remove it by hand or {REPROVISION}"
                ),
            );
        }
    }
    let default_core = User {
        name: CORE_USER.to_string(),
        ..Default::default()
    };
    let (ci, cu) = c
        .get(CORE_USER)
        .map_or((None, &default_core), |(i, u)| (Some(*i), *u));
    let (di, du) = d
        .get(CORE_USER)
        .map_or((None, &default_core), |(i, u)| (Some(*i), *u));
    let Some(index) = di.or(ci) else {
        return;
    };
    for (field, get) in OTHER_USER_FIELDS {
        if get(cu) != get(du) {
            push(
                out,
                format!("spec.config.passwd.users[{index}].{field}"),
                format!(
                    "user \"core\": only sshAuthorizedKeys and passwordHash can change on day 2, \
                     not {field}; {REPROVISION}"
                ),
            );
        }
    }
}
pub(super) fn unreconcilable(
    current: &MachineConfigSpec,
    desired: &MachineConfigSpec,
) -> Vec<Unreconcilable> {
    let cur = &current.config;
    let des = &desired.config;
    let mut out = Vec::new();

    unreconcilable_users(&mut out, cur, des);
    if let Some((i, reason)) = crate::mco::core_lockout(cur, des) {
        push(
            &mut out,
            format!("spec.config.passwd.users[{i}].sshAuthorizedKeys"),
            reason,
        );
    }
    keyed_changes(
        &mut out,
        "passwd.groups",
        "group",
        &format!("groups are only created when a node is provisioned; {REPROVISION}"),
        &cur.passwd.groups,
        &des.passwd.groups,
        |g| g.name.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.directories",
        "directory",
        &format!(
            "Ignition directories are only created when a node is provisioned; {REPROVISION}, \
             or manage the directory with a systemd-tmpfiles rule (a file under /etc/tmpfiles.d/)"
        ),
        &cur.storage.directories,
        &des.storage.directories,
        |d| d.path.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.links",
        "link",
        &format!(
            "Ignition links are only created when a node is provisioned; {REPROVISION}, or \
             manage the link with a systemd-tmpfiles rule (a file under /etc/tmpfiles.d/)"
        ),
        &cur.storage.links,
        &des.storage.links,
        |l| l.path.as_str(),
    );
    let layout =
        format!("the disk layout is only applied when a node is provisioned; {REPROVISION}");
    keyed_changes(
        &mut out,
        "storage.disks",
        "disk",
        &layout,
        &cur.storage.disks,
        &des.storage.disks,
        |d| d.device.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.raid",
        "RAID array",
        &layout,
        &cur.storage.raid,
        &des.storage.raid,
        |r| r.name.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.filesystems",
        "filesystem",
        &layout,
        &cur.storage.filesystems,
        &des.storage.filesystems,
        |f| f.device.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.luks",
        "LUKS volume",
        &layout,
        &cur.storage.luks,
        &des.storage.luks,
        |l| l.name.as_str(),
    );

    let cur_files = keyed(&cur.storage.files, |f| f.path.as_str());
    for (path, (i, file)) in keyed(&des.storage.files, |f| f.path.as_str()) {
        let changed = cur_files
            .get(path)
            .is_none_or(|(_, old)| !crate::mco::same_file(old, file));
        if changed && !file.append.is_empty() {
            push(
                &mut out,
                format!("spec.config.storage.files[{i}].append"),
                format!(
                    "file {path}: appending is not idempotent, so it only happens when a node is \
                     provisioned; give the whole file as contents instead"
                ),
            );
        }
    }

    let kargs = "Ignition kernel arguments are only applied at first boot; use the \
                 MachineConfig's spec.kernelArguments, which hearth applies on day 2";
    if cur.kernel_arguments.should_exist != des.kernel_arguments.should_exist {
        push(
            &mut out,
            "spec.config.kernelArguments.shouldExist".into(),
            kargs.into(),
        );
    }
    if cur.kernel_arguments.should_not_exist != des.kernel_arguments.should_not_exist {
        push(
            &mut out,
            "spec.config.kernelArguments.shouldNotExist".into(),
            kargs.into(),
        );
    }

    let first_boot = format!(
        "the ignition section only matters when Ignition runs at first boot; {REPROVISION} for \
         it to take effect, or drop the change"
    );
    let ci = &cur.ignition;
    let di = &des.ignition;
    let sections: [(&str, bool); 7] = [
        ("config.merge", ci.config.merge != di.config.merge),
        ("config.replace", ci.config.replace != di.config.replace),
        (
            "proxy.httpProxy",
            ci.proxy.http_proxy != di.proxy.http_proxy,
        ),
        (
            "proxy.httpsProxy",
            ci.proxy.https_proxy != di.proxy.https_proxy,
        ),
        ("proxy.noProxy", ci.proxy.no_proxy != di.proxy.no_proxy),
        (
            "security.tls.certificateAuthorities",
            ci.security.tls.certificate_authorities != di.security.tls.certificate_authorities,
        ),
        ("timeouts", ci.timeouts != di.timeouts),
    ];
    for (field, changed) in sections {
        if changed {
            push(
                &mut out,
                format!("spec.config.ignition.{field}"),
                first_boot.clone(),
            );
        }
    }

    if current.fips != desired.fips {
        push(
            &mut out,
            "spec.fips".into(),
            format!(
                "FIPS mode cannot be switched on a running node ({} -> {}); {REPROVISION}",
                current.fips, desired.fips
            ),
        );
    }
    out
}
