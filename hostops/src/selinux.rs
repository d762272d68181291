//! SELinux file labels: which label the policy gives a path, read the way libselinux reads it.
//!
//! On an SELinux host (Fedora CoreOS, RHCOS run it enforcing) every file carries a label in its
//! `security.selinux` extended attribute. A file created by `open(2)` gets the label of its
//! directory's type transition, not the label the policy assigns to its path (what
//! `restorecon` sets), and a file renamed over another does not inherit the old one's label.
//! [`crate::fs::Root`] therefore labels what it creates before it becomes visible: a replaced
//! file's label is copied to its replacement, and a new path gets the label this module computes
//! from the policy's `file_contexts`.
//!
//! # Why hearth reads `file_contexts` itself
//!
//! libselinux's `selabel_lookup(3)` would need a C library linked into hearth and reads only the
//! policy of the machine it runs on unless it is given paths; hearth also labels *offline* roots
//! (a deployment that is not booted). The lookup rules are small and documented by libselinux's
//! source (`libselinux/src/label_file.c`, `label_file.h`, `label_support.c`; 3.4 as in Debian 12
//! and the tree-based rewrite of 3.8+ keep the same results), so this module implements them in
//! Rust, and the tests compare its answers with libselinux's own `selabel_lookup` tool.
//!
//! The rules, as libselinux applies them:
//!
//! * Files: `file_contexts`, then `file_contexts.homedirs`, then `file_contexts.local` (the last
//!   two are optional), all in `/etc/selinux/<SELINUXTYPE>/contexts/files/`. Only the text form
//!   is read (Fedora and RHEL ship it next to the compiled `.bin`).
//! * A line is `REGEX [TYPE] CONTEXT`, fields separated by white space; `#` starts a comment
//!   line; `TYPE` is one of `-b -c -d -p -l -s --` (block, char, directory, FIFO, symlink,
//!   socket, regular file) and restricts the rule to that kind of file; more fields are ignored;
//!   a non-ASCII byte, a missing field or an unknown type makes the whole policy unreadable.
//! * `CONTEXT` `<<none>>` means "do not label": when such a rule is the one that wins, there is
//!   no label.
//! * The regular expression is anchored as `^REGEX$` (textually, so a top-level `|` binds
//!   looser than the anchors, as in libselinux) and matched against the whole path.
//! * Precedence: rules whose regular expression has no meta character (`.^$?*+|[({`, a
//!   backslash escaping the next character) are exact paths and are tried before every regular
//!   expression; within each group the rule read *last* wins (so `.local` beats `.homedirs`
//!   beats the base file, and a later line beats an earlier one). libselinux's policy tools
//!   (`semodule`) already sort the base file so that more specific rules come later.
//! * A rule whose expression starts with a literal first component (`/etc/...`, its "stem")
//!   only applies to paths with the same first component.
//! * The path is cleaned first (runs of `/` become one, a trailing `/` is dropped) and then
//!   rewritten by the substitutions in `file_contexts.subs` and then `file_contexts.subs_dist`
//!   (`SRC DST` per line, SRC matching a whole leading path component sequence; within a file
//!   the last matching line wins): Fedora's `/etc/systemd/system /usr/lib/systemd/system`
//!   makes unit files in `/etc` labelled like the ones in `/usr`.
//!
//! Known difference: the expressions are compiled by the `regex` crate (bytes, no Unicode,
//! `.` matching newline as libselinux's `PCRE2_DOTALL`), not PCRE2. Back-references and
//! look-around, which PCRE2 has and `regex` lacks, do not appear in distribution policies; a
//! rule that `regex` cannot compile makes the lookup of a path that reaches it fail with an
//! error naming the file, line and expression, never a silent wrong label.

use regex::bytes::{Regex, RegexBuilder};
use std::sync::OnceLock;

/// The extended attribute that holds a file's SELinux label.
pub const XATTR: &str = "security.selinux";

/// The directory of the policies, inside a root.
pub const SELINUX_DIR: &str = "/etc/selinux";

/// The kernel's SELinux file system: present when SELinux is enabled on the running host.
pub const SELINUXFS_ENFORCE: &str = "/sys/fs/selinux/enforce";

/// The `CONTEXT` that means "no label".
pub const NO_LABEL: &str = "<<none>>";

/// What went wrong reading a policy's file contexts.
#[derive(Debug, thiserror::Error)]
pub enum SelinuxError {
    /// A policy file could not be read.
    #[error("{file}: cannot read the SELinux policy file: {source}")]
    Read {
        /// The file (inside the root).
        file: String,
        /// Why (a [`crate::fs::FsError`] for a [`crate::fs::Root`]).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// SELinux is enabled but the policy has no `file_contexts`.
    #[error(
        "{file}: missing: SELinux is enabled ({why}) but its policy has no file contexts; \
         install the policy (selinux-policy-{policy}) or set SELINUX=disabled in \
         /etc/selinux/config"
    )]
    NoFileContexts {
        /// The file that is missing (inside the root).
        file: String,
        /// Why SELinux counts as enabled.
        why: String,
        /// The policy type (`targeted`).
        policy: String,
    },
    /// A line of a `file_contexts` file is malformed (libselinux refuses the whole policy too).
    #[error("{file}:{line}: {reason}")]
    BadLine {
        /// The file (inside the root).
        file: String,
        /// The line number (from 1).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A rule's regular expression does not compile.
    #[error(
        "{file}:{line}: the regular expression {regex:?} does not compile in hearth's regex \
         engine ({reason}); fix or remove the rule, or report it if libselinux accepts it"
    )]
    BadRegex {
        /// The file (inside the root).
        file: String,
        /// The line number (from 1).
        line: usize,
        /// The expression as written.
        regex: String,
        /// The compiler's message.
        reason: String,
    },
    /// The path to look up is empty.
    #[error("cannot look up the SELinux label of an empty path")]
    EmptyPath,
}

/// Where the policy files are read from: a root directory. [`crate::fs::Root`] is one; the
/// trait keeps this module free of the file layer, which uses it to label what it writes.
pub trait PolicySource {
    /// Why a file cannot be read.
    type Error: std::error::Error + Send + Sync + 'static;
    /// The content of `path` (absolute, inside the root); `Ok(None)` when it does not exist.
    fn read_policy_file(&self, path: &str) -> Result<Option<Vec<u8>>, Self::Error>;
    /// The root's path (for messages).
    fn root_path(&self) -> &std::path::Path;
}

/// Kinds of files a rule can be restricted to (`-b -c -d -p -l -s --`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `--`: a regular file.
    File,
    /// `-d`: a directory.
    Dir,
    /// `-l`: a symbolic link.
    Symlink,
    /// `-b`: a block device.
    Block,
    /// `-c`: a character device.
    Char,
    /// `-p`: a FIFO.
    Fifo,
    /// `-s`: a socket.
    Socket,
}

impl FileKind {
    fn parse(s: &str) -> Option<FileKind> {
        Some(match s {
            "--" => FileKind::File,
            "-d" => FileKind::Dir,
            "-l" => FileKind::Symlink,
            "-b" => FileKind::Block,
            "-c" => FileKind::Char,
            "-p" => FileKind::Fifo,
            "-s" => FileKind::Socket,
            _ => return None,
        })
    }
}

/// One rule of a `file_contexts` file.
#[derive(Debug)]
struct Spec {
    file: usize,
    line: usize,
    regex: String,
    kind: Option<FileKind>,
    /// `None` for `<<none>>`.
    context: Option<String>,
    /// The literal first component (`/etc`), when the expression starts with one.
    stem: Option<String>,
    compiled: OnceLock<Result<Regex, String>>,
}

/// A substitution (`SRC DST`) of `file_contexts.subs` or `file_contexts.subs_dist`.
#[derive(Debug, Clone)]
struct Sub {
    src: String,
    dst: String,
}

/// A policy's file contexts: the rules of `file_contexts`, `.homedirs`, `.local` and the
/// substitutions, ready for [`FileContexts::lookup`].
#[derive(Debug)]
pub struct FileContexts {
    files: Vec<String>,
    /// Regular expressions first, then exact paths, each group in reading order (libselinux's
    /// `sort_specs`); lookups scan from the end.
    specs: Vec<Spec>,
    /// Last line first (libselinux prepends as it reads).
    subs: Vec<Sub>,
    dist_subs: Vec<Sub>,
}

/// libselinux's `spec_hasMetaChars`: whether the expression has a meta character (a
/// backslash hides the character after it).
fn has_meta_chars(re: &str) -> bool {
    let b = re.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' | b'^' | b'$' | b'?' | b'*' | b'+' | b'|' | b'[' | b'(' | b'{' => return true,
            b'\\' => i += 1,
            _ => {}
        }
        i += 1;
    }
    false
}

/// libselinux's `get_stem_from_spec`: the text before the second `/` when it has no meta
/// character.
fn spec_stem(re: &str) -> Option<String> {
    let b = re.as_bytes();
    let end = b.iter().skip(1).position(|&c| c == b'/')? + 1;
    if b[..end].iter().any(|c| b".^$?*+|[({".contains(c)) {
        return None;
    }
    Some(re[..end].to_string())
}

/// libselinux's `get_stem_from_file_name`: the text before the second `/`.
fn path_stem(path: &[u8]) -> Option<&[u8]> {
    let end = path.iter().skip(1).position(|&c| c == b'/')? + 1;
    Some(&path[..end])
}

fn parse_subs(text: &str) -> Vec<Sub> {
    let mut out: Vec<Sub> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            if l.starts_with('#') {
                return None;
            }
            let mut it = l.split_ascii_whitespace();
            let src = it.next()?;
            let dst = it.next()?;
            Some(Sub {
                src: src.to_string(),
                dst: dst.to_string(),
            })
        })
        .collect();
    out.reverse();
    out
}

/// libselinux's `selabel_sub`: the first substitution (in list order) whose source is the path
/// or a leading sequence of its components.
fn apply_subs(subs: &[Sub], path: &[u8]) -> Option<Vec<u8>> {
    for s in subs {
        let src = s.src.as_bytes();
        if !path.starts_with(src) {
            continue;
        }
        let rest = &path[src.len()..];
        match rest.first() {
            None | Some(b'/') => {
                // A destination of "/" does not double the slash.
                let rest = if s.dst == "/" && !rest.is_empty() {
                    &rest[1..]
                } else {
                    rest
                };
                let mut out = s.dst.as_bytes().to_vec();
                out.extend_from_slice(rest);
                return Some(out);
            }
            _ => {}
        }
    }
    None
}

impl FileContexts {
    /// Parses policy text: `files` are `(name, text)` of `file_contexts`, `.homedirs` and
    /// `.local` in that order (names are for messages); `subs` and `subs_dist` the texts of the
    /// substitution files, if present.
    pub fn parse(
        files: &[(String, String)],
        subs: Option<&str>,
        subs_dist: Option<&str>,
    ) -> Result<FileContexts, SelinuxError> {
        let mut regexes = Vec::new();
        let mut exact = Vec::new();
        for (index, (name, text)) in files.iter().enumerate() {
            for (n, line) in text.lines().enumerate() {
                let bad = |reason: String| SelinuxError::BadLine {
                    file: name.clone(),
                    line: n + 1,
                    reason,
                };
                let trimmed = line.trim_start_matches(|c: char| c.is_ascii_whitespace());
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    continue;
                }
                // libselinux reads at most three fields and refuses non-ASCII bytes in them.
                let fields: Vec<&str> = trimmed.split_ascii_whitespace().take(3).collect();
                if let Some(f) = fields.iter().find(|f| !f.is_ascii()) {
                    return Err(bad(format!("non-ASCII characters in {f:?}")));
                }
                let (regex, kind, context) = match fields[..] {
                    [r, c] => (r, None, c),
                    [r, t, c] => {
                        let kind = FileKind::parse(t).ok_or_else(|| {
                            bad(format!(
                                "invalid file type {t:?} (one of -b -c -d -p -l -s --)"
                            ))
                        })?;
                        (r, Some(kind), c)
                    }
                    _ => return Err(bad("missing fields: want REGEX [TYPE] CONTEXT".into())),
                };
                let spec = Spec {
                    file: index,
                    line: n + 1,
                    regex: regex.to_string(),
                    kind,
                    context: (context != NO_LABEL).then(|| context.to_string()),
                    stem: spec_stem(regex),
                    compiled: OnceLock::new(),
                };
                if has_meta_chars(regex) {
                    regexes.push(spec);
                } else {
                    exact.push(spec);
                }
            }
        }
        regexes.extend(exact);
        Ok(FileContexts {
            files: files.iter().map(|(n, _)| n.clone()).collect(),
            specs: regexes,
            subs: subs.map(parse_subs).unwrap_or_default(),
            dist_subs: subs_dist.map(parse_subs).unwrap_or_default(),
        })
    }

    /// Reads the file contexts of policy `policy` (`targeted`) in `root`: `Ok(None)` when the
    /// base `file_contexts` does not exist.
    pub fn load<S: PolicySource>(
        root: &S,
        policy: &str,
    ) -> Result<Option<FileContexts>, SelinuxError> {
        let base = format!("{SELINUX_DIR}/{policy}/contexts/files/file_contexts");
        let read = |file: &str| -> Result<Option<String>, SelinuxError> {
            let bytes = root
                .read_policy_file(file)
                .map_err(|e| SelinuxError::Read {
                    file: file.to_string(),
                    source: Box::new(e),
                })?;
            Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
        };
        let Some(text) = read(&base)? else {
            return Ok(None);
        };
        let mut files = vec![(base.clone(), text)];
        for suffix in ["homedirs", "local"] {
            let f = format!("{base}.{suffix}");
            if let Some(t) = read(&f)? {
                files.push((f, t));
            }
        }
        let subs = read(&format!("{base}.subs"))?;
        let subs_dist = read(&format!("{base}.subs_dist"))?;
        FileContexts::parse(&files, subs.as_deref(), subs_dist.as_deref()).map(Some)
    }

    /// The label the policy gives `path` (absolute, as seen inside the root) for a file of
    /// `kind`: `Ok(None)` when no rule matches or the winning rule says `<<none>>`.
    pub fn lookup(&self, path: &[u8], kind: FileKind) -> Result<Option<&str>, SelinuxError> {
        // Runs of '/' become one; a trailing '/' goes.
        let mut key: Vec<u8> = Vec::with_capacity(path.len());
        for &c in path {
            if !(c == b'/' && key.last() == Some(&b'/')) {
                key.push(c);
            }
        }
        if key.is_empty() {
            return Err(SelinuxError::EmptyPath);
        }
        if key.len() > 1 && key.last() == Some(&b'/') {
            key.pop();
        }
        let key = match apply_subs(&self.subs, &key) {
            Some(k) => apply_subs(&self.dist_subs, &k).unwrap_or(k),
            None => apply_subs(&self.dist_subs, &key).unwrap_or(key),
        };
        let stem = path_stem(&key);
        for spec in self.specs.iter().rev() {
            if let Some(s) = &spec.stem {
                if stem != Some(s.as_bytes()) {
                    continue;
                }
            }
            if spec.kind.is_some_and(|k| k != kind) {
                continue;
            }
            let re = spec
                .compiled
                .get_or_init(|| {
                    // libselinux anchors as "^" + REGEX + "$"; PCRE's "$" also matches before a
                    // final newline, which "\n?\z" reproduces.
                    RegexBuilder::new(&format!("^{}(?:\n?\\z)", spec.regex))
                        .unicode(false)
                        .dot_matches_new_line(true)
                        .build()
                        .map_err(|e| e.to_string())
                })
                .as_ref()
                .map_err(|reason| SelinuxError::BadRegex {
                    file: self.files[spec.file].clone(),
                    line: spec.line,
                    regex: spec.regex.clone(),
                    reason: reason.clone(),
                })?;
            if re.is_match(&key) {
                return Ok(spec.context.as_deref());
            }
        }
        Ok(None)
    }

    /// How many rules were read.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether no rule was read.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

/// Whether a root's files are to be labelled, and by which policy.
#[derive(Debug)]
pub enum Labelling {
    /// SELinux is off: nothing is labelled from the policy (labels of replaced files are still
    /// carried over).
    Off,
    /// SELinux is on: new paths get the policy's labels.
    On {
        /// Why SELinux counts as on (for messages).
        why: String,
        /// The policy's file contexts.
        contexts: FileContexts,
    },
}

/// The value of `KEY=` in an `/etc/selinux/config` text.
fn config_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().rev().find_map(|l| {
        let l = l.trim();
        let v = l.strip_prefix(key)?.trim_start().strip_prefix('=')?;
        Some(v.trim().trim_matches(|c| c == '"' || c == '\''))
    })
}

/// Decides whether `root` is labelled: for the running host (`live`), SELinux is on when the
/// kernel has `/sys/fs/selinux/enforce`; for another root, when its `/etc/selinux/config` says
/// `SELINUX=enforcing` or `permissive`. The policy type is `SELINUXTYPE` of that config
/// (`targeted` when unset).
pub fn labelling<S: PolicySource>(root: &S, live: bool) -> Result<Labelling, SelinuxError> {
    let config_file = format!("{SELINUX_DIR}/config");
    let config = root
        .read_policy_file(&config_file)
        .map_err(|e| SelinuxError::Read {
            file: config_file.clone(),
            source: Box::new(e),
        })?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let why = if live {
        if !std::path::Path::new(SELINUXFS_ENFORCE).exists() {
            return Ok(Labelling::Off);
        }
        format!("{SELINUXFS_ENFORCE} exists")
    } else {
        match config_value(&config, "SELINUX") {
            Some(m)
                if m.eq_ignore_ascii_case("enforcing") || m.eq_ignore_ascii_case("permissive") =>
            {
                format!(
                    "{config_file} of root {} says SELINUX={m}",
                    root.root_path().display()
                )
            }
            _ => return Ok(Labelling::Off),
        }
    };
    let policy = config_value(&config, "SELINUXTYPE")
        .filter(|p| !p.is_empty())
        .unwrap_or("targeted")
        .to_string();
    match FileContexts::load(root, &policy)? {
        Some(contexts) => Ok(Labelling::On { why, contexts }),
        None => Err(SelinuxError::NoFileContexts {
            file: format!("{SELINUX_DIR}/{policy}/contexts/files/file_contexts"),
            why,
            policy,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fc(base: &str) -> FileContexts {
        FileContexts::parse(&[("fc".into(), base.into())], None, None).unwrap()
    }

    fn look(fc: &FileContexts, p: &str, k: FileKind) -> Option<String> {
        fc.lookup(p.as_bytes(), k).unwrap().map(str::to_string)
    }

    #[test]
    fn exact_path_beats_a_later_regex() {
        let c = fc("/etc/ssh/sshd_config  sshd_config_t\n/etc(/.*)?  etc_t\n");
        assert_eq!(
            look(&c, "/etc/ssh/sshd_config", FileKind::File).as_deref(),
            Some("sshd_config_t")
        );
        assert_eq!(
            look(&c, "/etc/ssh/other", FileKind::File).as_deref(),
            Some("etc_t")
        );
    }

    #[test]
    fn later_regex_wins_and_file_type_restricts() {
        let c = fc("/etc(/.*)?  etc_t\n/etc/ssh(/.*)?  ssh_etc_t\n/etc/ssh/[^/]+ -d dir_t\n");
        assert_eq!(
            look(&c, "/etc/ssh/a", FileKind::File).as_deref(),
            Some("ssh_etc_t")
        );
        assert_eq!(
            look(&c, "/etc/ssh/a", FileKind::Dir).as_deref(),
            Some("dir_t")
        );
        assert_eq!(look(&c, "/etc", FileKind::Dir).as_deref(), Some("etc_t"));
        assert_eq!(look(&c, "/usr/x", FileKind::File), None);
    }

    #[test]
    fn none_means_no_label() {
        let c = fc("/etc(/.*)?  etc_t\n/etc/secret <<none>>\n/tmp/.* <<none>>\n");
        assert_eq!(look(&c, "/etc/secret", FileKind::File), None);
        assert_eq!(look(&c, "/tmp/x", FileKind::File), None);
        assert_eq!(look(&c, "/etc/x", FileKind::File).as_deref(), Some("etc_t"));
    }

    #[test]
    fn local_beats_homedirs_beats_base() {
        let c = FileContexts::parse(
            &[
                ("base".into(), "/srv(/.*)? base_t\n".into()),
                ("homedirs".into(), "/srv/a(/.*)? home_t\n".into()),
                ("local".into(), "/srv/.* local_t\n".into()),
            ],
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            look(&c, "/srv/a/b", FileKind::File).as_deref(),
            Some("local_t")
        );
        assert_eq!(look(&c, "/srv", FileKind::Dir).as_deref(), Some("base_t"));
    }

    #[test]
    fn path_is_cleaned_and_substituted() {
        let c = FileContexts::parse(
            &[(
                "fc".into(),
                "/usr/lib/systemd/system(/.*)? unit_t\n/home/[^/]+/\\.ssh(/.*)? ssh_home_t\n"
                    .into(),
            )],
            Some("/srv/home /home\n"),
            Some("/etc/systemd/system /usr/lib/systemd/system\n/var/home /home\n"),
        )
        .unwrap();
        assert_eq!(
            look(&c, "//etc/systemd//system/a.service", FileKind::File).as_deref(),
            Some("unit_t")
        );
        assert_eq!(
            look(&c, "/var/home/core/.ssh/", FileKind::Dir).as_deref(),
            Some("ssh_home_t")
        );
        assert_eq!(
            look(&c, "/srv/home/core/.ssh/authorized_keys", FileKind::File).as_deref(),
            Some("ssh_home_t")
        );
        // A substitution applies to whole components only.
        assert_eq!(look(&c, "/var/homes/core/.ssh", FileKind::Dir), None);
    }

    #[test]
    fn stem_and_top_level_alternation_behave_as_libselinux() {
        // "^/a/b|/c/d$": the anchors bind tighter than '|' (libselinux pastes them on), and the
        // stem "/a" limits the rule to paths under /a.
        let c = fc("/a/b|/c/d x_t\n");
        assert_eq!(look(&c, "/a/bzzz", FileKind::File).as_deref(), Some("x_t"));
        assert_eq!(look(&c, "/a/q/c/d", FileKind::File).as_deref(), Some("x_t"));
        assert_eq!(look(&c, "/z/c/d", FileKind::File), None);
    }

    #[test]
    fn malformed_lines_are_refused_with_file_and_line() {
        let e =
            FileContexts::parse(&[("fc".into(), "# c\n\n/a\n".into())], None, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "fc:3: missing fields: want REGEX [TYPE] CONTEXT"
        );
        let e =
            FileContexts::parse(&[("fc".into(), "/a -x ctx\n".into())], None, None).unwrap_err();
        assert!(
            e.to_string().starts_with("fc:1: invalid file type \"-x\""),
            "{e}"
        );
        let e = FileContexts::parse(&[("fc".into(), "/é ctx\n".into())], None, None).unwrap_err();
        assert!(e.to_string().contains("non-ASCII"), "{e}");
    }

    #[test]
    fn a_regex_that_does_not_compile_fails_the_lookup_loudly() {
        let c = fc("/etc/(a ctx_t\n");
        let e = c.lookup(b"/etc/a", FileKind::File).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("fc:1: the regular expression \"/etc/(a\""),
            "{e}"
        );
        // Paths under another stem never reach it.
        assert_eq!(look(&c, "/usr/a", FileKind::File), None);
    }

    #[test]
    fn config_values() {
        let t = "# c\nSELINUX=enforcing\nSELINUXTYPE = \"targeted\"\n";
        assert_eq!(config_value(t, "SELINUX"), Some("enforcing"));
        assert_eq!(config_value(t, "SELINUXTYPE"), Some("targeted"));
        assert_eq!(config_value("", "SELINUX"), None);
    }
}
