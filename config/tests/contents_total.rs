//! A config's decoded file contents are capped in total, not only per file: twelve gzip files
//! of 130 MiB each (a few hundred KiB of manifest) are refused at the entry that crosses the
//! limit, decoding stops there, and the process never holds more than about one limit's worth.
//! Alone in its binary so that the peak RSS (`VmHWM`) measures this test only.

use hearth_config::dataurl;
use hearth_config::ignition::{File, Resource};
use hearth_config::manifest::read_str;
use hearth_config::model::{MachineConfig, MachineConfigPool, ROLE_LABEL};
use hearth_config::render::{render_pool, RenderError};
use hearth_config::validate::MAX_CONFIG_CONTENTS_BYTES;
use std::io::Write;

const MIB: usize = 1024 * 1024;

fn gzip_zeros(mib: usize) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let chunk = vec![0u8; MIB];
    for _ in 0..mib {
        gz.write_all(&chunk).unwrap();
    }
    dataurl::encode(&gz.finish().unwrap())
}

fn peak_rss_mib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024
}

#[test]
fn total_contents_are_capped_on_read_and_on_render() {
    let url = gzip_zeros(130);
    let mut text = String::from("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: big\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n");
    for i in 0..12 {
        text.push_str(&format!(
            "      - path: /var/big/{i}\n        contents:\n          compression: gzip\n          source: {url}\n"
        ));
    }
    let before = peak_rss_mib();
    let (m, diags) = read_str("big.yaml", &text);
    let grown = peak_rss_mib().saturating_sub(before);
    assert!(m.machine_configs.is_empty());
    let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{diags:?}");
    let e = errors[0];
    // The first file fits in 256 MiB; the second crosses the limit.
    assert_eq!(e.path, "spec.config.storage.files[1].contents.source");
    assert_eq!(e.line, Some(18));
    assert!(e.message.contains("256 MiB in total"), "{e}");
    // Twelve files decoded would be 1.5 GiB; at most one limit and one file are ever held.
    assert!(
        grown < (MAX_CONFIG_CONTENTS_BYTES + 130 * MIB) / MIB,
        "peak RSS grew by {grown} MiB"
    );

    // Two configs under the limit each, over it once rendered together.
    let config = |name: &str| {
        let mut mc = MachineConfig::default();
        mc.metadata.name = name.into();
        mc.metadata
            .labels
            .insert(ROLE_LABEL.into(), "worker".into());
        mc.spec.config.storage.files.push(File {
            path: format!("/var/{name}"),
            contents: Resource {
                source: Some(url.clone()),
                compression: Some("gzip".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        mc
    };
    let configs = [config("a"), config("b")];
    match render_pool(&MachineConfigPool::builtin("worker"), &configs) {
        Err(RenderError::Invalid(errors)) => {
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(
                errors[0].starts_with("spec.config.storage.files[1].contents.source:")
                    && errors[0].contains("256 MiB in total"),
                "{errors:?}"
            );
        }
        other => panic!("rendered {} bytes of contents: {other:?}", 260 * MIB),
    }
}
