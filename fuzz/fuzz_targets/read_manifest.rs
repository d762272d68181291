//! Arbitrary bytes, read as (lossy) UTF-8 manifest text: reading, merging and writing every
//! Ignition version must never panic, whatever the input.
#![no_main]

use hearth_config::ignition::SpecVersion;
use hearth_config::manifest::read_str;
use hearth_config::render::merge;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (manifests, _diagnostics) = read_str("fuzz.yaml", &text);
    for mc in &manifests.machine_configs {
        let Ok(spec) = merge(&[&mc.item]) else {
            continue;
        };
        for version in SpecVersion::ALL {
            let _ = spec.config.to_version(version);
        }
        // The config as read (not merged) must also convert without panicking.
        for version in SpecVersion::ALL {
            let _ = mc.item.spec.config.to_version(version);
        }
    }
});
