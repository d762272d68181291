//! Kernel arguments: a diff that keeps order and duplicates.

use crate::plan_support as support;

use hearth_config::disruption::Outcome;
use hearth_config::model::MachineConfigSpec;
use hearth_config::plan::{apply_kernel_argument_ops, diff_kernel_arguments, Action, Plan};
use proptest::prelude::*;
use support::*;

fn kargs(list: &[&str]) -> MachineConfigSpec {
    spec(|s| s.kernel_arguments = strings(list))
}

fn karg_action(p: &Plan) -> Option<(Vec<String>, Vec<String>)> {
    p.actions.iter().find_map(|a| match a {
        Action::KernelArguments { delete, append } => Some((delete.clone(), append.clone())),
        _ => None,
    })
}

/// Plans `from -> to`, checks that applying the plan's operations to `from` gives exactly `to`,
/// and returns them.
fn check(from: &[&str], to: &[&str]) -> (Vec<String>, Vec<String>) {
    let p = plan_default(&kargs(from), &kargs(to));
    let (delete, append) = karg_action(&p).expect("a kernel argument action");
    assert_eq!(
        apply_kernel_argument_ops(&strings(from), &delete, &append),
        strings(to),
        "{from:?} -> {to:?}: -{delete:?} +{append:?}"
    );
    assert_eq!(p.disruption.outcome, Outcome::Reboot);
    (delete, append)
}

#[test]
fn hugepages_added_then_one_removed() {
    let (delete, append) = check(
        &[],
        &["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=32"],
    );
    assert!(delete.is_empty());
    assert_eq!(
        append,
        strings(&["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=32"])
    );

    let (delete, append) = check(
        &["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=32"],
        &["default_hugepagesz=1G", "hugepages=32"],
    );
    assert_eq!(delete, strings(&["hugepagesz=1G"]));
    assert!(append.is_empty());

    let p = plan_default(
        &kargs(&["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=32"]),
        &kargs(&["default_hugepagesz=1G", "hugepages=32"]),
    );
    assert_eq!(
        p.actions.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["kernel arguments: -hugepagesz=1G"]
    );
    assert_eq!(
        p.disruption.decisions[0].reason,
        "reboot: kernel arguments changed (always needs a reboot)"
    );
}

#[test]
fn duplicates_keep_their_order() {
    let dup = ["y=0", "z=4", "y=1", "z=4"];
    let (delete, append) = check(&[], &dup);
    assert!(delete.is_empty());
    assert_eq!(append, strings(&dup));

    // Dropping the second z=4 keeps the first three in place.
    let (delete, append) = check(&dup, &["y=0", "z=4", "y=1"]);
    assert_eq!(delete.len() + append.len(), 3, "-{delete:?} +{append:?}");

    // Dropping the first z=4: deleting one z=4 removes the first occurrence.
    let (delete, append) = check(&dup, &["y=0", "y=1", "z=4"]);
    assert_eq!(delete, strings(&["z=4"]));
    assert!(append.is_empty());

    // Adding a third z=4 at the end only appends.
    let (delete, append) = check(&dup, &["y=0", "z=4", "y=1", "z=4", "z=4"]);
    assert!(delete.is_empty());
    assert_eq!(append, strings(&["z=4"]));

    // Removing every duplicate.
    let (delete, append) = check(&dup, &[]);
    assert_eq!(delete.len(), 4);
    assert!(append.is_empty());
}

#[test]
fn reordering_moves_only_what_must_move() {
    let (delete, append) = check(&["a", "b", "c"], &["a", "c", "b"]);
    assert_eq!(delete, strings(&["b"]));
    assert_eq!(append, strings(&["b"]));
}

#[test]
fn entries_are_split_like_the_kernel_command_line() {
    // One entry holding two arguments is the same as two entries: nothing to do.
    let p = plan_default(&kargs(&["a=1 b=2"]), &kargs(&["a=1", "b=2"]));
    assert!(p.is_empty(), "{p}");
    // Quoted values stay one argument.
    let p = plan_default(&kargs(&[]), &kargs(&["dyndbg=\"file x.c +p\" quiet"]));
    assert_eq!(
        karg_action(&p).unwrap().1,
        strings(&["dyndbg=\"file x.c +p\"", "quiet"])
    );
}

fn token() -> impl Strategy<Value = String> {
    // Few distinct tokens, so that lists repeat them.
    prop::sample::select(vec!["a", "b", "c", "y=0", "y=1", "z=4"]).prop_map(str::to_string)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ops_reproduce_desired(
        current in prop::collection::vec(token(), 0..10),
        desired in prop::collection::vec(token(), 0..10),
    ) {
        let d = diff_kernel_arguments(&current, &desired);
        prop_assert_eq!(apply_kernel_argument_ops(&current, &d.delete, &d.append), desired.clone());
        // Every deletion removes an argument that is there.
        let mut left = current.clone();
        for x in &d.delete {
            let i = left.iter().position(|a| a == x);
            prop_assert!(i.is_some(), "deleting {} from {:?}", x, left);
            left.remove(i.unwrap());
        }
        // Nothing is deleted and re-appended needlessly: when `desired` only extends `current`,
        // nothing is deleted.
        if desired.starts_with(&current) {
            prop_assert!(d.delete.is_empty());
            prop_assert_eq!(&d.append[..], &desired[current.len()..]);
        }
        // Through the plan too.
        let from = spec(|s| s.kernel_arguments = current.clone());
        let to = spec(|s| s.kernel_arguments = desired.clone());
        let p = plan_default(&from, &to);
        match karg_action(&p) {
            Some((delete, append)) => {
                prop_assert_eq!(apply_kernel_argument_ops(&current, &delete, &append), desired.clone());
            }
            None => prop_assert_eq!(&current, &desired),
        }
    }

    #[test]
    fn same_arguments_no_action(args in prop::collection::vec(token(), 0..12)) {
        let d = diff_kernel_arguments(&args, &args);
        prop_assert!(d.delete.is_empty() && d.append.is_empty());
        let s = spec(|s| s.kernel_arguments = args.clone());
        prop_assert!(karg_action(&plan_default(&s, &s)).is_none());
    }
}

/// The quadratic definition `diff_kernel_arguments` implemented before it became `n log n`:
/// try every prefix length from the longest.
fn reference_diff(current: &[String], desired: &[String]) -> (Vec<String>, Vec<String>) {
    use std::collections::HashMap;
    let mut total: HashMap<&str, usize> = HashMap::new();
    for a in current {
        *total.entry(a.as_str()).or_default() += 1;
    }
    'prefix: for len in (0..=desired.len()).rev() {
        let prefix = &desired[..len];
        let mut keep: HashMap<&str, usize> = HashMap::new();
        for a in prefix {
            *keep.entry(a.as_str()).or_default() += 1;
        }
        if keep
            .iter()
            .any(|(a, k)| total.get(a).copied().unwrap_or(0) < *k)
        {
            continue;
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut kept = Vec::new();
        let mut delete = Vec::new();
        for a in current {
            let n = total[a.as_str()];
            let k = keep.get(a.as_str()).copied().unwrap_or(0);
            let rank = seen.entry(a.as_str()).or_default();
            if *rank + k >= n {
                kept.push(a);
            } else {
                delete.push(a.clone());
            }
            *rank += 1;
        }
        if kept.len() != prefix.len() || kept.iter().zip(prefix).any(|(a, b)| *a != b) {
            continue 'prefix;
        }
        return (delete, desired[len..].to_vec());
    }
    unreachable!("the empty prefix always matches")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The `n log n` diff gives exactly what the definition gives.
    #[test]
    fn fast_diff_equals_the_definition(
        current in prop::collection::vec(token(), 0..14),
        desired in prop::collection::vec(token(), 0..14),
    ) {
        let d = diff_kernel_arguments(&current, &desired);
        let (delete, append) = reference_diff(&current, &desired);
        prop_assert_eq!(d.delete, delete);
        prop_assert_eq!(d.append, append);
    }

    /// The agent's "arguments already booted" search, linear, equals the quadratic definition.
    #[test]
    fn booted_prefix_equals_the_definition(
        booted in prop::collection::vec(token(), 0..14),
        wanted in prop::collection::vec(token(), 0..14),
    ) {
        let slow = (0..=wanted.len())
            .rev()
            .find(|&n| booted.ends_with(&wanted[..n]))
            .unwrap_or(0);
        prop_assert_eq!(hearth_config::kargs::booted_prefix_len(&booted, &wanted), slow);
    }
}
