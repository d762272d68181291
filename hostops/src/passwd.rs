//! Users and groups of the TARGET root, never of the machine hearth runs on.
//!
//! hearth may run in a container or against a mounted root whose users differ from the
//! machine's own: `getpwnam(3)` would answer with the wrong user (or none). This module parses
//! the target's files through [`fs::Root`] instead:
//!
//! * `/etc/passwd`, `/etc/group`: the local databases, searched first;
//! * `/usr/lib/passwd`, `/usr/lib/group`: where Fedora CoreOS and RHCOS keep system users
//!   (`nss-altfiles`, configured as `passwd: files altfiles` in `/etc/nsswitch.conf`), searched
//!   second.
//!
//! A name found in both is taken from `/etc`, as NSS does. Comment lines, blank lines, NIS
//! compatibility entries (`+`, `-`) and malformed lines are skipped (the latter with a warning).
//!
//! Ownership follows Ignition: an owner is given by `id` or by `name`; when neither is set it is
//! root (uid 0, gid 0 — the group does *not* default to the user's primary group); an unknown
//! name is an error that names the user or group and the files searched.

use crate::fs::{self, FsError};
use hearth_config::ignition::NodeOwner;
use std::fmt;

/// Where users are looked up, in order.
pub const PASSWD_FILES: [&str; 2] = ["/etc/passwd", "/usr/lib/passwd"];
/// Where groups are looked up, in order.
pub const GROUP_FILES: [&str; 2] = ["/etc/group", "/usr/lib/group"];

/// What went wrong looking up a user or group.
#[derive(Debug, thiserror::Error)]
pub enum PasswdError {
    /// No user of that name in any of the files.
    #[error("user \"{name}\" not found in {} of root {root}", searched.join(", "))]
    UnknownUser {
        /// The name.
        name: String,
        /// The files searched (inside the root).
        searched: Vec<String>,
        /// The root.
        root: String,
    },
    /// No group of that name in any of the files.
    #[error("group \"{name}\" not found in {} of root {root}", searched.join(", "))]
    UnknownGroup {
        /// The name.
        name: String,
        /// The files searched (inside the root).
        searched: Vec<String>,
        /// The root.
        root: String,
    },
    /// An id that is not a valid uid/gid (negative or too large).
    #[error("invalid {what} id {id}: not between 0 and 4294967294")]
    BadId {
        /// `user` or `group`.
        what: &'static str,
        /// The id.
        id: i64,
    },
    /// Reading a file failed.
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// One line of a passwd file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswdEntry {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// GECOS field.
    pub gecos: String,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
    /// The file it came from (inside the root).
    pub source: &'static str,
}

/// One line of a group file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    /// Group name.
    pub name: String,
    /// Group id.
    pub gid: u32,
    /// Supplementary members.
    pub members: Vec<String>,
    /// The file it came from (inside the root).
    pub source: &'static str,
}

/// The users and groups of one root, read once (use it when resolving many owners).
#[derive(Debug, Clone, Default)]
pub struct Db {
    users: Vec<PasswdEntry>,
    groups: Vec<GroupEntry>,
    root: String,
}

impl fmt::Display for PasswdEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (uid {}, gid {}, home {}, from {})",
            self.name, self.uid, self.gid, self.home, self.source
        )
    }
}

fn parse_id(s: &str) -> Option<u32> {
    // 4294967295 is (uid_t)-1, "no user": never a valid entry.
    s.parse::<u32>().ok().filter(|&id| id != u32::MAX)
}

fn skip_line(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#') || t.starts_with('+') || t.starts_with('-')
}

/// Parses the text of a passwd file (`name:passwd:uid:gid:gecos:home:shell`).
pub fn parse_passwd(text: &str, source: &'static str) -> Vec<PasswdEntry> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if skip_line(line) {
            continue;
        }
        let f: Vec<&str> = line.split(':').collect();
        let parsed = (f.len() == 7)
            .then(|| Some((parse_id(f[2])?, parse_id(f[3])?)))
            .flatten();
        match parsed {
            Some((uid, gid)) if !f[0].is_empty() => out.push(PasswdEntry {
                name: f[0].to_string(),
                uid,
                gid,
                gecos: f[4].to_string(),
                home: f[5].to_string(),
                shell: f[6].to_string(),
                source,
            }),
            _ => tracing::warn!("{source}:{}: skipping malformed line", n + 1),
        }
    }
    out
}

/// Parses the text of a group file (`name:passwd:gid:member,member`).
pub fn parse_group(text: &str, source: &'static str) -> Vec<GroupEntry> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if skip_line(line) {
            continue;
        }
        let f: Vec<&str> = line.split(':').collect();
        match (f.len() == 4).then(|| parse_id(f[2])).flatten() {
            Some(gid) if !f[0].is_empty() => out.push(GroupEntry {
                name: f[0].to_string(),
                gid,
                members: f[3]
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .map(String::from)
                    .collect(),
                source,
            }),
            _ => tracing::warn!("{source}:{}: skipping malformed line", n + 1),
        }
    }
    out
}

fn read_text(root: &fs::Root, path: &str) -> Result<String, FsError> {
    Ok(root
        .read(path)?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default())
}

fn check_id(what: &'static str, id: i64) -> Result<u32, PasswdError> {
    u32::try_from(id)
        .ok()
        .filter(|&i| i != u32::MAX)
        .ok_or(PasswdError::BadId { what, id })
}

impl Db {
    /// Reads the passwd and group files of `root` (missing files are empty).
    pub fn load(root: &fs::Root) -> Result<Db, PasswdError> {
        let mut users = Vec::new();
        for path in PASSWD_FILES {
            users.extend(parse_passwd(&read_text(root, path)?, path));
        }
        let mut groups = Vec::new();
        for path in GROUP_FILES {
            groups.extend(parse_group(&read_text(root, path)?, path));
        }
        Ok(Db {
            users,
            groups,
            root: root.path().display().to_string(),
        })
    }

    /// Builds a database from entries (tests, other sources).
    pub fn from_entries(users: Vec<PasswdEntry>, groups: Vec<GroupEntry>) -> Db {
        Db {
            users,
            groups,
            root: String::from("(in memory)"),
        }
    }

    /// All users, `/etc/passwd` first.
    pub fn users(&self) -> &[PasswdEntry] {
        &self.users
    }

    /// All groups, `/etc/group` first.
    pub fn groups(&self) -> &[GroupEntry] {
        &self.groups
    }

    /// The first user of that name.
    pub fn user(&self, name: &str) -> Option<&PasswdEntry> {
        self.users.iter().find(|u| u.name == name)
    }

    /// The first user with that uid.
    pub fn user_by_id(&self, uid: u32) -> Option<&PasswdEntry> {
        self.users.iter().find(|u| u.uid == uid)
    }

    /// The first group of that name.
    pub fn group(&self, name: &str) -> Option<&GroupEntry> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The first group with that gid.
    pub fn group_by_id(&self, gid: u32) -> Option<&GroupEntry> {
        self.groups.iter().find(|g| g.gid == gid)
    }

    /// The user of that name, or an error naming the files searched.
    pub fn require_user(&self, name: &str) -> Result<&PasswdEntry, PasswdError> {
        self.user(name).ok_or_else(|| PasswdError::UnknownUser {
            name: name.to_string(),
            searched: PASSWD_FILES.iter().map(|s| s.to_string()).collect(),
            root: self.root.clone(),
        })
    }

    /// The group of that name, or an error naming the files searched.
    pub fn require_group(&self, name: &str) -> Result<&GroupEntry, PasswdError> {
        self.group(name).ok_or_else(|| PasswdError::UnknownGroup {
            name: name.to_string(),
            searched: GROUP_FILES.iter().map(|s| s.to_string()).collect(),
            root: self.root.clone(),
        })
    }

    /// Resolves an Ignition owner pair to `(uid, gid)`: by id, else by name, else 0.
    pub fn resolve_owner(
        &self,
        user: &NodeOwner,
        group: &NodeOwner,
    ) -> Result<(u32, u32), PasswdError> {
        let uid = match (user.id, user.name.as_deref()) {
            (Some(id), _) => check_id("user", id)?,
            (None, Some(name)) if !name.is_empty() => self.require_user(name)?.uid,
            _ => 0,
        };
        let gid = match (group.id, group.name.as_deref()) {
            (Some(id), _) => check_id("group", id)?,
            (None, Some(name)) if !name.is_empty() => self.require_group(name)?.gid,
            _ => 0,
        };
        Ok((uid, gid))
    }
}

/// Resolves an Ignition owner pair against the target root's users and groups (see the module
/// documentation). `uid`/`gid` default to 0.
pub fn resolve_owner(
    root: &fs::Root,
    user: &NodeOwner,
    group: &NodeOwner,
) -> Result<(u32, u32), PasswdError> {
    let by_id = |o: &NodeOwner| o.id.is_some() || o.name.as_deref().is_none_or(str::is_empty);
    if by_id(user) && by_id(group) {
        // Nothing to look up: do not read the files.
        return Db::default().resolve_owner(user, group);
    }
    Db::load(root)?.resolve_owner(user, group)
}

/// The passwd entry of `name` in the target root.
pub fn lookup_user(root: &fs::Root, name: &str) -> Result<PasswdEntry, PasswdError> {
    Db::load(root)?.require_user(name).cloned()
}

/// The home directory of `user` in the target root.
pub fn home_dir(root: &fs::Root, user: &str) -> Result<String, PasswdError> {
    Ok(lookup_user(root, user)?.home)
}

/// The uid and primary gid of `name` in the target root.
pub fn user_ids(root: &fs::Root, name: &str) -> Result<(u32, u32), PasswdError> {
    let u = lookup_user(root, name)?;
    Ok((u.uid, u.gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_skips_odd_lines() {
        let users = parse_passwd(
            "# comment\n\nroot:x:0:0:root:/root:/bin/bash\n+nis\nbad:x:notanumber:0::/:/bin/sh\n\
             short:x:1\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n",
            "/etc/passwd",
        );
        assert_eq!(users.len(), 2);
        assert_eq!(users[1].name, "core");
        assert_eq!(users[1].home, "/var/home/core");
        assert_eq!(users[1].gecos, "CoreOS Admin");
        let groups = parse_group("wheel:x:10:core,admin\ncore:x:1000:\n", "/etc/group");
        assert_eq!(groups[0].members, ["core", "admin"]);
        assert!(groups[1].members.is_empty());
    }

    #[test]
    fn ids_are_checked() {
        let db = Db::default();
        let owner = |id| NodeOwner {
            id: Some(id),
            name: None,
        };
        assert_eq!(
            db.resolve_owner(&owner(5), &owner(6)).unwrap(),
            (5, 6),
            "ids need no entry"
        );
        let err = db
            .resolve_owner(&owner(-1), &NodeOwner::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid user id -1: not between 0 and 4294967294"
        );
        assert!(db
            .resolve_owner(&NodeOwner::default(), &owner(4294967295))
            .is_err());
    }
}
