//! Measures the harness on this machine: rootfs build (if not cached), boot, reboot, stop.
//!
//! `cargo run -p hearth-vm-tests --example measure [ROUNDS]` (as root). Set
//! `HEARTH_TEST_COPY_ROOT=1` to measure full copies instead of overlays, and
//! `HEARTH_TEST_CACHE=/some/empty/dir` to measure a first build.

use std::time::{Duration, Instant};

use hearth_vm_tests::{cached_rootfs, SystemdHost};

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<44} n={:<3} min {:>7.0} ms  median {:>7.0} ms  max {:>7.0} ms",
        samples.len(),
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1]),
    );
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hearth_vm_tests=warn".into()),
        )
        .init();
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10);

    let started = Instant::now();
    let rootfs = cached_rootfs()?;
    println!(
        "cached_rootfs {} ({:.1} s)",
        rootfs.display(),
        started.elapsed().as_secs_f64()
    );

    let (mut boot_wall, mut boot_inner, mut stop) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        let host = SystemdHost::boot()?;
        boot_wall.push(t.elapsed());
        boot_inner.push(host.boot_info().expect("booted").boot_time);
        let t = Instant::now();
        host.shutdown()?;
        stop.push(t.elapsed());
    }
    summary("boot(): call to SystemState running", boot_wall);
    summary("  of which nspawn start to running", boot_inner);
    summary("shutdown(): stop + unmount + cleanup", stop);

    let mut host = SystemdHost::boot()?;
    let (mut reboot_systemctl, mut reboot_logind) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        let _ = host.exec(&["systemctl", "reboot"])?;
        host.wait_for_reboot(Duration::from_secs(60))?;
        reboot_systemctl.push(t.elapsed());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for _ in 0..rounds {
        let t = Instant::now();
        rt.block_on(async {
            let conn = host.bus().await?;
            let _ = conn
                .call_method(
                    Some("org.freedesktop.login1"),
                    "/org/freedesktop/login1",
                    Some("org.freedesktop.login1.Manager"),
                    "RebootWithFlags",
                    &(0u64,),
                )
                .await;
            anyhow::Ok(())
        })?;
        host.wait_for_reboot(Duration::from_secs(60))?;
        reboot_logind.push(t.elapsed());
    }
    summary(
        "reboot: systemctl reboot to running again",
        reboot_systemctl,
    );
    summary("reboot: logind RebootWithFlags to running", reboot_logind);
    host.shutdown()?;

    // Hosts at once: boot 4 in parallel (the machine has 2 cores).
    let t = Instant::now();
    let hosts: Vec<SystemdHost> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(SystemdHost::boot)).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("boot thread"))
            .collect::<anyhow::Result<_>>()
    })?;
    println!(
        "4 hosts booted in parallel in {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    drop(hosts);
    Ok(())
}
