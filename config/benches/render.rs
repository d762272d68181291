//! Rendering benchmarks: a pool of 1,000 MachineConfigs holding 10,000 files.
//!
//! Run with `cargo bench -p hearth-config --bench render`; results are recorded in
//! `docs/performance.md` ("Rendering (config crate)"). The target is rendering 1,000 configs /
//! 10,000 files in under 100 ms on a 2-core machine.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hearth_config::manifest::read_str;
use hearth_config::model::{MachineConfig, MachineConfigPool};
use hearth_config::render::{configs_for_pool, merge, render_pool, spec_hash};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use std::fmt::Write;
use std::hint::black_box;
use std::time::Duration;

/// Number of MachineConfigs in the pool.
const CONFIGS: usize = 1_000;
/// Files per MachineConfig (10,000 in total).
const FILES_PER_CONFIG: usize = 10;
/// Distinct unit names: units collide, and their drop-ins accumulate.
const UNITS: usize = 50;
/// Paths shared by file 0 of every config: 1,000 files merge into these.
const COMMON_PATHS: usize = 10;
/// Distinct paths of the other files: configs at the end of the list overwrite files of the
/// first ones.
const OTHER_PATHS: usize = 8_000;

/// About 100 bytes of file content as a percent-encoded `data:` URL.
fn content(i: usize, j: usize) -> String {
    let text = format!(
        "# hearth bench config {i} file {j}\nkey_{j}=value-{i}\nlist=a,b,c\nenabled=true\n"
    );
    format!("data:,{}", utf8_percent_encode(&text, NON_ALPHANUMERIC))
}

fn path(i: usize, j: usize) -> String {
    if j == 0 {
        format!("/etc/hearth/common/{:02}.conf", i % COMMON_PATHS)
    } else {
        format!(
            "/etc/hearth/bench/{:05}.conf",
            (i * (FILES_PER_CONFIG - 1) + j) % OTHER_PATHS
        )
    }
}

/// The manifest of config `i`, as YAML text (what the CLI reads from disk).
fn manifest(i: usize) -> String {
    let mut y = String::with_capacity(3_000);
    let _ = write!(
        y,
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {i:04}-bench-worker
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
"
    );
    if i % 100 == 0 {
        let _ = write!(
            y,
            "    passwd:
      users:
      - name: core
        sshAuthorizedKeys:
        - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{i:04} bench-{i}@example
"
        );
    }
    y.push_str("    storage:\n      files:\n");
    for j in 0..FILES_PER_CONFIG {
        let _ = write!(
            y,
            "      - path: {}
        mode: 0644
        overwrite: true
        contents:
          source: {}
",
            path(i, j),
            content(i, j)
        );
    }
    let _ = write!(
        y,
        "    systemd:
      units:
      - name: bench-{u}.service
        enabled: true
        dropins:
        - name: {i:04}-bench.conf
          contents: |
            [Service]
            Environment=BENCH={i}
  kernelArguments:
  - hearth.bench{k}=1
  - nosmt
",
        u = i % UNITS,
        k = i % 20
    );
    y
}

fn manifests() -> Vec<String> {
    (0..CONFIGS).map(manifest).collect()
}

fn read_all(texts: &[String]) -> Vec<MachineConfig> {
    let mut out = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let (m, diags) = read_str(&format!("{i:04}.yaml"), t);
        assert!(!diags.iter().any(|d| d.is_error()), "{diags:?}");
        out.extend(m.machine_configs.into_iter().map(|s| s.item));
    }
    out
}

fn bench_render(c: &mut Criterion) {
    let texts = manifests();
    let configs = read_all(&texts);
    assert_eq!(configs.len(), CONFIGS);
    let files: usize = configs
        .iter()
        .map(|m| m.spec.config.storage.files.len())
        .sum();
    assert_eq!(files, CONFIGS * FILES_PER_CONFIG);
    let pool = MachineConfigPool::builtin("worker");
    let rendered = render_pool(&pool, &configs).unwrap();
    assert_eq!(
        rendered.spec.config.storage.files.len(),
        COMMON_PATHS + OTHER_PATHS,
        "collisions merged"
    );
    assert_eq!(rendered.spec.config.systemd.units.len(), UNITS);
    let bytes: usize = texts.iter().map(String::len).sum();

    let mut g = c.benchmark_group("render_pool_1000_configs_10000_files");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements(files as u64));
    g.bench_function("render_pool (pre-built configs)", |b| {
        b.iter(|| render_pool(black_box(&pool), black_box(&configs)).unwrap())
    });
    // The two halves of render_pool, to see where the time goes.
    let selected = configs_for_pool(&pool, &configs);
    g.bench_function("merge only", |b| {
        b.iter(|| merge(black_box(&selected)).unwrap())
    });
    g.bench_function("spec_hash only (rendered spec)", |b| {
        b.iter(|| spec_hash(black_box(&rendered.spec)))
    });
    g.finish();

    let mut g = c.benchmark_group("read_and_render_1000_manifests");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("read_str x1000 + render_pool", |b| {
        b.iter(|| {
            let configs = read_all(black_box(&texts));
            render_pool(&pool, &configs).unwrap()
        })
    });
    g.bench_function("read_str x1000 only", |b| {
        b.iter(|| read_all(black_box(&texts)))
    });
    g.finish();

    let one = &texts[1];
    let mut g = c.benchmark_group("read_str_one_manifest");
    g.throughput(Throughput::Bytes(one.len() as u64));
    g.bench_function("read_str (10 files, 1 unit, 2 kargs)", |b| {
        b.iter(|| read_str("one.yaml", black_box(one)))
    });
    g.finish();
}

criterion_group!(benches, bench_render);
criterion_main!(benches);
