//! Manifests written to hurt: every refusal names the file, line, object and field, and what a
//! manifest may legitimately do (aliases, merge keys, quoted kernel arguments) still works.

use hearth_config::diag::Diagnostic;
use hearth_config::manifest::read_str;

fn mc(spec: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: hostile\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n{spec}"
    )
}

fn errors(diags: &[Diagnostic]) -> Vec<&Diagnostic> {
    diags.iter().filter(|d| d.is_error()).collect()
}

#[test]
fn merge_keys_in_a_file_entry_are_merged_as_oc_apply_does() {
    let text = mc("  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - &base
        path: /etc/a.conf
        mode: 0644
        contents:
          source: data:,shared%0A
      - <<: *base
        path: /etc/b.conf
      - <<: [{mode: 0600}, *base]
        path: /etc/c.conf
");
    let (m, diags) = read_str("merge.yaml", &text);
    assert!(diags.is_empty(), "{diags:?}");
    let files = &m.machine_configs[0].item.spec.config.storage.files;
    assert_eq!(files.len(), 3);
    assert_eq!(files[1].path, "/etc/b.conf", "the explicit path wins");
    assert_eq!(files[1].mode, Some(0o644));
    assert_eq!(files[1].contents.source.as_deref(), Some("data:,shared%0A"));
    assert_eq!(files[2].mode, Some(0o600), "the first merged mapping wins");
    assert_eq!(files[2].contents.source.as_deref(), Some("data:,shared%0A"));
}

#[test]
fn a_merge_key_with_a_scalar_is_refused_with_its_line() {
    let text = mc("  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - <<: /etc/x
        path: /etc/b.conf
");
    let (m, diags) = read_str("merge.yaml", &text);
    assert!(m.machine_configs.is_empty());
    let e = errors(&diags);
    assert_eq!(e.len(), 1, "{diags:?}");
    assert_eq!(e[0].line, Some(13));
    assert!(e[0].message.contains("merge key"), "{}", e[0]);
}

#[test]
fn quoted_kernel_arguments_stay_whole_and_entries_are_kept_as_written() {
    use hearth_config::model::{MachineConfigPool, MachineConfigSpec};
    use hearth_config::plan::{plan, Action};
    use hearth_config::render::render_pool;
    let text =
        mc("  kernelArguments:\n  - a=1 b=2\n  - 'dyndbg=\"file x.c +p\"'\n  - foo=\"x y\"\n");
    let (m, diags) = read_str("kargs.yaml", &text);
    assert!(diags.is_empty(), "{diags:?}");
    let configs: Vec<_> = m.machine_configs.into_iter().map(|s| s.item).collect();
    let rendered = render_pool(&MachineConfigPool::builtin("worker"), &configs).unwrap();
    assert_eq!(
        rendered.spec.kernel_arguments,
        ["a=1 b=2", "dyndbg=\"file x.c +p\"", "foo=\"x y\""],
        "the rendered config keeps the entries as the user wrote them"
    );
    let p = plan(
        &MachineConfigSpec::default(),
        &rendered.spec,
        &Default::default(),
    );
    let append = p
        .actions
        .iter()
        .find_map(|a| match a {
            Action::KernelArguments { append, .. } => Some(append.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        append,
        ["a=1", "b=2", "dyndbg=\"file x.c +p\"", "foo=\"x y\""],
        "the node gets kernel arguments split as the kernel splits them"
    );
}

#[test]
fn kernel_arguments_with_control_characters_are_refused_at_the_entry_written() {
    let text = mc("  kernelArguments:\n  - a=1 b=2\n  - \"c\\nd\"\n  - 'e=\"unclosed'\n  - ''\n");
    let (m, diags) = read_str("kargs.yaml", &text);
    assert!(m.machine_configs.is_empty());
    let e = errors(&diags);
    let paths: Vec<(&str, Option<usize>)> = e.iter().map(|d| (d.path.as_str(), d.line)).collect();
    assert_eq!(
        paths,
        [
            ("spec.kernelArguments[1]", Some(10)),
            ("spec.kernelArguments[2]", Some(11)),
            ("spec.kernelArguments[3]", Some(12)),
        ],
        "{diags:?}"
    );
    assert!(e[0].message.contains("control character '\\n'"), "{}", e[0]);
    assert!(e[1].message.contains("unclosed double quote"), "{}", e[1]);
    assert!(e[2].message.contains("empty"), "{}", e[2]);
}

#[test]
fn ssh_keys_and_password_hashes_with_line_breaks_are_refused_naming_user_and_key() {
    let text = mc("  config:
    ignition:
      version: 3.4.0
    passwd:
      users:
      - name: core
        passwordHash: \"$6$x\\nroot::0:0::/:/bin/sh\"
        sshAuthorizedKeys:
        - ssh-ed25519 AAAA good
        - \"ssh-ed25519 AAAA a\\nssh-ed25519 BBBB injected\"
        - \"ssh-ed25519 AAAA b\\r\"
        - \"ssh-ed25519 AAAA c\\0\"
        - \"ssh-ed25519\\tAAAA tab-separated\"
");
    let (m, diags) = read_str("keys.yaml", &text);
    assert!(m.machine_configs.is_empty());
    let e = errors(&diags);
    let got: Vec<(&str, Option<usize>)> = e.iter().map(|d| (d.path.as_str(), d.line)).collect();
    assert_eq!(
        got,
        [
            ("spec.config.passwd.users[0].sshAuthorizedKeys[1]", Some(17)),
            ("spec.config.passwd.users[0].sshAuthorizedKeys[2]", Some(18)),
            ("spec.config.passwd.users[0].sshAuthorizedKeys[3]", Some(19)),
            ("spec.config.passwd.users[0].passwordHash", Some(14)),
        ],
        "{diags:?}"
    );
    assert!(
        e[0].message.contains("SSH key 1 of user \"core\""),
        "{}",
        e[0]
    );
    assert!(e[0].message.contains("'\\n'"), "{}", e[0]);
    assert!(e[3].message.contains("password hash"), "{}", e[3]);
}

fn config_errors(config: &str) -> Vec<(String, String)> {
    let text = mc(&format!(
        "  config:\n    ignition:\n      version: 3.4.0\n{config}"
    ));
    let (_, diags) = read_str("x.yaml", &text);
    diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.path.clone(), d.message.clone()))
        .collect()
}

#[test]
fn special_mode_bits_are_refused_naming_path_and_what_to_do() {
    let e = config_errors(
        "    storage:
      files:
      - {path: /usr/local/bin/suid, mode: 04755, contents: {source: 'data:,x'}}
      - {path: /usr/local/bin/sgid, mode: 02755, contents: {source: 'data:,x'}}
      - {path: /etc/ok, mode: 0755, contents: {source: 'data:,x'}}
      - {path: /etc/sticky, mode: 513, contents: {source: 'data:,x'}}
",
    );
    assert_eq!(e.len(), 3, "{e:?}");
    assert_eq!(e[0].0, "spec.config.storage.files[0].mode");
    assert!(
        e[0].1
            .contains("mode 4755 of /usr/local/bin/suid sets the setuid bit")
            && e[0]
                .1
                .contains("set the bit with a systemd unit or tmpfiles.d"),
        "{}",
        e[0].1
    );
    assert!(e[1].1.contains("setgid"), "{}", e[1].1);
    // 513 is 01001: the sticky bit written in decimal.
    assert_eq!(e[2].0, "spec.config.storage.files[3].mode");
    assert!(e[2].1.contains("sticky"), "{}", e[2].1);
}

#[test]
fn files_on_virtual_filesystems_are_refused() {
    let e = config_errors(
        "    storage:
      files:
      - {path: /proc/sys/kernel/panic, contents: {source: 'data:,1'}}
      - {path: /sys/kernel/mm/transparent_hugepage/enabled, contents: {source: 'data:,never'}}
      - {path: /dev/sda, contents: {source: 'data:,x'}}
      - {path: /devices/not-dev, contents: {source: 'data:,x'}}
      - {path: /etc/sysctl.d/panic.conf, contents: {source: 'data:,x'}}
      links:
      - {path: /dev/disk/by-label/x, target: /dev/sda}
",
    );
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.config.storage.files[0].path",
            "spec.config.storage.files[1].path",
            "spec.config.storage.files[2].path",
            "spec.config.storage.links[0].path",
        ],
        "{e:?}"
    );
    assert!(e[0].1.contains("/etc/sysctl.d/"), "{}", e[0].1);
    assert!(e[2].1.contains("udev rule"), "{}", e[2].1);
}

#[test]
fn the_agents_own_state_binaries_and_unit_are_refused_naming_the_field() {
    let e = config_errors(
        "    storage:
      files:
      - {path: /var/lib/hearth/journal.json, contents: {source: 'data:,{}'}}
      - {path: /var/lib/hearth/node-token, contents: {source: 'data:,x'}}
      - {path: /usr/bin/hearth-agent, contents: {source: 'data:,x'}}
      - {path: /etc/hearth/os.json, contents: {source: 'data:,%7B%7D'}}
      - {path: /var/lib/hearthx, contents: {source: 'data:,x'}}
      directories:
      - {path: /var/lib/hearth/configs}
      links:
      - {path: /etc/systemd/system/hearth-agent.service, target: /dev/null}
    systemd:
      units:
      - {name: hearth-agent.service, mask: true}
      - {name: hearth-agent.service, enabled: false}
      - name: hearth-agent.service
        dropins:
        - {name: 10-proxy.conf, contents: \"[Service]\\nEnvironment=HTTPS_PROXY=http://proxy:3128\\n\"}
",
    );
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.config.storage.files[0].path",
            "spec.config.storage.files[1].path",
            "spec.config.storage.files[2].path",
            "spec.config.storage.directories[0].path",
            "spec.config.storage.links[0].path",
            "spec.config.systemd.units[0].mask",
            "spec.config.systemd.units[1].name",
            "spec.config.systemd.units[1].enabled",
            "spec.config.systemd.units[2].name",
        ],
        "{e:?}"
    );
    assert!(e[0].1.contains("belongs to hearth-agent"), "{}", e[0].1);
    assert!(e[2].1.contains("upgrade the agent"), "{}", e[2].1);
    assert!(e[4].1.contains("drop-in"), "{}", e[4].1);
    assert!(e[5].1.contains("drop-ins (dropins) only"), "{}", e[5].1);
    // Drop-ins of the agent's unit alone are a config's to write, and so is the OS settings'
    // file; a link into the agent's state is not.
    let e = config_errors(
        "    storage:
      files:
      - {path: /etc/hearth/os.json, contents: {source: 'data:,%7B%7D'}}
    systemd:
      units:
      - name: hearth-agent.service
        dropins:
        - {name: 10-proxy.conf, contents: \"[Service]\\nEnvironment=HTTPS_PROXY=http://proxy:3128\\n\"}
",
    );
    assert!(e.is_empty(), "{e:?}");
    let e = config_errors(
        "    storage:
      links:
      - {path: /etc/state, target: ../var/lib/hearth}
",
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, "spec.config.storage.links[0].target");
    assert!(
        e[0].1.contains("the link leads to /var/lib/hearth"),
        "{}",
        e[0].1
    );
}

#[test]
fn unit_and_dropin_names_say_what_is_wrong() {
    let e = config_errors(
        "    systemd:
      units:
      - name: \"a\\0.service\"
      - name: a/b.service
      - name: a b.service
      - name: .service
      - name: \"@x.service\"
      - name: getty@tty1.service
      - name: foo@.service
      - name: x.service
        dropins:
        - name: \"a\\0.conf\"
        - name: d/x.conf
        - name: .conf
",
    );
    let msgs: Vec<(&str, &str)> = e.iter().map(|(p, m)| (p.as_str(), m.as_str())).collect();
    let find = |path: &str| {
        msgs.iter()
            .find(|(p, _)| *p == path)
            .map(|(_, m)| *m)
            .unwrap_or_else(|| panic!("no error at {path}: {msgs:?}"))
    };
    assert!(find("spec.config.systemd.units[0].name").contains("control character '\\0'"));
    assert!(find("spec.config.systemd.units[1].name").contains("must not contain '/'"));
    assert!(find("spec.config.systemd.units[2].name").contains("contains ' '"));
    assert!(find("spec.config.systemd.units[3].name").contains("no name before .service"));
    assert!(find("spec.config.systemd.units[4].name").contains("no name before '@'"));
    assert!(find("spec.config.systemd.units[7].dropins[0].name").contains("control character"));
    assert!(find("spec.config.systemd.units[7].dropins[1].name").contains("must not contain '/'"));
    assert!(find("spec.config.systemd.units[7].dropins[2].name").contains("ending in .conf"));
    assert_eq!(e.len(), 8, "templates and instances are valid: {msgs:?}");
}

#[test]
fn paths_with_control_characters_or_too_long_are_refused() {
    let long = "a".repeat(256);
    let e = config_errors(&format!(
        "    storage:
      files:
      - {{path: \"/etc/a\\nb\", contents: {{source: 'data:,x'}}}}
      - {{path: /etc/{long}, contents: {{source: 'data:,x'}}}}
"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].1.contains("control character '\\n'"), "{}", e[0].1);
    assert!(e[1].1.contains("at most 255 bytes"), "{}", e[1].1);
}

#[test]
fn every_problem_of_an_object_is_reported_not_only_the_first() {
    let text = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: Not_A_Name
spec:
  fips: maybe
  kernelArguments: {a: b}
  extensions: [\"bad name\"]
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/a
        mode: \"0644\"
      - path: null
      - path: /etc/c
        overwrite: sometimes
        contents: /etc/c
      - path: relative
        contents: {source: 'data:,x'}
";
    let (m, diags) = read_str("many.yaml", text);
    assert!(m.machine_configs.is_empty());
    let got: Vec<(Option<usize>, &str)> = errors(&diags)
        .iter()
        .map(|d| (d.line, d.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(4), "metadata.name"),
            (Some(6), "spec.fips"),
            (Some(7), "spec.kernelArguments"),
            (Some(15), "spec.config.storage.files[0].mode"),
            (Some(16), "spec.config.storage.files[1].path"),
            (Some(18), "spec.config.storage.files[2].overwrite"),
            (Some(19), "spec.config.storage.files[2].contents"),
            // Validation still runs on what decoded (and says nothing about placeholders, such
            // as the empty path decoding went on with for files[1]).
            (Some(20), "spec.config.storage.files[3].path"),
            (Some(8), "spec.extensions[0]"),
        ],
        "{diags:#?}"
    );
    for d in errors(&diags) {
        assert_eq!(d.object.as_deref(), Some("MachineConfig/Not_A_Name"), "{d}");
    }
}
