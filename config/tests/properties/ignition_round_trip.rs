//! Ignition 2.2 -> 3.x -> 2.2: translation both ways keeps the content (with the 2.x generators).

use super::generators::{
    data_url, dedup_by, dropin, owner, unit_text, DIR_PATHS, LINK_PATHS, MODES, PATHS, SSH_KEYS,
    UNITS,
};
use hearth_config::ignition::{
    Config, Group, Resource, SpecVersion, Timeouts, V2Config, V2Ignition, V2Node, V2Passwd,
    V2Storage, V2Systemd, V2Unit, V2User, Verification,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use sha2::{Digest, Sha512};

fn v2_resource() -> impl Strategy<Value = Resource> {
    (
        data_url(),
        prop::option::of(Just("gzip".to_string())),
        any::<bool>(),
    )
        .prop_map(|(source, compression, hashed)| Resource {
            verification: Verification {
                hash: hashed.then(|| format!("sha512-{}", hex::encode(Sha512::digest(&source)))),
            },
            source: Some(source),
            compression,
            http_headers: Vec::new(),
        })
}

fn v2_file() -> impl Strategy<Value = V2Node> {
    (
        select(&PATHS[..]),
        prop::option::of(v2_resource()),
        prop::option::of(any::<bool>()),
        prop::option::of(select(&MODES[..])),
        prop::option::of(any::<bool>()),
        prop::option::of(owner()),
        prop::option::of(owner()),
    )
        .prop_map(
            |(path, contents, append, mode, overwrite, user, group)| V2Node {
                filesystem: Some("root".into()),
                path: path.into(),
                append,
                contents,
                mode,
                overwrite,
                user,
                group,
                target: None,
                hard: None,
            },
        )
}

fn v2_directory() -> impl Strategy<Value = V2Node> {
    (
        select(&DIR_PATHS[..]),
        prop::option::of(select(&MODES[..])),
        prop::option::of(any::<bool>()),
        prop::option::of(owner()),
    )
        .prop_map(|(path, mode, overwrite, user)| V2Node {
            filesystem: Some("root".into()),
            path: path.into(),
            mode,
            overwrite,
            user,
            ..Default::default()
        })
}

fn v2_link() -> impl Strategy<Value = V2Node> {
    (
        select(&LINK_PATHS[..]),
        select(&PATHS[..]),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(path, target, hard, overwrite)| V2Node {
            filesystem: Some("root".into()),
            path: path.into(),
            target: Some(target.into()),
            hard,
            overwrite,
            ..Default::default()
        })
}

fn v2_unit() -> impl Strategy<Value = V2Unit> {
    (
        select(&UNITS[..]),
        prop::option::of(unit_text()),
        vec(dropin(), 0..3),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, contents, dropins, enable, enabled, mask)| V2Unit {
            name: name.into(),
            contents,
            dropins: dedup_by(dropins, |d| d.name.clone()),
            enable,
            enabled,
            mask,
        })
}

fn v2_user() -> impl Strategy<Value = V2User> {
    (
        select(&["core", "alice", "bob"][..]),
        vec(select(&SSH_KEYS[..]), 0..4),
        prop::option::of(select(&["/bin/bash", "/sbin/nologin"][..])),
        prop::option::of(1000i64..2000),
        vec(select(&["wheel", "sudo", "docker"][..]), 0..3),
        prop::option::of("[A-Za-z ]{0,12}"),
    )
        .prop_map(|(name, keys, shell, uid, groups, gecos)| V2User {
            name: name.into(),
            ssh_authorized_keys: keys.into_iter().map(String::from).collect(),
            shell: shell.map(String::from),
            uid,
            groups: groups.into_iter().map(String::from).collect(),
            gecos,
            ..Default::default()
        })
}

/// A 2.2 config without duplicate keys (duplicates are merged on the way in, by design, so they
/// cannot round-trip).
fn v2_config() -> impl Strategy<Value = V2Config> {
    (
        vec(v2_file(), 0..6),
        vec(v2_directory(), 0..3),
        vec(v2_link(), 0..3),
        vec(v2_unit(), 0..4),
        vec(v2_user(), 0..3),
        vec(
            (
                select(&["wheel", "hearth"][..]),
                prop::option::of(100i64..200),
            ),
            0..2,
        ),
        prop::option::of((prop::option::of(1i64..60), prop::option::of(1i64..600))),
    )
        .prop_map(|(files, dirs, links, units, users, groups, timeouts)| {
            let mut c = V2Config {
                ignition: V2Ignition {
                    version: Some("2.2.0".into()),
                    ..Default::default()
                },
                storage: V2Storage {
                    files: dedup_by(files, |f| f.path.clone()),
                    directories: dedup_by(dirs, |d| d.path.clone()),
                    links: dedup_by(links, |l| l.path.clone()),
                    ..Default::default()
                },
                systemd: V2Systemd {
                    units: dedup_by(units, |u| u.name.clone()),
                },
                passwd: V2Passwd {
                    users: dedup_by(users, |u| u.name.clone()),
                    groups: dedup_by(
                        groups
                            .into_iter()
                            .map(|(name, gid)| Group {
                                name: name.into(),
                                gid,
                                ..Default::default()
                            })
                            .collect(),
                        |g| g.name.clone(),
                    ),
                },
                ..Default::default()
            };
            if let Some((headers, total)) = timeouts {
                c.ignition.timeouts = Timeouts {
                    http_response_headers: headers,
                    http_total: total,
                };
            }
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// 2.x -> 3.x -> 2.x -> 3.x gives the same 3.x config: writing a config back in the MCO's
    /// old format (and reading it again) loses nothing.
    #[test]
    fn v2_to_v3_and_back_keeps_content(v2 in v2_config()) {
        let v3 = v2.clone().into_v3().unwrap();

        // The translation kept what was written.
        prop_assert_eq!(v3.storage.files.len(), v2.storage.files.len());
        for (f2, f3) in v2.storage.files.iter().zip(&v3.storage.files) {
            prop_assert_eq!(&f2.path, &f3.path);
            prop_assert_eq!(f2.mode, f3.mode);
            prop_assert_eq!(f3.overwrite, Some(f2.overwrite.unwrap_or(true)));
            let content = f2.contents.clone().unwrap_or_default();
            if f2.append == Some(true) {
                prop_assert_eq!(&f3.append, &vec![content]);
            } else {
                prop_assert_eq!(&f3.contents, &content);
            }
        }
        prop_assert_eq!(v3.storage.directories.len(), v2.storage.directories.len());
        prop_assert_eq!(v3.storage.links.len(), v2.storage.links.len());
        prop_assert_eq!(v3.systemd.units.len(), v2.systemd.units.len());
        for (u2, u3) in v2.systemd.units.iter().zip(&v3.systemd.units) {
            prop_assert_eq!(&u2.name, &u3.name);
            prop_assert_eq!(&u2.contents, &u3.contents);
            prop_assert_eq!(&u2.dropins, &u3.dropins);
            prop_assert_eq!(u2.mask, u3.mask);
        }
        prop_assert_eq!(v3.passwd.users.len(), v2.passwd.users.len());
        for (a, b) in v2.passwd.users.iter().zip(&v3.passwd.users) {
            // Each key once, first occurrence first (the MCO's dedupePasswdUserSSHKeys).
            let mut once = a.ssh_authorized_keys.clone();
            hearth_config::mco::dedup_ssh_keys(&mut once);
            prop_assert_eq!(&once, &b.ssh_authorized_keys);
        }

        for version in [SpecVersion::V2_2, SpecVersion::V2_3, SpecVersion::V2_4] {
            let json = v3.to_version(version).unwrap();
            prop_assert_eq!(json["ignition"]["version"].as_str(), Some(version.as_str()));
            let back: V2Config = serde_json::from_value(json).unwrap();
            let v3_again = back.into_v3().unwrap();
            prop_assert_eq!(&v3_again, &v3, "through {}", version);
        }
    }

    /// A config that needs no newer feature survives 3.5 -> 3.x -> 3.5 for every 3.x.
    #[test]
    fn v3_down_and_up_keeps_content(v2 in v2_config()) {
        let v3 = v2.into_v3().unwrap();
        for version in SpecVersion::ALL.into_iter().filter(|v| !v.is_v2()) {
            let json = v3.to_version(version).unwrap();
            prop_assert_eq!(json["ignition"]["version"].as_str(), Some(version.as_str()));
            let mut back: Config = serde_json::from_value(json).unwrap();
            back.ignition.version = v3.ignition.version.clone();
            prop_assert_eq!(&back, &v3, "through {}", version);
        }
    }
}
