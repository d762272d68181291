//! Measurements (not a pass/fail test; `#[ignore]`d): time and disk cost of a kernel argument
//! change and of a pivot staged by hearth, next to the same done by hand with `ostree admin
//! deploy` on the same sysroot. Prints a Markdown table (docs/os-layer.md, docs/performance-os.md).
//!
//! ```sh
//! CARGO_TARGET_DIR=/tmp/target-os cargo test -p hearth-hostops --test hostops os_measure -- --ignored --nocapture
//! ```

use crate::os_common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hearth_hostops::os::OsChange;
use hearth_vm_tests::ostree::{refs, OstreeHost};
use os_common::*;

const ROUNDS: usize = 7;

fn du(path: &Path) -> u64 {
    let out = Command::new("du")
        .args(["-s", "-x", "--block-size=1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Disk used by the sysroot and by its /boot (a tmpfs of its own).
fn usage(host: &OstreeHost) -> (u64, u64) {
    (du(host.sysroot().path()), du(&host.sysroot().boot()))
}

#[derive(Default)]
struct Series {
    times: Vec<Duration>,
    sysroot: Vec<i64>,
    boot: Vec<i64>,
}

impl Series {
    fn measure(&mut self, host: &OstreeHost, f: impl FnOnce()) {
        let (s0, b0) = usage(host);
        let t = Instant::now();
        f();
        self.times.push(t.elapsed());
        let (s1, b1) = usage(host);
        self.sysroot.push(s1 as i64 - s0 as i64);
        self.boot.push(b1 as i64 - b0 as i64);
    }

    fn row(&self, what: &str) -> String {
        let mut t = self.times.clone();
        t.sort();
        let median = t[t.len() / 2];
        let mib = |v: &[i64]| {
            let mut v = v.to_vec();
            v.sort();
            v[v.len() / 2] as f64 / (1 << 20) as f64
        };
        format!(
            "| {what} | {} ms | {}–{} ms | {:.1} MiB | {:.1} MiB | {} |",
            median.as_millis(),
            t[0].as_millis(),
            t[t.len() - 1].as_millis(),
            mib(&self.sysroot),
            mib(&self.boot),
            t.len()
        )
    }
}

/// Drops a pending deployment (untimed).
fn reset(host: &OstreeHost, d: &Driver) {
    if d.status(host).unwrap().pending.is_some() {
        d.rollback(host).unwrap();
    }
}

fn by_hand(host: &OstreeHost, mode: Mode, args: &[&str]) {
    match mode {
        Mode::Outside => {
            let sysroot = host.sysroot();
            let mut all = vec!["deploy", "--os=debian"];
            all.extend_from_slice(args);
            sysroot.admin(&all).unwrap();
        }
        Mode::Inside => {
            let mut all = vec!["ostree", "admin", "deploy", "--stage"];
            all.extend_from_slice(args);
            host.exec_ok(&all).unwrap();
        }
    }
}

fn pull_by_hand(host: &OstreeHost, mode: Mode, reference: &str) {
    match mode {
        Mode::Outside => {
            let url = host.images().remote_url();
            let _ = host
                .sysroot()
                .repo_cmd(&["remote", "add", "--no-gpg-verify", "manual", &url]);
            host.sysroot()
                .repo_cmd(&["pull", "manual", reference])
                .unwrap();
        }
        Mode::Inside => {
            let url = host.images().remote_url_inside();
            let _ = host.exec(&["ostree", "remote", "add", "--no-gpg-verify", "manual", &url]);
            host.exec_ok(&["ostree", "pull", "manual", reference])
                .unwrap();
        }
    }
}

#[test]
#[ignore = "measurement, not a pass/fail test (it proves nothing; its figures are in docs/performance.md): run with --ignored --nocapture"]
fn measure_os_changes() {
    init_logging();
    let mut rows = vec![
        "| operation | median | range | sysroot disk | /boot disk | n |".to_string(),
        "| --- | --- | --- | --- | --- | --- |".to_string(),
    ];
    for mode in [Mode::Outside, Mode::Inside] {
        let how = match mode {
            Mode::Outside => "outside, written as default",
            Mode::Inside => "inside, staged",
        };
        // Kernel arguments: hearth and by hand alternate on one host; before each operation
        // (not timed) a pending deployment is dropped, so that each starts from the booted
        // deployment alone. (By hand from outside that matters: `ostree admin deploy
        // --sysroot=...` does not know which deployment is booted and keeps only the new and
        // the merge deployment, the current default: it would delete the booted one.)
        let host = boot_v1();
        let d = Driver::new(&host, mode);
        let (mut hearth, mut manual) = (Series::default(), Series::default());
        for i in 0..ROUNDS {
            reset(&host, &d);
            hearth.measure(&host, || {
                d.stage(&host, &kargs_change(&[], &[&format!("hearth.round={i}")]))
                    .unwrap();
            });
            reset(&host, &d);
            manual.measure(&host, || {
                by_hand(
                    &host,
                    mode,
                    &[&format!("--karg-append=manual.round={i}"), refs::V1],
                )
            });
        }
        rows.push(hearth.row(&format!("kargs change, hearth `stage` ({how})")));
        rows.push(manual.row(&format!(
            "kargs change, `ostree admin deploy --karg-append` ({how})"
        )));

        // The reboot into a staged (finalized at shutdown) or written deployment, to
        // `running`, and hearth's verification after it.
        let mut host = host;
        let (mut reboot, mut verify) = (Series::default(), Series::default());
        for i in 0..3 {
            reset(&host, &d);
            let staged = d
                .stage(&host, &kargs_change(&[], &[&format!("reboot.round={i}")]))
                .unwrap();
            let t = Instant::now();
            host.reboot(REBOOT).unwrap();
            reboot.times.push(t.elapsed());
            reboot.sysroot.push(0);
            reboot.boot.push(0);
            verify.measure(&host, || {
                assert!(d.verify(&host, &staged.expectation()).unwrap().is_empty());
            });
        }
        rows.push(reboot.row(&format!("reboot into the new deployment ({how})")));
        rows.push(verify.row(&format!("hearth `verify_booted` after the reboot ({how})")));
        host.shutdown().unwrap();

        // Pivot v1 -> v2 with the pull (cold: v2's objects are not in the sysroot yet), on
        // two fresh hosts.
        let (mut hearth, mut manual) = (Series::default(), Series::default());
        for _ in 0..3 {
            let host = boot_v1();
            let d = Driver::new(&host, mode);
            // Untimed: the first call inside links the test binary into the host's /var.
            d.status(&host).unwrap();
            hearth.measure(&host, || {
                d.stage(
                    &host,
                    &OsChange {
                        os_image: Some(refs::V2.into()),
                        ..Default::default()
                    },
                )
                .unwrap();
            });
            host.shutdown().unwrap();
            let host = boot_v1();
            manual.measure(&host, || {
                pull_by_hand(&host, mode, refs::V2);
                by_hand(&host, mode, &["manual:hearth/debian/v2"]);
            });
            host.shutdown().unwrap();
        }
        rows.push(hearth.row(&format!("pivot v1→v2 incl. pull, hearth `stage` ({how})")));
        rows.push(manual.row(&format!(
            "pivot v1→v2 incl. pull, `ostree pull` + `ostree admin deploy` ({how})"
        )));

        // Kernel type (a new kernel: /boot grows by 5 MiB when written), warm.
        let host = boot_v1();
        let d = Driver::new(&host, mode);
        pull_by_hand(&host, mode, refs::V1_RT);
        let (mut hearth, mut manual) = (Series::default(), Series::default());
        for _ in 0..ROUNDS {
            reset(&host, &d);
            hearth.measure(&host, || {
                d.stage(
                    &host,
                    &OsChange {
                        kernel_type: Some((
                            hearth_config::model::KernelType::Default,
                            hearth_config::model::KernelType::Realtime,
                        )),
                        ..Default::default()
                    },
                )
                .unwrap();
            });
            reset(&host, &d);
            manual.measure(&host, || {
                by_hand(&host, mode, &["manual:hearth/debian/v1-rt"])
            });
        }
        rows.push(hearth.row(&format!(
            "kernel type → realtime (pulled), hearth `stage` ({how})"
        )));
        rows.push(manual.row(&format!(
            "kernel type → realtime (pulled), `ostree admin deploy` ({how})"
        )));
        host.shutdown().unwrap();
    }
    println!("\n{}\n", rows.join("\n"));
}
