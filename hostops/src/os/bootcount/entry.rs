//! Boot Loader Specification entries (`key value` lines) and the boot counter in an entry's
//! file name (`NAME+LEFT[-DONE].conf`, systemd's Automatic Boot Assessment): parsing and
//! writing, no I/O.

use std::fmt;

/// The largest entry file read (ostree's are a few hundred bytes).
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// One BLS entry: its lines in order, comments and blank lines dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlsEntry {
    /// `(key, value)` in file order; keys may repeat (`initrd`).
    pub lines: Vec<(String, String)>,
}

impl BlsEntry {
    /// Parses an entry file's text.
    pub fn parse(text: &str) -> BlsEntry {
        let lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.split_once(char::is_whitespace) {
                Some((k, v)) => (k.to_string(), v.trim().to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect();
        BlsEntry { lines }
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of the `ostree=` argument in `options`.
    pub fn ostree_arg(&self) -> Option<&str> {
        self.get("options")?
            .split_whitespace()
            .find_map(|a| a.strip_prefix("ostree="))
    }
}

impl fmt::Display for BlsEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in &self.lines {
            writeln!(f, "{k} {v}")?;
        }
        Ok(())
    }
}

/// A boot counter: tries left and tries done (systemd's `+LEFT-DONE`). An entry whose tries
/// left are 0 is "bad": systemd-boot sorts it last and boots it only when nothing else is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// Tries left.
    pub left: u32,
    /// Tries done (0 when the name has no `-DONE` part).
    pub done: u32,
}

impl Counter {
    /// No try left: the boot loader gave up on the entry.
    pub fn exhausted(&self) -> bool {
        self.left == 0
    }
}

/// An entry file name split into its id and its counter: `hearth-x+2-1.conf` → (`hearth-x`,
/// 2 left, 1 done); `hearth-x.conf` → (`hearth-x`, none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryName {
    /// The name without the counter and `.conf`.
    pub id: String,
    /// The boot counter, if the entry is being assessed.
    pub counter: Option<Counter>,
}

impl EntryName {
    /// Parses a file name; `None` unless it ends with `.conf`.
    pub fn parse(file_name: &str) -> Option<EntryName> {
        let stem = file_name.strip_suffix(".conf")?;
        if let Some((id, counter)) = stem.rsplit_once('+') {
            let (left, done) = match counter.split_once('-') {
                Some((l, d)) => (l, Some(d)),
                None => (counter, None),
            };
            let number = |s: &str| {
                (!s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| s.parse::<u32>().ok())
                    .flatten()
            };
            if let (Some(left), Some(done)) = (number(left), done.map_or(Some(0), number)) {
                if !id.is_empty() {
                    return Some(EntryName {
                        id: id.to_string(),
                        counter: Some(Counter { left, done }),
                    });
                }
            }
        }
        Some(EntryName {
            id: stem.to_string(),
            counter: None,
        })
    }

    /// The file name: `ID.conf`, `ID+LEFT.conf` or `ID+LEFT-DONE.conf`.
    pub fn file_name(&self) -> String {
        match self.counter {
            None => format!("{}.conf", self.id),
            Some(Counter { left, done: 0 }) => format!("{}+{left}.conf", self.id),
            Some(Counter { left, done }) => format!("{}+{left}-{done}.conf", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_parse_as_systemd_names_them() {
        for (name, id, counter) in [
            ("hearth-a.conf", "hearth-a", None),
            ("hearth-a+3.conf", "hearth-a", Some((3, 0))),
            ("hearth-a+2-1.conf", "hearth-a", Some((2, 1))),
            ("hearth-a+0-3.conf", "hearth-a", Some((0, 3))),
            // Not a counter: kept in the id.
            ("hearth-a+x.conf", "hearth-a+x", None),
            ("hearth-a+1-.conf", "hearth-a+1-", None),
            ("+3.conf", "+3", None),
            ("a+1234567890.conf", "a+1234567890", None),
        ] {
            let n = EntryName::parse(name).unwrap();
            assert_eq!(n.id, id, "{name}");
            assert_eq!(
                n.counter.map(|c| (c.left, c.done)),
                counter,
                "{name}: {n:?}"
            );
            if n.counter.is_some() || !name.contains('+') {
                assert_eq!(n.file_name(), name);
            }
        }
        assert_eq!(EntryName::parse("loader.txt"), None);
        assert!(EntryName::parse("x+0-2.conf")
            .unwrap()
            .counter
            .unwrap()
            .exhausted());
    }

    #[test]
    fn entries_parse_and_print() {
        let e = BlsEntry::parse(
            "# comment\ntitle Debian (ostree:0)\nversion 2\noptions root=LABEL=r rw ostree=/ostree/boot.1/debian/abc/0\nlinux /ostree/debian-abc/vmlinuz-6.1\ninitrd /ostree/debian-abc/initramfs-6.1.img\n\n",
        );
        assert_eq!(e.get("version"), Some("2"));
        assert_eq!(e.ostree_arg(), Some("/ostree/boot.1/debian/abc/0"));
        assert_eq!(e.lines.len(), 5);
        assert_eq!(BlsEntry::parse(&e.to_string()), e);
    }
}
