//! Alias- and merge-key-heavy YAML built from the input bytes: anchored lists and mappings
//! whose items alias earlier anchors (nested, fanned out, merged with `<<`), placed where a
//! MachineConfig reads lists of strings and mappings. Random bytes rarely form such documents,
//! so this target builds them. Reading must end in objects or diagnostics, never a panic, and
//! never more memory than the alias limits allow (run it with `-rss_limit_mb`, as
//! fuzz/run-ci.sh does: an expansion that escaped the limits is an out-of-memory crash).
#![no_main]

use hearth_config::manifest::read_str;
use hearth_config::node::parse_documents;
use libfuzzer_sys::fuzz_target;

/// The input, read one byte at a time (zeros once it runs out).
struct Bytes<'a> {
    data: &'a [u8],
    used: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> usize {
        let b = self.data.get(self.used).copied().unwrap_or(0);
        self.used += 1;
        usize::from(b)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes { data, used: 0 };
    let mut yaml = String::from(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: fuzz\nspec:\n  extensions:\n",
    );
    // Up to 16 anchored lines, each a list (or a mapping) of aliases of earlier anchors.
    let levels = input.next() % 16 + 1;
    yaml.push_str("  - &a0 [\"x\", \"y\"]\n");
    for level in 1..levels {
        let fan_out = input.next() % 12 + 1;
        let items: Vec<String> = (0..fan_out)
            .map(|_| format!("*a{}", input.next() % level))
            .collect();
        if input.next() % 4 == 0 {
            // A mapping merging earlier anchors (refused when they are lists).
            yaml.push_str(&format!(
                "  - &a{level} {{<<: [{}], k{level}: v}}\n",
                items.join(", ")
            ));
        } else {
            yaml.push_str(&format!("  - &a{level} [{}]\n", items.join(", ")));
        }
    }
    // An alias where the config reads a list, then the rest of the input as free text.
    yaml.push_str(&format!("  kernelArguments: *a{}\n", input.next() % levels));
    let rest = data.get(input.used..).unwrap_or_default();
    yaml.push_str(&String::from_utf8_lossy(rest));
    let _ = parse_documents(&yaml);
    let _ = read_str("fuzz.yaml", &yaml);
});
