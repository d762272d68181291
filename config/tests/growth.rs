//! No work grows faster than `n log n` in a size a manifest controls. Every path a manifest
//! goes through (reading, validating, rendering, planning, deciding disruption, the kernel
//! argument diff) is run at three sizes a factor of ten apart (1,000 to 100,000 entries where a
//! debug build is fast enough, 200 to 20,000 for the heavier whole-config paths) and the time
//! ratios between sizes are compared within this one run (no absolute times): a tenfold input
//! must not take more than `MAX_RATIO` times as long. Linear work gives about 10, `n log n`
//! about 13, quadratic work 100 (before the fixes, the kernel argument diff took 33 s for 16,000
//! arguments).
//!
//! Each size is timed as the best of two runs, a small size's time is counted as at least
//! `FLOOR` so that timer noise on tiny inputs cannot make a ratio, and a step over the bound is
//! measured again (both sizes, up to three times) before it fails. Everything runs in one test so
//! that no other test of this binary competes for the CPU while it is timed.

use hearth_config::disruption::{evaluate, Change};
use hearth_config::ignition::{Dropin, File, Resource, Unit, User};
use hearth_config::manifest::read_str;
use hearth_config::model::{
    DisruptionPolicies, FilePolicy, MachineConfig, MachineConfigPool, MachineConfigSpec,
    PolicyAction, ROLE_LABEL,
};
use hearth_config::model::{LabelSelector, SelectorOperator, SelectorRequirement};
use hearth_config::plan::{apply_kernel_argument_ops, diff_kernel_arguments, plan};
use hearth_config::render::{configs_for_pool, render_pool};
use std::time::{Duration, Instant};

const MAX_RATIO: f64 = 35.0;
const FLOOR: Duration = Duration::from_millis(2);

/// Times `run` on inputs built by `build` at each size and checks every tenfold step as soon as
/// it is measured (a quadratic regression fails at the middle size instead of running for
/// minutes at the largest). A step over the bound is measured again, both sizes, up to
/// `ATTEMPTS` times: a load spike on a shared machine passes on a second look, superlinear work
/// fails every time.
fn check_growth<T>(what: &str, sizes: &[usize], build: impl Fn(usize) -> T, run: impl Fn(&T)) {
    let best = |input: &T| {
        (0..2)
            .map(|_| {
                let start = Instant::now();
                run(input);
                start.elapsed()
            })
            .min()
            .unwrap()
    };
    let mut times: Vec<(usize, Duration)> = Vec::new();
    // The previous size, its input and its time (the latest measurement of it).
    let mut previous: Option<(usize, T, Duration)> = None;
    for &n in sizes {
        let input = build(n);
        let mut t = best(&input);
        if let Some((n1, small, t1)) = &mut previous {
            let n1 = *n1;
            let size_ratio = n as f64 / n1 as f64;
            let over = |t1: Duration, t: Duration| {
                let ratio = t.as_secs_f64() / t1.max(FLOOR).as_secs_f64();
                (ratio > MAX_RATIO * size_ratio / 10.0).then_some(ratio)
            };
            let mut attempt = 1;
            while let Some(ratio) = over(*t1, t) {
                assert!(
                    attempt < ATTEMPTS,
                    "{what}: {n1} -> {n} entries took {t1:?} -> {t:?} ({ratio:.1}x for {size_ratio}x the input, {ATTEMPTS} measurements): superlinear"
                );
                eprintln!("{what}: {n1} -> {n} took {ratio:.1}x; measuring again");
                attempt += 1;
                *t1 = best(small);
                t = best(&input);
            }
            times.last_mut().unwrap().1 = *t1;
        }
        times.push((n, t));
        previous = Some((n, input, t));
    }
    eprintln!("{what}: {times:?}");
}

/// How many times a step over the bound is measured before the test fails.
const ATTEMPTS: u32 = 3;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const CONFIG_SIZES: [usize; 3] = [200, 2_000, 20_000];

#[test]
fn no_path_grows_superlinearly() {
    kernel_argument_diff_and_apply();
    render_merges_in_n_log_n();
    plan_and_disruption_in_n_log_n();
    reading_and_validating_manifests_in_n_log_n();
}

fn kernel_argument_diff_and_apply() {
    // Rotating by one defeats every long prefix: the old diff tried them all.
    check_growth(
        "kernel argument diff",
        &SIZES,
        |n| {
            let current: Vec<String> = (0..n).map(|i| format!("a{i}=x")).collect();
            let mut desired = current.clone();
            desired.rotate_left(1);
            (current, desired)
        },
        |(c, d)| {
            let diff = diff_kernel_arguments(c, d);
            assert_eq!(&apply_kernel_argument_ops(c, &diff.delete, &diff.append), d);
        },
    );
    // The agent's search for arguments already booted: a run of one argument defeats a naive
    // suffix comparison at every length.
    check_growth(
        "booted kernel arguments",
        &SIZES,
        |n| {
            let booted: Vec<String> = vec!["a".to_string(); n];
            let mut wanted = booted.clone();
            wanted.push("b".into());
            (booted, wanted)
        },
        |(b, w)| {
            assert_eq!(hearth_config::kargs::booted_prefix_len(b, w), b.len());
        },
    );
}

fn file(path: String) -> File {
    File {
        path,
        contents: Resource {
            source: Some("data:,x".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn mc(name: &str, f: impl FnOnce(&mut MachineConfigSpec)) -> MachineConfig {
    let mut m = MachineConfig::default();
    m.metadata.name = name.into();
    m.metadata.labels.insert(ROLE_LABEL.into(), "worker".into());
    f(&mut m.spec);
    m
}

/// Two configs with `n` files, units with drop-ins, SSH keys and extensions each, half of them
/// shared so that merging has to find them.
fn big_configs(n: usize) -> Vec<MachineConfig> {
    let part = |name: &str, offset: usize| {
        mc(name, |s| {
            let c = &mut s.config;
            c.storage.files = (0..n)
                .map(|i| file(format!("/etc/f/{}", i + offset)))
                .collect();
            c.systemd.units = vec![Unit {
                name: "big.service".into(),
                dropins: (0..n)
                    .map(|i| Dropin {
                        name: format!("{}.conf", i + offset),
                        contents: Some("[Unit]\n".into()),
                    })
                    .collect(),
                ..Default::default()
            }];
            c.passwd.users = vec![User {
                name: "core".into(),
                ssh_authorized_keys: (0..n)
                    .map(|i| format!("ssh-ed25519 K{} u", i + offset))
                    .collect(),
                ..Default::default()
            }];
            s.extensions = (0..n).map(|i| format!("ext{}", i + offset)).collect();
            s.kernel_arguments = (0..n).map(|i| format!("k{}", i + offset)).collect();
        })
    };
    vec![part("00-a", 0), part("10-b", n / 2)]
}

fn render_merges_in_n_log_n() {
    check_growth("render", &CONFIG_SIZES, big_configs, |configs| {
        render_pool(&MachineConfigPool::builtin("worker"), configs).unwrap();
    });
    // A pool whose machineConfigSelector lists n roles, over n configs of those roles.
    check_growth(
        "pool selector",
        &[100, 1_000, 10_000],
        |n| {
            let mut pool = MachineConfigPool::builtin("wide");
            pool.machine_config_selector = LabelSelector {
                match_expressions: vec![SelectorRequirement {
                    key: ROLE_LABEL.into(),
                    operator: SelectorOperator::In,
                    values: (0..n).map(|i| format!("r{i}")).collect(),
                }],
                ..Default::default()
            };
            let configs: Vec<MachineConfig> = (0..n)
                .map(|i| {
                    let mut m = mc(&format!("{i:06}"), |_| {});
                    m.metadata.labels.insert(ROLE_LABEL.into(), format!("r{i}"));
                    m
                })
                .collect();
            (pool, configs)
        },
        |(pool, configs)| {
            assert_eq!(configs_for_pool(pool, configs).len(), configs.len());
        },
    );
    check_growth(
        "render many configs",
        &[100, 1_000, 10_000],
        many_configs,
        |configs| {
            let r = render_pool(&MachineConfigPool::builtin("worker"), configs).unwrap();
            assert_eq!(r.spec.config.systemd.units[0].dropins.len(), configs.len());
        },
    );
}

/// `n` configs each adding one drop-in to the same unit and one SSH key to `core`: merging must
/// not index the growing lists again for every config.
fn many_configs(n: usize) -> Vec<MachineConfig> {
    (0..n)
        .map(|i| {
            mc(&format!("{i:06}"), |s| {
                s.config.systemd.units = vec![Unit {
                    name: "big.service".into(),
                    dropins: vec![Dropin {
                        name: format!("{i}.conf"),
                        contents: Some("[Unit]\n".into()),
                    }],
                    ..Default::default()
                }];
                s.config.passwd.users = vec![User {
                    name: "core".into(),
                    ssh_authorized_keys: vec![format!("ssh-ed25519 K{i} u")],
                    ..Default::default()
                }];
            })
        })
        .collect()
}

fn plan_and_disruption_in_n_log_n() {
    check_growth(
        "plan",
        &CONFIG_SIZES,
        |n| {
            let configs = big_configs(n);
            let pool = MachineConfigPool::builtin("worker");
            let from = render_pool(&pool, &configs[..1]).unwrap().spec;
            let to = render_pool(&pool, &configs[1..]).unwrap().spec;
            let policies = DisruptionPolicies {
                files: (0..n)
                    .map(|i| FilePolicy {
                        path: format!("/etc/f/{}", i * 2),
                        actions: vec![PolicyAction::None],
                    })
                    .collect(),
                ..Default::default()
            };
            (from, to, policies)
        },
        |(from, to, policies)| {
            let p = plan(from, to, policies);
            assert!(!p.actions.is_empty());
        },
    );
    check_growth(
        "disruption",
        &SIZES,
        |n| {
            let changes: Vec<Change> = (0..n)
                .map(|i| Change::File {
                    path: format!("/etc/d{}/x/y", i % 1000),
                    removed: false,
                })
                .collect();
            let policies = DisruptionPolicies {
                files: (0..n)
                    .map(|i| FilePolicy {
                        path: format!("/etc/d{i}"),
                        actions: vec![PolicyAction::None],
                    })
                    .collect(),
                ..Default::default()
            };
            (changes, policies)
        },
        |(changes, policies)| {
            evaluate(changes, policies);
        },
    );
}

fn reading_and_validating_manifests_in_n_log_n() {
    // A manifest with n files, n kernel arguments and a mapping of n labels: parsing, the
    // duplicate-key check, decoding and validation.
    check_growth(
        "read manifest",
        &CONFIG_SIZES,
        |n| {
            let mut t = String::from(
                "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: big\n  labels:\n",
            );
            for i in 0..n {
                t.push_str(&format!("    l{i}: v\n"));
            }
            t.push_str("spec:\n  kernelArguments:\n");
            for i in 0..n {
                t.push_str(&format!("  - k{i}=\"a b\"\n"));
            }
            t.push_str(
                "  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n",
            );
            for i in 0..n {
                t.push_str(&format!(
                    "      - {{path: /etc/f/{i}, contents: {{source: 'data:,x'}}}}\n"
                ));
            }
            t
        },
        |text| {
            let (m, diags) = read_str("big.yaml", text);
            assert!(diags.is_empty(), "{:?}", &diags[..1]);
            assert_eq!(m.machine_configs.len(), 1);
        },
    );
}
