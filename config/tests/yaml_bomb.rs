//! A "billion laughs" manifest (nine levels of nine aliases: 9^9 scalars from 518 bytes) is
//! refused before it is expanded, with the file, line and reason, and without the memory an
//! expansion would take. This test is alone in its binary so that the process's peak RSS
//! (`VmHWM`) measures this parse only.

use hearth_config::manifest::read_str;

fn bomb() -> String {
    let mut text = String::from(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: lol\nspec:\n  kernelArguments:\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    text.push_str(
        "  - &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for w in names.windows(2) {
        let (prev, this) = (w[0], w[1]);
        let items = vec![format!("*{prev}"); 9].join(",");
        text.push_str(&format!("  - &{this} [{items}]\n"));
    }
    text
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[test]
fn billion_laughs_is_refused_with_file_line_and_reason_in_bounded_memory() {
    let text = bomb();
    assert!(text.len() < 600, "the bomb is {} bytes", text.len());
    println!("{} bytes:\n{text}", text.len());
    let before = peak_rss_kib();
    let (m, diags) = read_str("bomb.yaml", &text);
    let grown_mib = (peak_rss_kib().saturating_sub(before)) / 1024;
    assert!(m.machine_configs.is_empty());
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert!(d.is_error());
    assert_eq!(d.file, "bomb.yaml");
    // The refusal comes at an alias line of the nested lists, not at the start of the file.
    let line = d.line.expect("a line");
    assert!((8..=15).contains(&line), "{d}");
    assert!(d.message.contains("excessive aliasing"), "{d}");
    assert!(
        !d.message.contains("indentation"),
        "not a syntax error: {d}"
    );
    // Expanded, the bomb is 387 million nodes (tens of GiB); refused, it must not even grow the
    // process by 64 MiB.
    assert!(grown_mib < 64, "peak RSS grew by {grown_mib} MiB");
}
