//! A MachineConfig survives `to_manifest` -> `read_str`, as YAML or JSON.

use super::generators::machine_config;
use hearth_config::ignition::SpecVersion;
use hearth_config::manifest::read_str;
use hearth_config::model::MachineConfig;
use proptest::collection::vec;
use proptest::prelude::*;

fn named_machine_config() -> impl Strategy<Value = MachineConfig> {
    (
        "[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?",
        machine_config(),
        prop::option::of(("[a-z]{1,8}", any::<String>())),
        prop::option::of(any::<String>()),
        // Kernel arguments: any printable text without an unbalanced quote (refused).
        vec("[\\PC&&\\S&&[^\"]]{1,12}", 0..3),
        prop::option::of(any::<String>()),
    )
        .prop_filter("a DNS-1123 name", |(name, ..)| {
            name.split('.')
                .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'))
        })
        .prop_map(
            |(name, (_, mut mc), annotation, os_image, kargs, unit_text)| {
                // Arbitrary text wherever the manifest allows any string, to exercise escaping.
                mc.metadata.name = name;
                if let Some((k, v)) = annotation {
                    mc.metadata
                        .annotations
                        .insert(format!("example.com/{k}"), v);
                }
                if let Some(os_image) = os_image {
                    mc.spec.os_image_url = os_image;
                }
                mc.spec.kernel_arguments.extend(kargs);
                if let (Some(text), Some(u)) = (unit_text, mc.spec.config.systemd.units.first_mut())
                {
                    u.contents = Some(text);
                }
                mc
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `to_manifest()` written as JSON reads back as the same MachineConfig, with no error.
    #[test]
    fn manifest_round_trip(mc in named_machine_config(), pretty in any::<bool>()) {
        let manifest = mc.to_manifest();
        let text = if pretty {
            serde_json::to_string_pretty(&manifest).unwrap()
        } else {
            serde_json::to_string(&manifest).unwrap()
        };
        let (m, diags) = read_str("round-trip.json", &text);
        let errors: Vec<String> =
            diags.iter().filter(|d| d.is_error()).map(ToString::to_string).collect();
        prop_assert!(errors.is_empty(), "errors reading back {}:\n{}", text, errors.join("\n"));
        prop_assert_eq!(m.machine_configs.len(), 1);
        let back = &m.machine_configs[0].item;
        prop_assert_eq!(&back.metadata, &mc.metadata);
        let mut want = mc.spec.config.clone();
        want.ignition.version = Some(SpecVersion::LATEST.as_str().to_string());
        prop_assert_eq!(&back.spec.config, &want);
        prop_assert_eq!(&back.spec.kernel_arguments, &mc.spec.kernel_arguments);
        prop_assert_eq!(back.spec.kernel_type, mc.spec.kernel_type);
        prop_assert_eq!(back.spec.fips, mc.spec.fips);
        prop_assert_eq!(&back.spec.os_image_url, &mc.spec.os_image_url);
        prop_assert_eq!(&back.spec.extensions, &mc.spec.extensions);
        prop_assert_eq!(back.spec.source_version, Some(SpecVersion::LATEST));
    }
}
