//! hearth's boot entry sync (`hearth_hostops::os::bootcount`) on real libostree sysroots
//! (`ostree admin deploy`/`undeploy` by the ostree CLI): ostree's entries resolved to their
//! deployments, put on an ESP directory under the sysroot with boot counters, counters kept
//! across rewrites, what a power loss leaves behind cleaned up, hostile entries refused. The
//! ESP here is a plain directory (the file operations are the same); the VM tier
//! (vm-tests/tests/vm_agent.rs) boots a real FAT ESP with systemd-boot.
//!
//! Needs root and the ostree CLI (`vm-tests/scripts/install-deps.sh`).

use std::fs;
use std::path::Path;

use hearth_hostops::os::bootcount::{self, BootCounting, EntryName};
use hearth_hostops::os::DeploymentId;
use hearth_vm_tests::ostree::{refs, SysrootOptions, TestSysroot};

fn counting() -> BootCounting {
    BootCounting {
        esp: "/efi".into(),
        tries: 3,
    }
}

/// The entry file names on the ESP, sorted.
fn esp_entries(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join("efi/loader/entries"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The deployments of the sysroot, `<osname>-<checksum>.<serial>`, in ostree's order.
fn deployments(sysroot: &TestSysroot) -> Vec<String> {
    let status = sysroot.admin(&["status"]).unwrap();
    status
        .lines()
        .filter_map(|l| {
            let l = l.trim_start_matches(['*', ' ']);
            let mut words = l.split_whitespace();
            let os = words.next()?;
            let dep = words.next()?;
            (os == "debian" && dep.contains('.')).then(|| format!("debian-{dep}"))
        })
        .collect()
}

/// Every hearth entry on the ESP of a deployment in `deployments` boots: its `ostree=` is a
/// link that resolves (as ostree-prepare-root resolves it) to that deployment's directory, and
/// the kernel and initrd it names are on the ESP. Returns the deployments checked.
fn assert_bootable(root: &Path, deployments: &[String]) -> Vec<String> {
    let mut checked = Vec::new();
    for name in esp_entries(root) {
        let Some(id) =
            EntryName::parse(&name).and_then(|n| n.id.strip_prefix("hearth-").map(str::to_string))
        else {
            continue;
        };
        let deployment = id;
        if !deployments.contains(&deployment) {
            continue;
        }
        let text = fs::read_to_string(root.join("efi/loader/entries").join(&name)).unwrap();
        let options = text
            .lines()
            .find_map(|l| l.strip_prefix("options "))
            .unwrap();
        let arg = options
            .split_whitespace()
            .find_map(|a| a.strip_prefix("ostree="))
            .unwrap();
        let link = root.join(arg.trim_start_matches('/'));
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{name}: ostree={arg} is not a link"
        );
        let (os, rest) = deployment.rsplit_once('-').unwrap();
        assert_eq!(
            fs::canonicalize(&link).unwrap(),
            fs::canonicalize(root.join(format!("ostree/deploy/{os}/deploy/{rest}"))).unwrap(),
            "{name}: ostree={arg} does not lead to its deployment"
        );
        for key in ["linux ", "initrd "] {
            let file = text.lines().find_map(|l| l.strip_prefix(key)).unwrap();
            assert!(
                root.join("efi")
                    .join(file.trim_start_matches('/'))
                    .is_file(),
                "{name}: {key}{file} is not on the ESP"
            );
        }
        checked.push(deployment);
    }
    checked
}

fn id(deployment: &str) -> DeploymentId {
    let (os, rest) = deployment.rsplit_once('-').unwrap();
    let (checksum, serial) = rest.rsplit_once('.').unwrap();
    DeploymentId {
        osname: os.into(),
        checksum: checksum.into(),
        serial: serial.parse().unwrap(),
    }
}

#[test]
fn ostree_entries_reach_the_esp_with_counters_that_survive_rewrites() {
    let sysroot = TestSysroot::create(&SysrootOptions {
        refs: vec![refs::V1.to_string(), refs::V2.to_string()],
        ..SysrootOptions::default()
    })
    .unwrap();
    let root = sysroot.path().to_path_buf();
    let cfg = counting();

    // No ESP mounted: the sync says where it looked and what to do.
    let e = bootcount::sync(&root, &cfg).unwrap_err().to_string();
    assert!(
        e.contains("no ESP at") && e.contains("bootCounting.esp"),
        "{e}"
    );
    fs::create_dir_all(root.join("efi/loader")).unwrap();

    // v1, not booted here: its entry gets a counter like any new one.
    let report = bootcount::sync(&root, &cfg).unwrap();
    let v1 = deployments(&sysroot);
    assert_eq!(v1.len(), 1);
    assert_eq!(report.booted, None);
    assert_eq!(report.counted, v1);
    assert_eq!(esp_entries(&root), [format!("hearth-{}+3.conf", v1[0])]);
    let text =
        fs::read_to_string(root.join("efi/loader/entries").join(&esp_entries(&root)[0])).unwrap();
    let linux = text
        .lines()
        .find_map(|l| l.strip_prefix("linux "))
        .unwrap()
        .to_string();
    assert!(linux.starts_with("/hearth/ostree/debian-"), "{text}");
    let copied = root.join("efi").join(linux.trim_start_matches('/'));
    let original = root.join("boot").join(linux.trim_start_matches("/hearth/"));
    assert_eq!(fs::read(&copied).unwrap(), fs::read(&original).unwrap());
    assert!(text.contains("\nsort-key hearth\n"), "{text}");
    assert!(text.contains("ostree=/ostree/boot."), "{text}");

    // systemd-bless-boot marks v1 good (the counter goes): a later sync keeps that name.
    let entries = root.join("efi/loader/entries");
    fs::rename(
        entries.join(format!("hearth-{}+3.conf", v1[0])),
        entries.join(format!("hearth-{}.conf", v1[0])),
    )
    .unwrap();
    // A second sync with nothing new writes nothing.
    let again = bootcount::sync(&root, &cfg).unwrap();
    assert!(
        again.written.is_empty() && again.copied.is_empty(),
        "{again:?}"
    );

    // v2 deployed beside it (the default now): a new entry with a counter; v1's entry is
    // rewritten (ostree's version and paths changed) under its name.
    sysroot.admin(&["deploy", "--os=debian", refs::V2]).unwrap();
    let both = deployments(&sysroot);
    assert_eq!(both.len(), 2);
    let v2 = both[0].clone();
    let report = bootcount::sync(&root, &cfg).unwrap();
    assert_eq!(report.counted, std::slice::from_ref(&v2));
    let mut expected = vec![
        format!("hearth-{}.conf", v1[0]),
        format!("hearth-{v2}+3.conf"),
    ];
    expected.sort();
    assert_eq!(esp_entries(&root), expected);
    assert_eq!(assert_bootable(&root, &both).len(), 2);
    let version = |name: &str| -> u32 {
        fs::read_to_string(entries.join(name))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("version "))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        version(&format!("hearth-{v2}+3.conf")) > version(&format!("hearth-{}.conf", v1[0])),
        "the default deployment must sort first"
    );

    // systemd-boot tried v2 three times: the counter is used up, and stays so.
    fs::rename(
        entries.join(format!("hearth-{v2}+3.conf")),
        entries.join(format!("hearth-{v2}+0-3.conf")),
    )
    .unwrap();
    bootcount::sync(&root, &cfg).unwrap();
    assert!(esp_entries(&root).contains(&format!("hearth-{v2}+0-3.conf")));
    let c = bootcount::counter(&root, &cfg, &id(&v2)).unwrap().unwrap();
    assert!(c.exhausted() && c.done == 3, "{c:?}");
    assert_eq!(bootcount::counter(&root, &cfg, &id(&v1[0])).unwrap(), None);

    // The agent drops v2 (ostree writes its next boot version): the sync follows.
    sysroot.admin(&["undeploy", "0"]).unwrap();
    let report = bootcount::sync(&root, &cfg).unwrap();
    assert_eq!(report.removed, [format!("hearth-{v2}+0-3.conf")]);
    assert_eq!(esp_entries(&root), [format!("hearth-{}.conf", v1[0])]);
    assert_eq!(assert_bootable(&root, &v1), v1);
    sysroot.remove().unwrap();
}

#[test]
fn a_power_loss_mid_sync_and_hostile_entries_leave_a_bootable_esp() {
    let sysroot = TestSysroot::create(&SysrootOptions::default()).unwrap();
    let root = sysroot.path().to_path_buf();
    let cfg = counting();
    fs::create_dir_all(root.join("efi/loader/entries")).unwrap();
    bootcount::sync(&root, &cfg).unwrap();
    let before = esp_entries(&root);
    let entries = root.join("efi/loader/entries");

    // What an interrupted sync leaves: a half-written entry and a half-copied kernel.
    fs::write(entries.join("hearth-x.conf.hearth-tmp"), "title half").unwrap();
    fs::create_dir_all(root.join("efi/hearth/ostree/debian-gone")).unwrap();
    fs::write(
        root.join("efi/hearth/ostree/debian-gone/vmlinuz.hearth-tmp"),
        "half",
    )
    .unwrap();
    // Entries of another OS are not hearth's: left alone.
    fs::write(entries.join("windows.conf"), "title other\nefi /x.efi\n").unwrap();
    let report = bootcount::sync(&root, &cfg).unwrap();
    assert_eq!(report.pruned.len(), 1, "{report:?}");
    assert!(!root.join("efi/hearth/ostree/debian-gone").exists());
    let mut expected = before.clone();
    expected.push("windows.conf".into());
    expected.sort();
    assert_eq!(esp_entries(&root), expected);
    let deployed = deployments(&sysroot);
    assert_eq!(assert_bootable(&root, &deployed), deployed);

    // An ostree entry that names a file outside /boot: refused with the entry and the field,
    // the ESP unchanged.
    let ostree_entries = root.join("boot/loader/entries");
    let file = fs::read_dir(&ostree_entries)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = fs::read_to_string(&file).unwrap();
    let hostile: String = text
        .lines()
        .map(|l| {
            if l.starts_with("initrd ") {
                "initrd /ostree/../../etc/shadow".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    fs::write(&file, hostile).unwrap();
    let e = bootcount::sync(&root, &cfg).unwrap_err().to_string();
    assert!(
        e.contains(&file.file_name().unwrap().to_string_lossy().to_string())
            && e.contains("initrd"),
        "{e}"
    );
    assert_eq!(esp_entries(&root), expected);
    assert_eq!(assert_bootable(&root, &deployed), deployed);
    for name in &before {
        assert!(EntryName::parse(name).is_some());
    }
    fs::write(&file, text).unwrap();
    sysroot.remove().unwrap();
}
