//! Comparing the booted deployment with what was staged: the deployment, its kernel arguments
//! and the kernel command line, one bounded sentence per difference.

use std::path::Path;

use super::paths::inside;
use super::status::{DeploymentInfo, OsExpectation};

/// Compares a booted deployment with an expectation: one sentence per difference.
pub fn compare_booted(booted: &DeploymentInfo, expected: &OsExpectation) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(want) = &expected.deployment {
        if *want != booted.id {
            let what = if want.checksum == booted.id.checksum {
                "a deployment of the same commit with other boot settings"
            } else {
                "another commit"
            };
            out.push(format!(
                "the booted deployment is {}, not the staged deployment {want} ({what})",
                booted.describe()
            ));
        }
    }
    if let Some(want) = &expected.kernel_args {
        out.extend(compare_kernel_args(
            want,
            &booted.kernel_args,
            "the booted deployment",
        ));
    }
    out
}

/// The expected kernel arguments missing from `<root>/proc/cmdline`, one sentence each. Only on a
/// real boot (the command line carries `ostree=`); under systemd-nspawn it is the machine's own,
/// and only the boot entry counts. The boot loader may add arguments of its own
/// (`BOOT_IMAGE=...`): only missing ones count.
pub fn cmdline_differences(root: &Path, expected: &OsExpectation) -> Vec<String> {
    let (Some(want), Ok(cmdline)) = (
        &expected.kernel_args,
        std::fs::read_to_string(inside(root, "/proc/cmdline")),
    ) else {
        return Vec::new();
    };
    let args = hearth_config::plan::split_kernel_arguments(&[cmdline]);
    if !args.iter().any(|a| a.starts_with("ostree=")) {
        return Vec::new();
    }
    compare_kernel_args(want, &args, "/proc/cmdline")
        .into_iter()
        .filter(|d| d.contains(" is missing "))
        .collect()
}

/// Differences between an expected and an actual kernel argument list (multisets first, then
/// the order).
///
/// Linear in the lists' lengths (counts in a hash map, not a search per argument), and bounded
/// in what it says: at most [`MAX_KARG_DIFFERENCES`] sentences, each quoting the expected list
/// cut to [`MAX_KARG_LIST_SHOWN`] bytes, so a config with 100,000 arguments gives a short reason,
/// not one sentence per argument with the whole list in each.
pub fn compare_kernel_args(expected: &[String], actual: &[String], whose: &str) -> Vec<String> {
    use std::collections::HashMap;
    let mut available: HashMap<&str, usize> = HashMap::with_capacity(actual.len());
    for a in actual {
        *available.entry(a.as_str()).or_default() += 1;
    }
    // Each expected argument takes one occurrence from the actual list; what is left over in
    // the actual list was not expected (of identical arguments, the last ones are left over).
    let mut matched: HashMap<&str, usize> = HashMap::new();
    let mut missing = Vec::new();
    for arg in expected {
        match available.get_mut(arg.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                *matched.entry(arg.as_str()).or_default() += 1;
            }
            _ => missing.push(arg.as_str()),
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut remaining = Vec::new();
    for a in actual {
        let n = seen.entry(a.as_str()).or_default();
        *n += 1;
        if *n > matched.get(a.as_str()).copied().unwrap_or(0) {
            remaining.push(a.as_str());
        }
    }
    let expected_shown = shown_list(expected);
    let mut out = Vec::new();
    for arg in &missing {
        out.push(format!(
            "kernel argument {arg} is missing from {whose} (expected: {expected_shown})"
        ));
    }
    for arg in &remaining {
        out.push(format!(
            "kernel argument {arg} is present in {whose} but was not expected (expected: \
             {expected_shown})"
        ));
    }
    if missing.is_empty() && remaining.is_empty() && expected != actual {
        out.push(format!(
            "the kernel arguments of {whose} are in another order: expected `{expected_shown}`, \
             found `{}`",
            shown_list(actual)
        ));
    }
    if out.len() > MAX_KARG_DIFFERENCES {
        let more = out.len() - MAX_KARG_DIFFERENCES;
        out.truncate(MAX_KARG_DIFFERENCES);
        out.push(format!(
            "and {more} more kernel argument differences in {whose}"
        ));
    }
    out
}

/// At most this many kernel-argument differences are listed (then a count of the rest).
pub const MAX_KARG_DIFFERENCES: usize = 20;
/// A kernel argument list quoted in a difference is cut to this many bytes.
pub const MAX_KARG_LIST_SHOWN: usize = 1024;

/// `list` joined with spaces, cut (at a character boundary) to [`MAX_KARG_LIST_SHOWN`] bytes.
fn shown_list(list: &[String]) -> String {
    let mut out = String::new();
    for (i, a) in list.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(a);
        if out.len() > MAX_KARG_LIST_SHOWN {
            let mut cut = MAX_KARG_LIST_SHOWN;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str(&format!(" … ({} arguments in all)", list.len()));
            break;
        }
    }
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn kernel_arg_differences_are_sentences() {
        let want = s(&["rw", "hugepages=32", "selinux=0"]);
        assert!(compare_kernel_args(&want, &want, "x").is_empty());
        let d = compare_kernel_args(
            &want,
            &s(&["rw", "selinux=0", "quiet"]),
            "the booted deployment",
        );
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].starts_with("kernel argument hugepages=32 is missing from the booted deployment")
        );
        assert!(d[1].starts_with(
            "kernel argument quiet is present in the booted deployment but was not expected"
        ));
        let d = compare_kernel_args(&want, &s(&["rw", "selinux=0", "hugepages=32"]), "x");
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("another order"), "{d:?}");
        // Duplicates count.
        let d = compare_kernel_args(&s(&["a", "a"]), &s(&["a"]), "x");
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("a is missing"));
        // Of identical arguments the last ones are the extra ones; the order is still compared.
        let d = compare_kernel_args(&s(&["a", "b"]), &s(&["a", "b", "a"]), "x");
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("kernel argument a is present in x"),
            "{d:?}"
        );
    }

    #[test]
    fn kernel_arg_differences_are_bounded_and_linear() {
        // 100,000 arguments, none booted: a bounded reason, not 100,000 sentences quoting the
        // whole list (which was 100,000 × 1.1 MB), and no quadratic search.
        let want: Vec<String> = (0..100_000).map(|i| format!("arg{i}=value")).collect();
        let d = compare_kernel_args(&want, &s(&["rw"]), "the booted deployment");
        assert_eq!(d.len(), MAX_KARG_DIFFERENCES + 1);
        assert!(
            d.last().unwrap().starts_with("and 99981 more"),
            "{:?}",
            d.last()
        );
        assert!(
            d.iter().all(|x| x.len() < MAX_KARG_LIST_SHOWN + 200),
            "{}",
            d[0].len()
        );
        assert!(d[0].contains("(100000 arguments in all)"), "{}", d[0]);
        // Reversed: every argument present, another order; one sentence.
        let mut rev = want.clone();
        rev.reverse();
        let d = compare_kernel_args(&want, &rev, "x");
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("another order"));
    }
}
