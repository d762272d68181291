//! SELinux labels of what `hearth_hostops::fs::Root` writes, on real `security.selinux`
//! extended attributes of this machine's file system (root may set them without the SELinux
//! module loaded; the kernel then stores them without checking them against a policy), with
//! synthetic policies in temporary roots ("offline root" mode), and with the policy lookup
//! checked against libselinux's own `selabel_lookup` (Debian package `selinux-utils`).

use hearth_hostops::fs::{FsError, Root};
use hearth_hostops::selinux::{FileContexts, FileKind};
use std::path::Path;
use std::process::Command;

const XATTR: &str = "security.selinux";

fn label(p: &Path) -> Option<String> {
    let mut buf = vec![0u8; 512];
    match rustix::fs::lgetxattr(p, XATTR, &mut buf[..]) {
        Ok(n) => {
            buf.truncate(n);
            assert_eq!(buf.last(), Some(&0), "labels are stored NUL-terminated");
            buf.pop();
            Some(String::from_utf8(buf).unwrap())
        }
        Err(rustix::io::Errno::NODATA) => None,
        Err(e) => panic!("{}: lgetxattr: {e}", p.display()),
    }
}

fn set_label(p: &Path, l: &str) {
    let mut v = l.as_bytes().to_vec();
    v.push(0);
    rustix::fs::lsetxattr(p, XATTR, &v, rustix::fs::XattrFlags::empty()).unwrap_or_else(|e| {
        panic!(
            "{}: cannot set {XATTR} ({e}): this test needs root on a file system that stores \
             security.* attributes (ext4, xfs, tmpfs)",
            p.display()
        )
    });
}

fn ino(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).unwrap().ino()
}

fn no_temporaries(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let n = e.unwrap().file_name();
        assert!(
            !n.to_string_lossy().starts_with(".hearth-tmp-"),
            "temporary left behind in {}: {n:?}",
            dir.display()
        );
    }
}

const POLICY: &str = "\
/.*                                   system_u:object_r:default_t:s0
/etc(/.*)?                            system_u:object_r:etc_t:s0
/etc/ssh(/.*)?                        system_u:object_r:ssh_etc_t:s0
/etc/ssh/sshd_config                  --  system_u:object_r:sshd_config_t:s0
/etc/ssh/sshd_config\\.d(/.*)?         system_u:object_r:sshd_config_t:s0
/usr/lib/systemd/system(/.*)?         system_u:object_r:systemd_unit_file_t:s0
/usr/lib/systemd/system/[^/]+\\.wants/[^/]+  -l  system_u:object_r:systemd_unit_link_t:s0
/etc/hearth-nolabel(/.*)?             <<none>>
/root(/.*)?                           system_u:object_r:admin_home_t:s0
/root/\\.ssh(/.*)?                     system_u:object_r:ssh_home_t:s0
/var(/.*)?                            system_u:object_r:var_t:s0
/var/lib/hearth(/.*)?                 system_u:object_r:hearth_var_lib_t:s0
";
const HOMEDIRS: &str = "\
/home/[^/]+/\\.ssh(/.*)?               unconfined_u:object_r:ssh_home_t:s0
/home/[^/]+/\\.ssh/authorized_keys\\.d -d unconfined_u:object_r:ssh_home_t:s0
";
const LOCAL: &str = "/etc/hearth-local\\.conf  system_u:object_r:local_t:s0\n";
const SUBS_DIST: &str = "\
/etc/systemd/system /usr/lib/systemd/system
/var/home /home
/var/roothome /root
";

/// A temporary root whose /etc/selinux/config says `mode` and that holds [`POLICY`].
fn policy_root(mode: &str) -> (tempfile::TempDir, Root) {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("etc/selinux/targeted/contexts/files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(
        d.path().join("etc/selinux/config"),
        format!("# test\nSELINUX={mode}\nSELINUXTYPE=targeted\n"),
    )
    .unwrap();
    std::fs::write(files.join("file_contexts"), POLICY).unwrap();
    std::fs::write(files.join("file_contexts.homedirs"), HOMEDIRS).unwrap();
    std::fs::write(files.join("file_contexts.local"), LOCAL).unwrap();
    std::fs::write(files.join("file_contexts.subs_dist"), SUBS_DIST).unwrap();
    let r = Root::open(d.path()).unwrap();
    (d, r)
}

#[test]
fn a_replaced_file_keeps_its_label() {
    // No policy in this root: the label comes from the old file alone.
    let d = tempfile::tempdir().unwrap();
    let r = Root::open(d.path()).unwrap();
    r.write_atomic("/etc/ssh/ssh_host_ed25519_key", b"old", 0o600, None)
        .unwrap();
    let p = d.path().join("etc/ssh/ssh_host_ed25519_key");
    assert_eq!(label(&p), None, "SELinux off and no old label: nothing set");
    set_label(&p, "system_u:object_r:sshd_key_t:s0");
    let before = ino(&p);
    r.write_atomic("/etc/ssh/ssh_host_ed25519_key", b"new", 0o600, None)
        .unwrap();
    assert_ne!(ino(&p), before, "replaced by rename, a new inode");
    assert_eq!(std::fs::read(&p).unwrap(), b"new");
    assert_eq!(
        label(&p).as_deref(),
        Some("system_u:object_r:sshd_key_t:s0")
    );
    no_temporaries(&d.path().join("etc/ssh"));
}

#[test]
fn a_replaced_symlink_keeps_its_label() {
    let d = tempfile::tempdir().unwrap();
    let r = Root::open(d.path()).unwrap();
    r.symlink_atomic("/etc/systemd/system/foo.service", "/dev/null")
        .unwrap();
    let p = d.path().join("etc/systemd/system/foo.service");
    set_label(&p, "system_u:object_r:systemd_unit_link_t:s0");
    let before = ino(&p);
    r.symlink_atomic("/etc/systemd/system/foo.service", "/usr/lib/foo.service")
        .unwrap();
    assert_ne!(ino(&p), before);
    assert_eq!(
        std::fs::read_link(&p).unwrap(),
        Path::new("/usr/lib/foo.service")
    );
    assert_eq!(
        label(&p).as_deref(),
        Some("system_u:object_r:systemd_unit_link_t:s0")
    );
    no_temporaries(&d.path().join("etc/systemd/system"));
}

#[test]
fn new_paths_get_the_policy_label_in_an_enforcing_offline_root() {
    let (d, r) = policy_root("enforcing");
    let at = |p: &str| label(&d.path().join(p.trim_start_matches('/')));

    // Exact rule (with its file type) beats the regular expressions.
    r.write_atomic("/etc/ssh/sshd_config", b"x", 0o600, None)
        .unwrap();
    assert_eq!(
        at("/etc/ssh/sshd_config").as_deref(),
        Some("system_u:object_r:sshd_config_t:s0")
    );
    // Created directories are labelled too: /etc/ssh by "/etc/ssh(/.*)?".
    assert_eq!(
        at("/etc/ssh").as_deref(),
        Some("system_u:object_r:ssh_etc_t:s0")
    );
    r.write_atomic("/etc/ssh/sshd_config.d/50-hearth.conf", b"x", 0o600, None)
        .unwrap();
    assert_eq!(
        at("/etc/ssh/sshd_config.d/50-hearth.conf").as_deref(),
        Some("system_u:object_r:sshd_config_t:s0")
    );
    // The last matching regex wins over earlier, broader ones.
    r.write_atomic("/etc/ssh/moduli", b"x", 0o644, None)
        .unwrap();
    assert_eq!(
        at("/etc/ssh/moduli").as_deref(),
        Some("system_u:object_r:ssh_etc_t:s0")
    );
    // Substitution: /etc/systemd/system is labelled as /usr/lib/systemd/system; symbolic
    // links get the "-l" rule.
    r.write_atomic(
        "/etc/systemd/system/hearth.service",
        b"[Unit]\n",
        0o644,
        None,
    )
    .unwrap();
    assert_eq!(
        at("/etc/systemd/system/hearth.service").as_deref(),
        Some("system_u:object_r:systemd_unit_file_t:s0")
    );
    r.symlink_atomic(
        "/etc/systemd/system/multi-user.target.wants/hearth.service",
        "/etc/systemd/system/hearth.service",
    )
    .unwrap();
    assert_eq!(
        at("/etc/systemd/system/multi-user.target.wants/hearth.service").as_deref(),
        Some("system_u:object_r:systemd_unit_link_t:s0")
    );
    assert_eq!(
        at("/etc/systemd/system/multi-user.target.wants").as_deref(),
        Some("system_u:object_r:systemd_unit_file_t:s0")
    );
    // .local beats the base file.
    r.write_atomic("/etc/hearth-local.conf", b"x", 0o644, None)
        .unwrap();
    assert_eq!(
        at("/etc/hearth-local.conf").as_deref(),
        Some("system_u:object_r:local_t:s0")
    );
    // <<none>>: no label at all.
    r.write_atomic("/etc/hearth-nolabel/a", b"x", 0o644, None)
        .unwrap();
    assert_eq!(at("/etc/hearth-nolabel/a"), None);
    assert_eq!(at("/etc/hearth-nolabel"), None);

    // The real path is looked up: /home -> var/home (as on Fedora CoreOS), then the
    // substitution /var/home -> /home finds the .homedirs rules.
    std::fs::create_dir_all(d.path().join("var/home/core")).unwrap();
    std::os::unix::fs::symlink("var/home", d.path().join("home")).unwrap();
    r.write_atomic(
        "/home/core/.ssh/authorized_keys.d/ignition",
        b"ssh-ed25519 AAAA\n",
        0o600,
        None,
    )
    .unwrap();
    assert_eq!(
        at("/var/home/core/.ssh/authorized_keys.d/ignition").as_deref(),
        Some("unconfined_u:object_r:ssh_home_t:s0")
    );
    assert_eq!(
        at("/var/home/core/.ssh/authorized_keys.d").as_deref(),
        Some("unconfined_u:object_r:ssh_home_t:s0")
    );
    // Directories that existed before are left as they were.
    assert_eq!(at("/var/home/core"), None);
    no_temporaries(&d.path().join("var/home/core/.ssh"));

    // A replaced file keeps its own label even where the policy says otherwise.
    set_label(
        &d.path().join("etc/ssh/moduli"),
        "system_u:object_r:custom_t:s0",
    );
    r.write_atomic("/etc/ssh/moduli", b"y", 0o644, None)
        .unwrap();
    assert_eq!(
        at("/etc/ssh/moduli").as_deref(),
        Some("system_u:object_r:custom_t:s0")
    );
    // ...but a file replacing a symbolic link gets the policy's label for a file.
    std::os::unix::fs::symlink("../run/x", d.path().join("var/lib-link")).unwrap();
    set_label(
        &d.path().join("var/lib-link"),
        "system_u:object_r:link_t:s0",
    );
    r.write_atomic("/var/lib-link", b"file now", 0o644, None)
        .unwrap();
    assert_eq!(
        at("/var/lib-link").as_deref(),
        Some("system_u:object_r:var_t:s0")
    );
}

#[test]
fn permissive_labels_and_disabled_does_not() {
    let (d, r) = policy_root("permissive");
    r.write_atomic("/var/lib/hearth/state.json", b"{}", 0o600, None)
        .unwrap();
    assert_eq!(
        label(&d.path().join("var/lib/hearth/state.json")).as_deref(),
        Some("system_u:object_r:hearth_var_lib_t:s0")
    );

    let (d, r) = policy_root("disabled");
    r.write_atomic("/var/lib/hearth/state.json", b"{}", 0o600, None)
        .unwrap();
    r.symlink_atomic("/etc/systemd/system/a.service", "/dev/null")
        .unwrap();
    for p in [
        "var/lib/hearth/state.json",
        "var/lib",
        "etc/systemd/system/a.service",
    ] {
        assert_eq!(label(&d.path().join(p)), None, "{p}");
    }
}

#[test]
fn no_matching_rule_sets_nothing_and_does_not_fail() {
    let (d, r) = policy_root("enforcing");
    // Replace the catch-all policy by one that knows only /etc.
    std::fs::write(
        d.path()
            .join("etc/selinux/targeted/contexts/files/file_contexts"),
        "/etc(/.*)? system_u:object_r:etc_t:s0\n",
    )
    .unwrap();
    let r2 = Root::open(d.path()).unwrap();
    drop(r);
    r2.write_atomic("/opt/x/y", b"x", 0o644, None).unwrap();
    assert_eq!(label(&d.path().join("opt/x/y")), None);
    assert_eq!(label(&d.path().join("opt")), None);
}

#[test]
fn a_broken_policy_fails_the_write_clearly_and_leaves_the_old_file() {
    let (d, r) = policy_root("enforcing");
    std::fs::create_dir_all(d.path().join("etc")).unwrap();
    std::fs::write(d.path().join("etc/motd"), b"old").unwrap();
    std::fs::write(
        d.path()
            .join("etc/selinux/targeted/contexts/files/file_contexts.local"),
        "/etc/motd -z system_u:object_r:etc_t:s0\n",
    )
    .unwrap();
    let err = r
        .write_atomic("/etc/motd", b"new", 0o644, None)
        .unwrap_err();
    assert!(matches!(err, FsError::Label { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("file_contexts.local:1: invalid file type \"-z\""),
        "{msg}"
    );
    assert_eq!(std::fs::read(d.path().join("etc/motd")).unwrap(), b"old");
    no_temporaries(&d.path().join("etc"));

    // Enabled without any file contexts: refused with what to do.
    let (d, r) = policy_root("enforcing");
    std::fs::remove_file(
        d.path()
            .join("etc/selinux/targeted/contexts/files/file_contexts"),
    )
    .unwrap();
    let msg = r
        .write_atomic("/etc/motd", b"new", 0o644, None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("SELinux is enabled") && msg.contains("SELINUX=enforcing"),
        "{msg}"
    );
    assert!(!d.path().join("etc/motd").exists());
    no_temporaries(&d.path().join("etc"));

    // A regex hearth cannot compile: the lookup of a path it governs fails, naming the rule.
    let (d, r) = policy_root("enforcing");
    std::fs::write(
        d.path()
            .join("etc/selinux/targeted/contexts/files/file_contexts.local"),
        "/etc/bad(  system_u:object_r:etc_t:s0\n",
    )
    .unwrap();
    let msg = r
        .write_atomic("/etc/bad(", b"x", 0o644, None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("/etc/bad(: SELinux label: look up the label of /etc/bad("),
        "{msg}"
    );
    assert!(
        msg.contains("file_contexts.local:1: the regular expression"),
        "{msg}"
    );
    assert!(!d.path().join("etc/bad(").exists());
    no_temporaries(&d.path().join("etc"));
}

/// What libselinux's `selabel_lookup` says for `key` of `mode` with the spec file `fc`.
fn libselinux_lookup(fc: &Path, key: &str, mode: u32) -> Option<String> {
    // /usr/sbin: not on every PATH.
    let tool = ["/usr/sbin/selabel_lookup", "/sbin/selabel_lookup"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("selabel_lookup");
    let out = Command::new(tool)
        .args(["-r", "-b", "file", "-k", key, "-t", &mode.to_string(), "-f"])
        .arg(fc)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run selabel_lookup ({e}): install Debian's selinux-utils \
                 (vm-tests/scripts/install-deps.sh does)"
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(c) = stdout.trim().strip_prefix("Default context: ") {
        return Some(c.to_string());
    }
    assert!(
        stderr.contains("failed to find a valid context"),
        "selabel_lookup {key}: unexpected output: {stdout} {stderr}"
    );
    None
}

#[test]
fn lookups_agree_with_libselinux_selabel_lookup() {
    let (d, _r) = policy_root("enforcing");
    let files = d.path().join("etc/selinux/targeted/contexts/files");
    // Extra rules that exercise the corners: exact vs regex, later wins, a top-level '|',
    // an escaped meta character (still an exact path), file types, <<none>> winning late.
    let mut base = POLICY.to_string();
    base.push_str(
        "/srv/a|/opt/b                        system_u:object_r:alt_t:s0\n\
         /srv/exact\\.conf                     system_u:object_r:exact_t:s0\n\
         /srv/.*\\.conf                        system_u:object_r:conf_t:s0\n\
         /srv/exact\\.conf                     system_u:object_r:exact_later_t:s0\n\
         /srv/dev/[^/]*                  -c   system_u:object_r:chr_t:s0\n\
         /srv/dev/[^/]*                  -d   system_u:object_r:dir_t:s0\n\
         /srv/quiet(/.*)?                     <<none>>\n\
         /srv/quiet/loud                      system_u:object_r:loud_t:s0\n\
         /srv/new\\nline                    system_u:object_r:nl_t:s0\n\
         /srv/new                             system_u:object_r:new_t:s0\n",
    );
    std::fs::write(files.join("file_contexts"), &base).unwrap();
    std::fs::write(
        files.join("file_contexts.subs"),
        "/data /srv\n/data/x /etc\n",
    )
    .unwrap();
    let text = |n: &str| std::fs::read_to_string(files.join(n)).unwrap();
    let ours = FileContexts::parse(
        &[
            ("file_contexts".into(), text("file_contexts")),
            (
                "file_contexts.homedirs".into(),
                text("file_contexts.homedirs"),
            ),
            ("file_contexts.local".into(), text("file_contexts.local")),
        ],
        Some(&text("file_contexts.subs")),
        Some(&text("file_contexts.subs_dist")),
    )
    .unwrap();
    let fc = files.join("file_contexts");
    let kinds = [
        (FileKind::File, 0o100000),
        (FileKind::Dir, 0o040000),
        (FileKind::Symlink, 0o120000),
        (FileKind::Char, 0o020000),
    ];
    let keys = [
        "/",
        "/etc",
        "/etc/",
        "//etc//ssh///sshd_config",
        "/etc/ssh/sshd_config",
        "/etc/ssh/sshd_config.d/x.conf",
        "/etc/sshd",
        "/etc/systemd/system/a.service",
        "/etc/systemd/system/multi-user.target.wants/a.service",
        "/etc/systemd/systemd",
        "/etc/hearth-local.conf",
        "/etc/hearth-localXconf",
        "/etc/hearth-nolabel",
        "/etc/hearth-nolabel/x",
        "/home/core/.ssh",
        "/var/home/core/.ssh/authorized_keys.d",
        "/var/home/core/.ssh/authorized_keys.d/ignition",
        "/var/homes/core/.ssh",
        "/var/roothome/.ssh/authorized_keys",
        "/root/.ssh",
        "/var/lib/hearth/x",
        "/srv/a",
        "/srv/a/b",
        "/srv/ab",
        "/opt/b",
        "/x/opt/b",
        "/srv/opt/b",
        "/srv/exact.conf",
        "/srv/exactXconf",
        "/srv/other.conf",
        "/srv/dev/null",
        "/srv/quiet",
        "/srv/quiet/x",
        "/srv/quiet/loud",
        "/srv/new\nline",
        "/srv/new\n",
        "/data/exact.conf",
        "/data/x/ssh/sshd_config",
        "/dataset",
        "/usr",
        "/usr/lib/systemd/system",
    ];
    let mut compared = 0;
    for key in keys {
        for (kind, mode) in kinds {
            let want = libselinux_lookup(&fc, key, mode);
            let got = ours
                .lookup(key.as_bytes(), kind)
                .unwrap()
                .map(str::to_string);
            assert_eq!(got, want, "{key:?} as {kind:?}");
            compared += 1;
        }
    }
    assert_eq!(compared, keys.len() * kinds.len());
}

#[test]
fn ssh_keys_of_core_get_ssh_home_t_and_keep_a_relabelled_file() {
    use hearth_hostops::users::{write_ssh_keys, SshKeyLayout};
    let (d, r) = policy_root("enforcing");
    std::fs::write(
        d.path().join("etc/passwd"),
        "root:x:0:0:root:/var/roothome:/bin/bash\ncore:x:1000:1000::/var/home/core:/bin/bash\n",
    )
    .unwrap();
    std::fs::write(d.path().join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
    std::fs::create_dir_all(d.path().join("var/home/core")).unwrap();
    std::fs::create_dir_all(d.path().join("var/roothome")).unwrap();
    let keys = vec!["ssh-ed25519 AAAAC3Nza core@example".to_string()];
    write_ssh_keys(&r, "core", &keys, SshKeyLayout::Fragment).unwrap();
    let home = d.path().join("var/home/core");
    for p in [
        ".ssh",
        ".ssh/authorized_keys.d",
        ".ssh/authorized_keys.d/ignition",
    ] {
        assert_eq!(
            label(&home.join(p)).as_deref(),
            Some("unconfined_u:object_r:ssh_home_t:s0"),
            "{p}"
        );
    }
    // root's home is /var/roothome on CoreOS: the substitution finds the /root rules.
    write_ssh_keys(&r, "root", &keys, SshKeyLayout::Single).unwrap();
    let roothome = d.path().join("var/roothome");
    assert_eq!(
        label(&roothome.join(".ssh/authorized_keys")).as_deref(),
        Some("system_u:object_r:ssh_home_t:s0")
    );
    // An administrator's own label on the key file survives a rewrite.
    let f = home.join(".ssh/authorized_keys.d/ignition");
    set_label(&f, "unconfined_u:object_r:admin_chosen_t:s0");
    let more = vec![keys[0].clone(), "ssh-ed25519 BBBB other".to_string()];
    write_ssh_keys(&r, "core", &more, SshKeyLayout::Fragment).unwrap();
    assert_eq!(
        label(&f).as_deref(),
        Some("unconfined_u:object_r:admin_chosen_t:s0")
    );
    assert!(std::fs::read_to_string(&f).unwrap().contains("BBBB"));
    no_temporaries(&home.join(".ssh/authorized_keys.d"));
}
