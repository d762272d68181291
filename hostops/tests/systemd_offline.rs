//! `hearth_hostops::offline` against the real thing:
//!
//! 1. On plain directories, every operation is done twice, by `offline` in one copy of a tree
//!    and by this machine's `systemctl --root=DIR` (systemd 252) in an identical copy; after
//!    each step the symlinks of both trees and `is-enabled` of every unit must be the same, and
//!    an operation must fail in one exactly when it fails in the other.
//! 2. In a booted Debian 12 container (`hearth_vm_tests::SystemdHost`), units are enabled,
//!    masked and preset offline on its disk; the container's own `systemctl is-enabled` must
//!    agree, and after a reboot the enabled unit has run at boot and the masked one has not.
//!
//! These tests need root (the container, and file ownership in the trees), systemd-nspawn and
//! the `systemctl` binary: `vm-tests/scripts/install-deps.sh`. Without them they fail, saying
//! so; they never skip.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hearth_hostops::fs::Root;
use hearth_hostops::offline::{self, OfflineError};
use hearth_vm_tests::SystemdHost;

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests compare with systemctl --root and boot systemd in systemd-nspawn: they \
         must run as root (see vm-tests/scripts/install-deps.sh)"
    );
}

fn write(dir: &Path, path: &str, content: &str) {
    let p = dir.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn link(dir: &Path, path: &str, target: &str) {
    let p = dir.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    symlink(target, p).unwrap();
}

const VENDOR: &str = "/usr/lib/systemd/system";
const ETC: &str = "/etc/systemd/system";

fn service(install: &str) -> String {
    format!("[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n[Install]\n{install}")
}

/// Units covering what `[Install]` can say, in the places unit files can be.
fn populate(dir: &Path) {
    let v = |name: &str, install: &str| write(dir, &format!("{VENDOR}/{name}"), &service(install));
    v(
        "a.service",
        "WantedBy=multi-user.target\nRequiredBy=b.target\nAlias=a-alias.service\nAlso=c.service\n",
    );
    v("c.service", "WantedBy=default.target\n");
    v("plain.service", "WantedBy=multi-user.target\n");
    v(
        "t@.service",
        "WantedBy=multi-user.target\nDefaultInstance=def\n",
    );
    v("nodef@.service", "WantedBy=multi-user.target\n");
    v("tt@.service", "WantedBy=getty@.target\n");
    v(
        "spec@.service",
        "WantedBy=%p-extra.target %N.target\nRequiredBy=%n.foo.target\n",
    );
    v("onlyalso.service", "Also=c.service\n");
    v("onlyalias.service", "Alias=al2.service\n");
    v(
        "cy1.service",
        "WantedBy=multi-user.target\nAlso=cy2.service\n",
    );
    v(
        "cy2.service",
        "WantedBy=multi-user.target\nAlso=cy1.service\n",
    );
    v(
        "alsomissing.service",
        "WantedBy=multi-user.target\nAlso=nowhere.service\n",
    );
    v("sock.socket", "WantedBy=sockets.target\n");
    v("tm.timer", "WantedBy=timers.target\n");
    v("vendormasked.service", "WantedBy=multi-user.target\n");
    v("dropin.service", "WantedBy=multi-user.target\n");
    write(
        dir,
        &format!("{ETC}/dropin.service.d/10-more.conf"),
        "[Install]\nWantedBy=graphical.target\nAlias=dropin-alias.service\n",
    );
    v("pre-on.service", "WantedBy=multi-user.target\n");
    v("pre-off.service", "WantedBy=multi-user.target\n");
    v("pre-none.service", "WantedBy=multi-user.target\n");
    v("pi@.service", "WantedBy=multi-user.target\n");
    write(
        dir,
        &format!("{VENDOR}/static.service"),
        "[Service]\nExecStart=/bin/true\n",
    );
    write(
        dir,
        &format!("{ETC}/inetc.service"),
        &service("WantedBy=multi-user.target\n"),
    );
    write(
        dir,
        "/opt/l.service",
        &service("WantedBy=multi-user.target\n"),
    );
    link(dir, &format!("{ETC}/l.service"), "/opt/l.service");
    link(dir, &format!("{ETC}/vendormasked.service"), "/dev/null");
    // Links made by hand: an alias not listed in Alias= (→ indirect), a runtime enablement.
    v("handalias.service", "WantedBy=multi-user.target\n");
    link(
        dir,
        &format!("{ETC}/other-name.service"),
        &format!("{VENDOR}/handalias.service"),
    );
    v("rt.service", "WantedBy=multi-user.target\n");
    link(
        dir,
        "/run/systemd/system/multi-user.target.wants/rt.service",
        &format!("{VENDOR}/rt.service"),
    );
    // A relative link made by another tool; a unit in /etc overriding a vendor one; a
    // same-name link from /etc into /usr/lib.
    v("rel.service", "WantedBy=multi-user.target\n");
    link(
        dir,
        &format!("{ETC}/multi-user.target.wants/rel.service"),
        "../../../../usr/lib/systemd/system/rel.service",
    );
    v("ov.service", "WantedBy=multi-user.target\n");
    write(
        dir,
        &format!("{ETC}/ov.service"),
        &service("WantedBy=graphical.target\n"),
    );
    v("same.service", "WantedBy=multi-user.target\n");
    link(
        dir,
        &format!("{ETC}/same.service"),
        &format!("{VENDOR}/same.service"),
    );
    // A vendor preset file hidden by a link to /dev/null in /etc.
    v("pre-hidden.service", "WantedBy=multi-user.target\n");
    write(
        dir,
        "/usr/lib/systemd/system-preset/60-hidden.preset",
        "disable pre-hidden.service\n",
    );
    link(
        dir,
        "/etc/systemd/system-preset/60-hidden.preset",
        "/dev/null",
    );
    write(
        dir,
        "/usr/lib/systemd/system-preset/50-test.preset",
        "# test policy\nenable pre-on.service\ndisable pre-off.*\nenable pi@.service one two\n",
    );
    write(
        dir,
        "/etc/systemd/system-preset/10-admin.preset",
        "disable plain.service\n",
    );
}

const UNITS: &[&str] = &[
    "a.service",
    "a-alias.service",
    "c.service",
    "plain.service",
    "t@.service",
    "t@def.service",
    "t@y.service",
    "nodef@.service",
    "nodef@z.service",
    "tt@.service",
    "tt@1.service",
    "spec@x.service",
    "onlyalso.service",
    "onlyalias.service",
    "al2.service",
    "cy1.service",
    "cy2.service",
    "alsomissing.service",
    "sock.socket",
    "tm.timer",
    "vendormasked.service",
    "dropin.service",
    "dropin-alias.service",
    "pre-on.service",
    "pre-off.service",
    "pre-none.service",
    "pi@.service",
    "pi@one.service",
    "pi@three.service",
    "static.service",
    "inetc.service",
    "l.service",
    "handalias.service",
    "other-name.service",
    "rt.service",
    "rel.service",
    "ov.service",
    "same.service",
    "pre-hidden.service",
    "missing.service",
];

/// Every symlink below etc/ and run/ of `dir`: path → target.
fn links(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let e = e.unwrap();
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.insert(
                    format!("/{rel}"),
                    fs::read_link(&p).unwrap().display().to_string(),
                );
            } else if ft.is_dir() {
                walk(base, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &dir.join("etc"), &mut out);
    walk(dir, &dir.join("run"), &mut out);
    out
}

/// Empty directories below etc/systemd/system (systemctl removes the ones it empties).
fn dirs(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let base = dir.join("etc/systemd/system");
    if let Ok(entries) = fs::read_dir(&base) {
        for e in entries {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn systemctl(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("systemctl")
        .arg(format!("--root={}", dir.display()))
        .args(args)
        .output()
        .expect("run systemctl (Debian package systemd)");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn systemctl_state(dir: &Path, unit: &str) -> String {
    let out = Command::new("systemctl")
        .arg(format!("--root={}", dir.display()))
        .args(["is-enabled", unit])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if stdout.is_empty() {
        "error".into()
    } else {
        stdout
    }
}

fn our_state(root: &Root, unit: &str) -> String {
    match offline::is_enabled(root, unit) {
        Ok(s) => s,
        Err(_) => "error".into(),
    }
}

fn run_ours(root: &Root, op: &str, unit: &str) -> Result<(), OfflineError> {
    match op {
        "enable" => offline::enable(root, unit),
        "disable" => offline::disable(root, unit),
        "mask" => offline::mask(root, unit),
        "unmask" => offline::unmask(root, unit),
        "preset" => offline::preset(root, unit),
        _ => unreachable!(),
    }
}

/// `is-enabled` of many units in one `systemctl` run where possible (it stops at the first
/// unit it cannot find, so the units `offline` says are missing are asked one by one, and a
/// batch that does not answer for every unit is asked again one by one).
fn systemctl_states(dir: &Path, units: &[&str], expect_error: &[bool]) -> Vec<String> {
    let batch: Vec<&str> = units
        .iter()
        .zip(expect_error)
        .filter(|(_, e)| !**e)
        .map(|(u, _)| *u)
        .collect();
    let out = Command::new("systemctl")
        .arg(format!("--root={}", dir.display()))
        .arg("is-enabled")
        .args(&batch)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let batched = lines.len() == batch.len() && out.stderr.is_empty();
    let mut answers = lines.into_iter();
    units
        .iter()
        .zip(expect_error)
        .map(|(unit, e)| {
            if !*e && batched {
                answers.next().unwrap().trim().to_string()
            } else {
                systemctl_state(dir, unit)
            }
        })
        .collect()
}

/// Checks both trees are the same and every unit has the same state in both.
fn assert_same(step: &str, ours: &Path, theirs: &Path, root: &Root) {
    assert_eq!(links(ours), links(theirs), "symlinks after {step}");
    assert_eq!(dirs(ours), dirs(theirs), "directories after {step}");
    let our_states: Vec<String> = UNITS.iter().map(|u| our_state(root, u)).collect();
    let errors: Vec<bool> = our_states.iter().map(|s| s == "error").collect();
    let their_states = systemctl_states(theirs, UNITS, &errors);
    for ((unit, ours), theirs) in UNITS.iter().zip(&our_states).zip(&their_states) {
        assert_eq!(ours, theirs, "is-enabled {unit} after {step}");
    }
}

#[test]
fn offline_matches_systemctl_root() {
    require_root();
    let ours_dir = tempfile::tempdir().unwrap();
    let theirs_dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (ours_dir.path(), theirs_dir.path());
    populate(ours);
    populate(theirs);
    let root = Root::open(ours).unwrap();
    assert_same("nothing", ours, theirs, &root);

    let steps: &[(&str, &str)] = &[
        ("enable", "a.service"),
        ("enable", "a.service"),
        ("enable", "t@.service"),
        ("enable", "t@y.service"),
        ("enable", "nodef@.service"),
        ("enable", "nodef@z.service"),
        ("enable", "tt@.service"),
        ("enable", "spec@x.service"),
        ("enable", "onlyalias.service"),
        ("enable", "onlyalso.service"),
        ("enable", "cy1.service"),
        ("enable", "alsomissing.service"),
        ("enable", "sock.socket"),
        ("enable", "tm.timer"),
        ("enable", "static.service"),
        ("enable", "inetc.service"),
        ("enable", "l.service"),
        ("enable", "dropin.service"),
        ("enable", "vendormasked.service"),
        ("enable", "missing.service"),
        ("enable", "not-a-unit"),
        ("disable", "a.service"),
        ("disable", "t@.service"),
        ("disable", "nodef@z.service"),
        ("disable", "cy2.service"),
        ("disable", "dropin-alias.service"),
        ("disable", "l.service"),
        ("disable", "vendormasked.service"),
        ("disable", "missing.service"),
        ("enable", "a-alias.service"),
        ("enable", "a.service"),
        ("disable", "a-alias.service"),
        ("mask", "plain.service"),
        ("mask", "plain.service"),
        ("mask", "inetc.service"),
        ("mask", "t@def.service"),
        ("enable", "t@.service"),
        ("unmask", "t@def.service"),
        ("enable", "t@.service"),
        ("unmask", "plain.service"),
        ("unmask", "plain.service"),
        ("enable", "plain.service"),
        ("preset", "plain.service"),
        ("preset", "pre-on.service"),
        ("enable", "pre-off.service"),
        ("preset", "pre-off.service"),
        ("preset", "pre-none.service"),
        ("preset", "pi@.service"),
        ("preset", "pi@three.service"),
        ("preset", "vendormasked.service"),
        ("preset", "a-alias.service"),
        ("preset", "nodef@.service"),
        ("unmask", "vendormasked.service"),
        ("enable", "vendormasked.service"),
        ("disable", "rel.service"),
        ("enable", "ov.service"),
        ("disable", "ov.service"),
        ("enable", "same.service"),
        ("disable", "same.service"),
        ("preset", "pre-hidden.service"),
    ];
    let mut compared = 0;
    for (op, unit) in steps {
        let step = format!("{op} {unit}");
        let ours_result = run_ours(&root, op, unit);
        let (theirs_ok, theirs_out) = systemctl(theirs, &[op, unit]);
        assert_eq!(
            ours_result.is_ok(),
            theirs_ok,
            "{step}: ours {ours_result:?}, systemctl: {theirs_out}"
        );
        if let Err(e) = &ours_result {
            println!(
                "{step}: both fail; ours: {e}; systemctl: {}",
                theirs_out.trim()
            );
        }
        assert_same(&step, ours, theirs, &root);
        compared += 1;
    }
    println!(
        "{compared} steps, {} units each: same links, same states",
        UNITS.len()
    );
}

#[test]
fn offline_errors_read_well() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let root = Root::open(dir.path()).unwrap();
    let e = offline::enable(&root, "missing.service").unwrap_err();
    assert!(matches!(e, OfflineError::NoSuchUnit { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("unit missing.service does not exist"),
        "{e}"
    );
    let e = offline::enable(&root, "vendormasked.service").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unit vendormasked.service is masked (/etc/systemd/system/vendormasked.service is a link \
         to /dev/null or empty)"
    );
    let e = offline::mask(&root, "inetc.service").unwrap_err();
    assert_eq!(
        e.to_string(),
        "/etc/systemd/system/inetc.service exists and is not a symbolic link: refusing to replace \
         it with a link to /dev/null"
    );
    let e = offline::enable(&root, "nodef@.service").unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot enable nodef@.service: it is a template without DefaultInstance= and \
         multi-user.target (from WantedBy=) is not a template unit; enable an instance such as \
         nodef@INSTANCE.service"
    );
    let e = offline::enable(&root, "../etc/passwd").unwrap_err();
    assert!(matches!(e, OfflineError::InvalidName { .. }), "{e}");
}

#[test]
fn links_never_leave_the_root() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    populate(dir.path());
    // /etc/systemd/system/sockets.target.wants is a link to a directory outside the root
    // (as seen from the machine): enablement must not write there.
    let wants = dir.path().join("etc/systemd/system/sockets.target.wants");
    symlink(outside.path(), &wants).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let result = offline::enable(&root, "sock.socket");
    assert!(
        fs::read_dir(outside.path()).unwrap().next().is_none(),
        "wrote outside the root ({result:?})"
    );
    // The absolute link is resolved inside the root instead (as systemctl --root does):
    // <root><outside path>/plain.service.
    let inside = dir
        .path()
        .join(outside.path().strip_prefix("/").unwrap())
        .join("sock.socket");
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        fs::read_link(inside).unwrap().to_str().unwrap(),
        "/usr/lib/systemd/system/sock.socket"
    );
}

fn boot() -> SystemdHost {
    require_root();
    match SystemdHost::boot() {
        Ok(host) => host,
        Err(e) => panic!(
            "could not boot a test host (these tests need root, systemd-nspawn and \
             debootstrap: run vm-tests/scripts/install-deps.sh as root):\n{e:#}"
        ),
    }
}

#[test]
fn the_real_systemd_agrees_and_boots_with_it() {
    let mut host = boot();
    let r = host.root().to_path_buf();
    let ran = |name: &str| {
        format!(
            "[Unit]\nDescription=hearth offline test\n[Service]\nType=oneshot\n\
             RemainAfterExit=yes\nExecStart=/bin/sh -c 'echo {name} >> /var/lib/hearth-ran'\n"
        )
    };
    write(
        &r,
        &format!("{VENDOR}/hearth-off-on.service"),
        &format!(
            "{}[Install]\nWantedBy=multi-user.target\nAlias=hearth-off-alias.service\n",
            ran("on")
        ),
    );
    write(
        &r,
        &format!("{ETC}/hearth-off-etc.service"),
        &format!("{}[Install]\nWantedBy=multi-user.target\n", ran("etc")),
    );
    write(
        &r,
        &format!("{VENDOR}/hearth-off-masked.service"),
        &format!("{}[Install]\nWantedBy=multi-user.target\n", ran("masked")),
    );
    write(
        &r,
        &format!("{VENDOR}/hearth-off-tpl@.service"),
        "[Service]\nType=oneshot\nRemainAfterExit=yes\n\
         ExecStart=/bin/sh -c 'echo tpl-%i >> /var/lib/hearth-ran'\n\
         [Install]\nWantedBy=multi-user.target\nDefaultInstance=first\n",
    );
    write(
        &r,
        &format!("{VENDOR}/hearth-off-preset.service"),
        &format!("{}[Install]\nWantedBy=multi-user.target\n", ran("preset")),
    );
    write(
        &r,
        &format!("{VENDOR}/hearth-off-nopreset.service"),
        &format!("{}[Install]\nWantedBy=multi-user.target\n", ran("nopreset")),
    );
    write(
        &r,
        "/etc/systemd/system-preset/10-hearth.preset",
        "enable hearth-off-preset.service\ndisable hearth-off-nopreset.service\n",
    );
    write(
        &r,
        &format!("{VENDOR}/hearth-off-static.service"),
        &ran("static"),
    );

    let root = Root::open(&r).unwrap();
    offline::enable(&root, "hearth-off-on.service").unwrap();
    offline::enable(&root, "hearth-off-etc.service").unwrap();
    offline::enable(&root, "hearth-off-masked.service").unwrap();
    offline::mask(&root, "hearth-off-masked.service").unwrap();
    offline::enable(&root, "hearth-off-tpl@.service").unwrap();
    offline::enable(&root, "hearth-off-tpl@second.service").unwrap();
    offline::preset(&root, "hearth-off-preset.service").unwrap();
    offline::enable(&root, "hearth-off-nopreset.service").unwrap();
    offline::preset(&root, "hearth-off-nopreset.service").unwrap();
    // The image's own units: getty@.service is masked in the test image; remote-fs.target is
    // enabled by the Debian packages (links to /lib/systemd/system); journald is static.
    let units = [
        "hearth-off-on.service",
        "hearth-off-alias.service",
        "hearth-off-etc.service",
        "hearth-off-masked.service",
        "hearth-off-tpl@.service",
        "hearth-off-tpl@first.service",
        "hearth-off-tpl@second.service",
        "hearth-off-tpl@third.service",
        "hearth-off-preset.service",
        "hearth-off-nopreset.service",
        "hearth-off-static.service",
        "getty@.service",
        "remote-fs.target",
        "systemd-journald.service",
        "dbus.service",
        "e2scrub_reap.service",
    ];
    let expected = [
        "enabled", "alias", "enabled", "masked", "enabled", "enabled", "enabled", "disabled",
        "enabled", "disabled", "static", "masked", "enabled", "static",
    ];
    let mut inside_states = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let inside = host
            .exec(&["systemctl", "is-enabled", unit])
            .unwrap()
            .stdout
            .trim()
            .to_string();
        let ours = offline::is_enabled(&root, unit).unwrap();
        let host_side = systemctl_state(&r, unit);
        assert_eq!(ours, inside, "{unit}: offline vs the container's systemctl");
        assert_eq!(ours, host_side, "{unit}: offline vs systemctl --root");
        if let Some(e) = expected.get(i) {
            assert_eq!(&ours, e, "{unit}");
        }
        inside_states.push(format!("{unit}={inside}"));
    }
    println!("states agree: {}", inside_states.join(" "));

    // What systemd does with it: after a reboot, the enabled units ran, the others did not.
    let _ = host.exec(&["systemctl", "reboot"]);
    host.wait_for_reboot(Duration::from_secs(60)).unwrap();
    let ran_lines = fs::read_to_string(host.path("/var/lib/hearth-ran")).unwrap();
    let mut ran_sorted: Vec<&str> = ran_lines.lines().collect();
    ran_sorted.sort();
    assert_eq!(
        ran_sorted,
        ["etc", "on", "preset", "tpl-first", "tpl-second"],
        "units that ran at boot"
    );
    for unit in [
        "hearth-off-on.service",
        "hearth-off-tpl@first.service",
        "hearth-off-tpl@second.service",
    ] {
        assert_eq!(
            host.exec_ok(&["systemctl", "is-active", unit])
                .unwrap()
                .trim(),
            "active",
            "{unit}"
        );
    }

    // And back: disable and unmask offline, the container's systemctl sees it at once.
    offline::disable(&root, "hearth-off-on.service").unwrap();
    offline::unmask(&root, "hearth-off-masked.service").unwrap();
    offline::disable(&root, "hearth-off-tpl@.service").unwrap();
    for (unit, state) in [
        ("hearth-off-on.service", "disabled"),
        ("hearth-off-masked.service", "enabled"),
        ("hearth-off-tpl@.service", "disabled"),
        ("hearth-off-tpl@second.service", "disabled"),
    ] {
        let inside = host
            .exec(&["systemctl", "is-enabled", unit])
            .unwrap()
            .stdout;
        assert_eq!(inside.trim(), state, "{unit}");
        assert_eq!(offline::is_enabled(&root, unit).unwrap(), state, "{unit}");
    }
    assert!(
        fs::symlink_metadata(host.path("/etc/systemd/system/hearth-off-alias.service")).is_err()
    );
}
