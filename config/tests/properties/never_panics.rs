//! `read_str` never panics, whatever the text: arbitrary, YAML-like, mutations and truncations
//! of a valid manifest; everything a caller does with the result is exercised too.

use super::generators::infra_pool;
use hearth_config::ignition::SpecVersion;
use hearth_config::manifest::read_str;
use hearth_config::model::MachineConfig;
use hearth_config::render::{merge, render_pool};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

/// A typical manifest (YAML, several documents), the starting point of the mutations.
const VALID: &str = r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  labels:
    machineconfiguration.openshift.io/role: worker
  name: 99-worker-chrony
spec:
  config:
    ignition:
      version: 3.2.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys:
        - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1 alice@example
    storage:
      files:
      - contents:
          source: data:,server%20clock.example%20iburst%0A
        mode: 0644
        overwrite: true
        path: /etc/chrony.conf
      - contents:
          compression: ""
          source: data:text/plain;charset=utf-8;base64,aGVsbG8K
        mode: 420
        path: /etc/hello
        user: {name: root}
    systemd:
      units:
      - name: chronyd.service
        enabled: true
        dropins:
        - name: 10-hearth.conf
          contents: |
            [Service]
            Restart=always
  kernelArguments:
  - nosmt
  - "a=1 a=2"
  kernelType: realtime
  extensions: [usbguard]
  osImageURL: ""
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-old
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 2.2.0}
    storage:
      files:
      - filesystem: root
        path: /etc/old
        contents: {source: "data:,old"}
        mode: 0600
    systemd:
      units:
      - {name: old.service, enable: true, contents: "[Unit]\n"}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: infra
spec:
  machineConfigSelector:
    matchExpressions:
    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/infra: ""
  maxUnavailable: 25%
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, labels: {node-role.kubernetes.io/infra: ""}}
"#;

/// Everything a caller does with what `read_str` returns: merge, render and write every version.
fn read_and_use(text: &str) {
    let (m, _diags) = read_str("fuzz.yaml", text);
    let configs: Vec<MachineConfig> = m.machine_configs.into_iter().map(|s| s.item).collect();
    for mc in &configs {
        if let Ok(spec) = merge(&[mc]) {
            for v in SpecVersion::ALL {
                let _ = spec.config.to_version(v);
            }
        }
    }
    let _ = render_pool(&infra_pool(), &configs);
}

#[test]
fn the_mutation_seed_is_valid() {
    let (m, diags) = read_str("valid.yaml", VALID);
    assert!(!diags.iter().any(|d| d.is_error()), "{diags:?}");
    assert_eq!(m.machine_configs.len(), 2);
    assert_eq!(m.pools.len(), 1);
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(
        m.machine_configs[0].item.spec.kernel_arguments,
        ["nosmt", "a=1 a=2"],
        "entries are kept as written"
    );
    assert_eq!(
        m.machine_configs[0].item.spec.config.storage.files[0].mode,
        Some(0o644)
    );
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(prop::sample::Index),
    FlipByte(prop::sample::Index, u8),
    Indent(prop::sample::Index, i8),
    DeleteLine(prop::sample::Index),
    DuplicateLine(prop::sample::Index),
    Insert(prop::sample::Index, &'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let index = any::<prop::sample::Index>;
    prop_oneof![
        index().prop_map(Mutation::Truncate),
        (index(), 1u8..=255).prop_map(|(i, m)| Mutation::FlipByte(i, m)),
        (index(), -4i8..=4).prop_map(|(i, d)| Mutation::Indent(i, d)),
        index().prop_map(Mutation::DeleteLine),
        index().prop_map(Mutation::DuplicateLine),
        (
            index(),
            select(
                &[
                    ": ",
                    "- ",
                    "{",
                    "}",
                    "[",
                    "]",
                    "\"",
                    "'",
                    "&a ",
                    "*a",
                    "<<: *a\n",
                    "!!binary ",
                    "!tag ",
                    "---\n",
                    "...\n",
                    "\t",
                    "#",
                    "|",
                    ">-\n",
                    "? ",
                    "%YAML 1.2\n",
                    "\0",
                    "null",
                    "~",
                    "0x",
                    "0o7777777777777777777777",
                    "-9223372036854775809",
                    "\u{feff}",
                    "é",
                    "${{X}}",
                ][..],
            ),
        )
            .prop_map(|(i, s)| Mutation::Insert(i, s)),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for m in mutations {
        let mut lines: Vec<Vec<u8>> = bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        match m {
            Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len() + 1)),
            Mutation::FlipByte(i, mask) if !bytes.is_empty() => {
                let at = i.index(bytes.len());
                bytes[at] ^= mask;
            }
            Mutation::Insert(i, s) => {
                let at = i.index(bytes.len() + 1);
                bytes.splice(at..at, s.bytes());
            }
            Mutation::Indent(i, delta) => {
                let at = i.index(lines.len());
                let line = &mut lines[at];
                if *delta >= 0 {
                    line.splice(0..0, std::iter::repeat_n(b' ', *delta as usize));
                } else {
                    let lead = line.iter().take_while(|b| **b == b' ').count();
                    line.drain(..lead.min(delta.unsigned_abs() as usize));
                }
                bytes = lines.join(&b'\n');
            }
            Mutation::DeleteLine(i) => {
                lines.remove(i.index(lines.len()));
                bytes = lines.join(&b'\n');
            }
            Mutation::DuplicateLine(i) => {
                let at = i.index(lines.len());
                let copy = lines[at].clone();
                lines.insert(at, copy);
                bytes = lines.join(&b'\n');
            }
            Mutation::FlipByte(..) => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn read_str_never_panics_on_arbitrary_text(text in any::<String>()) {
        read_and_use(&text);
    }

    #[test]
    fn read_str_never_panics_on_yaml_like_text(
        text in "([ a-z0-9:{}\\[\\],\"'&*!|>#%@`~.-]|\n|\t|  ){0,200}"
    ) {
        read_and_use(&text);
    }

    #[test]
    fn read_str_never_panics_on_mutated_manifests(mutations in vec(mutation(), 1..6)) {
        read_and_use(&apply(VALID, &mutations));
    }

    /// A truncated manifest is either read or refused with a diagnostic; never silently empty
    /// when the text still holds a complete object's header.
    #[test]
    fn truncation_never_panics_and_reports(at in 0..VALID.len()) {
        let text = &VALID[..at];
        let (m, diags) = read_str("cut.yaml", text);
        let objects = m.machine_configs.len() + m.pools.len() + m.nodes.len();
        if text.contains("kind: MachineConfig\n") {
            prop_assert!(objects > 0 || !diags.is_empty(), "nothing read and nothing said for {:?}", text);
        }
    }
}
