//! Crash safety: the agent is killed with SIGKILL at random moments while it applies a config of
//! 500 files, 100 times; after every kill no file is torn or missing, and a final run converges
//! on the desired config.

use crate::common;

use common::*;
use std::time::{Duration, Instant};

const FILES: usize = 500;
const ROUNDS: usize = 100;

fn content(tag: &str, i: usize) -> String {
    // About 1 KiB each, different for A and B, self-describing so a torn file is obvious.
    let line = format!("{tag}-{i:04}-{}\n", "x".repeat(48));
    line.repeat(18)
}

fn config(tag: &str) -> String {
    let mut files = String::new();
    for i in 0..FILES {
        let data: String = content(tag, i)
            .bytes()
            .map(|b| match b {
                b'\n' => "%0A".to_string(),
                b => (b as char).to_string(),
            })
            .collect();
        files.push_str(&format!(
            "      - path: /etc/hearth-crash/f{i:04}.conf\n        contents:\n          source: \"data:,{data}\"\n"
        ));
    }
    mc(
        &format!("crash-{}", tag.to_lowercase()),
        &format!(
            "  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n{files}"
        ),
    )
}

/// A small deterministic generator, so a failure can be replayed (the seed is printed).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn sigkill_at_random_moments_never_tears_a_file_and_the_host_converges() {
    let host = host_with_agent();
    put(&host, "/etc/hearth/a.yaml", &config("A"));
    put(&host, "/etc/hearth/b.yaml", &config("B"));
    // These files need no reboot: the runs end in Done.
    put(
        &host,
        "/etc/hearth/policy.yaml",
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/hearth-crash\n      actions: [{type: None}]\n",
    );
    let apply = |tag: &str| {
        agent(
            &host,
            &[
                "apply",
                "--once-from",
                &format!("/etc/hearth/{tag}.yaml"),
                "--policy",
                "/etc/hearth/policy.yaml",
            ],
        )
    };
    let out = apply("a");
    assert!(out.status.success(), "first apply: {out}");

    let seed = std::env::var("HEARTH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    eprintln!("crash test seed: {seed} (set HEARTH_CRASH_SEED to replay)");
    let mut rng = Lcg(seed);
    let mut killed_mid_apply = 0;
    let started = Instant::now();
    for round in 0..ROUNDS {
        let tag = if round % 2 == 0 { "b" } else { "a" };
        let unit = format!("hearth-crash-{round}");
        host.exec_ok(&[
            "systemd-run",
            "--unit",
            &unit,
            "--collect",
            "--quiet",
            AGENT,
            "apply",
            "--once-from",
            &format!("/etc/hearth/{tag}.yaml"),
            "--policy",
            "/etc/hearth/policy.yaml",
        ])
        .unwrap();
        std::thread::sleep(Duration::from_millis(rng.next() % 1500));
        let kill = host
            .exec(&["systemctl", "kill", "--signal=SIGKILL", &unit])
            .unwrap();
        if kill.status.success() {
            killed_mid_apply += 1;
        }
        // Wait until the process is gone before looking.
        let deadline = Instant::now() + Duration::from_secs(30);
        while host
            .exec(&["systemctl", "is-active", "--quiet", &unit])
            .unwrap()
            .status
            .success()
        {
            assert!(
                Instant::now() < deadline,
                "round {round}: the agent did not stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        for i in 0..FILES {
            let path = format!("/etc/hearth-crash/f{i:04}.conf");
            let got =
                get(&host, &path).unwrap_or_else(|| panic!("round {round}: {path} is missing"));
            assert!(
                got == content("A", i) || got == content("B", i),
                "round {round}: {path} is torn ({} bytes)",
                got.len()
            );
        }
        // The journal is always readable.
        let st = status(&host);
        assert!(st["state"].is_string(), "round {round}: {st}");
    }
    // A last, uninterrupted run converges on B.
    let out = apply("b");
    assert!(out.status.success(), "final apply: {out}");
    let st = status(&host);
    assert_eq!(st["state"], "Done", "{st:#}");
    assert_eq!(st["current"], "crash-b");
    for i in 0..FILES {
        assert_eq!(
            get(&host, &format!("/etc/hearth-crash/f{i:04}.conf")).unwrap(),
            content("B", i)
        );
    }
    let leftovers = host
        .exec_ok(&[
            "sh",
            "-c",
            "ls -a /etc/hearth-crash | grep -c hearth-tmp || true",
        ])
        .unwrap();
    assert_eq!(leftovers.trim(), "0", "no temporary files left");
    eprintln!(
        "crash test: {ROUNDS} rounds, {killed_mid_apply} killed mid-apply, converged; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        killed_mid_apply >= ROUNDS / 4,
        "too few kills landed mid-apply ({killed_mid_apply}) to prove anything"
    );
}
