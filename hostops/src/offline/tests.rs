//! Unit tests of the offline enablement rules.

use super::install::{parse_install, verify_alias, Install};
use super::lookup::Ctx;
use super::name::{is_instance, is_template, is_valid_name, printf, replace_instance, template_of};
use super::preset::{fnmatch, parse_preset_line, query_presets, PresetRule};
use crate::fs::Root;

#[test]
fn unit_names() {
    assert!(is_valid_name("foo.service"));
    assert!(is_valid_name("foo@.service"));
    assert!(is_valid_name("foo@bar-baz.timer"));
    assert!(is_valid_name("dev-sda1.device"));
    assert!(!is_valid_name("foo"));
    assert!(!is_valid_name("foo.conf"));
    assert!(!is_valid_name("../foo.service"));
    assert!(!is_valid_name("a/b.service"));
    assert!(!is_valid_name("@x.service"));
    assert!(!is_valid_name(""));
    assert!(is_template("foo@.service"));
    assert!(!is_template("foo@x.service"));
    assert!(is_instance("foo@x.service"));
    assert_eq!(
        template_of("foo@x.service").as_deref(),
        Some("foo@.service")
    );
    assert_eq!(template_of("foo.service"), None);
    assert_eq!(
        replace_instance("foo@.service", "y").as_deref(),
        Some("foo@y.service")
    );
}

#[test]
fn specifiers() {
    assert_eq!(
        printf(
            "spec@x.service",
            "%p-extra.target %N.target %n.foo.target %i %%"
        )
        .unwrap(),
        "spec-extra.target spec@x.target spec@x.service.foo.target x %"
    );
    assert_eq!(printf("a-b-c.service", "%j").unwrap(), "c");
    assert_eq!(printf("x@foo\\x2dbar.service", "%I").unwrap(), "foo-bar");
    assert_eq!(printf("x@dev-sda.service", "%f").unwrap(), "/dev/sda");
    assert!(printf("x.service", "%H").unwrap_err().contains("%H"));
}

#[test]
fn install_section() {
    let mut i = Install::default();
    parse_install(
        "t@.service",
        "[Unit]\nWantedBy=not-here.target\n[Install]\n# comment\nWantedBy=a.target \\\n  b.target\n\
         RequiredBy=\"c.target\"\nAlias=x@.service\nAlso=%p-helper.service\n\
         DefaultInstance=def\n",
        &mut i,
    )
    .unwrap();
    assert_eq!(i.wanted_by, ["a.target", "b.target"]);
    assert_eq!(i.required_by, ["c.target"]);
    assert_eq!(i.aliases, ["x@.service"]);
    assert_eq!(i.also, ["t-helper.service"]);
    assert_eq!(i.default_instance.as_deref(), Some("def"));
    // A drop-in: an empty assignment resets the list.
    parse_install(
        "t@.service",
        "[Install]\nWantedBy=\nWantedBy=d.target\n",
        &mut i,
    )
    .unwrap();
    assert_eq!(i.wanted_by, ["d.target"]);
    assert!(i.has_rules());
}

#[test]
fn aliases() {
    assert_eq!(
        verify_alias("a.service", "b.service").unwrap().as_deref(),
        Some("b.service")
    );
    assert_eq!(verify_alias("a.service", "a.service").unwrap(), None);
    assert!(verify_alias("a.service", "b.socket").is_err());
    assert!(verify_alias("a.service", "b@.service").is_err());
    assert_eq!(
        verify_alias("a@x.service", "b@.service")
            .unwrap()
            .as_deref(),
        Some("b@x.service")
    );
}

#[test]
fn globs() {
    assert!(fnmatch("*", "foo.service"));
    assert!(fnmatch(
        "systemd-journal-gatewayd.*",
        "systemd-journal-gatewayd.socket"
    ));
    assert!(!fnmatch("foo.*", "foobar.service"));
    assert!(fnmatch("f?o.service", "foo.service"));
    assert!(fnmatch("[a-c]x.service", "bx.service"));
    assert!(!fnmatch("[!a-c]x.service", "bx.service"));
    assert!(fnmatch("*.s*e", "a.service"));
    assert!(!fnmatch("a", "ab"));
    assert!(fnmatch("a\\b", "a\\b"));
}

#[test]
fn preset_lines_and_queries() {
    let rules: Vec<PresetRule> = [
        "# c",
        "enable getty@.service tty1 tty2",
        "disable getty@.service",
        "enable a.service",
        "disable *",
    ]
    .iter()
    .filter_map(|l| parse_preset_line(l).unwrap())
    .collect();
    assert_eq!(rules.len(), 4);
    assert_eq!(
        query_presets("getty@.service", &rules),
        (
            true,
            Some(vec![
                "getty@tty1.service".into(),
                "getty@tty2.service".into()
            ])
        )
    );
    assert_eq!(query_presets("getty@tty2.service", &rules), (true, None));
    assert_eq!(query_presets("getty@tty3.service", &rules), (false, None));
    assert_eq!(query_presets("a.service", &rules), (true, None));
    assert_eq!(query_presets("b.service", &rules), (false, None));
    assert_eq!(query_presets("b.service", &[]), (true, None));
    assert!(parse_preset_line("enable a.service x").is_err());
    assert!(parse_preset_line("frobnicate a.service").is_err());
}

#[test]
fn chase_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("usr/lib/systemd/system")).unwrap();
    std::os::unix::fs::symlink("usr/lib", dir.path().join("lib")).unwrap();
    std::fs::create_dir_all(dir.path().join("etc")).unwrap();
    // An absolute link resolves inside the root, never on the machine.
    std::os::unix::fs::symlink("/usr/lib/systemd", dir.path().join("etc/abs")).unwrap();
    let ctx = Ctx::new(&root).unwrap();
    assert_eq!(
        ctx.chase("/lib/systemd/system", true).unwrap(),
        "/usr/lib/systemd/system"
    );
    assert_eq!(
        ctx.chase("/etc/abs/system/x.service", true).unwrap(),
        "/usr/lib/systemd/system/x.service"
    );
    assert_eq!(
        ctx.chase("/../../etc/./x/../abs", false).unwrap(),
        "/etc/abs"
    );
    // Merged /usr: /lib/systemd/system is not searched twice.
    assert!(!ctx.search.iter().any(|d| d == "/lib/systemd/system"));
}
