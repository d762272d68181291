//! Measurements: latencies and their percentiles, errors by kind, a process's memory.

use crate::conn::Fail;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) latencies: Mutex<BTreeMap<&'static str, Vec<u32>>>,
    pub(crate) errors: Mutex<BTreeMap<String, u64>>,
    pub(crate) counts: Mutex<BTreeMap<&'static str, u64>>,
}

impl Stats {
    pub(crate) fn record(&self, what: &'static str, d: Duration) {
        let us = d.as_micros().min(u32::MAX as u128) as u32;
        if let Ok(mut m) = self.latencies.lock() {
            m.entry(what).or_default().push(us);
        }
    }
    pub(crate) fn error(&self, what: &str, f: &Fail) {
        if let Ok(mut m) = self.errors.lock() {
            *m.entry(format!("{what}: {f}")).or_default() += 1;
        }
    }
    pub(crate) fn count(&self, what: &'static str) {
        if let Ok(mut m) = self.counts.lock() {
            *m.entry(what).or_default() += 1;
        }
    }
    pub(crate) fn summary(&self) -> Value {
        let lat = self.latencies.lock().map(|m| m.clone()).unwrap_or_default();
        let mut out = serde_json::Map::new();
        for (k, v) in lat {
            out.insert(k.to_string(), percentiles(v));
        }
        json!({
            "latencyMs": out,
            "errors": self.errors.lock().map(|m| m.clone()).unwrap_or_default(),
            "counts": self.counts.lock().map(|m| m.clone()).unwrap_or_default(),
        })
    }
}

pub(crate) fn percentiles(mut v: Vec<u32>) -> Value {
    if v.is_empty() {
        return json!({"n": 0});
    }
    v.sort_unstable();
    let p = |q: f64| {
        let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    };
    json!({"n": v.len(), "p50": p(0.50), "p90": p(0.90), "p99": p(0.99), "max": p(1.0)})
}

/// VmRSS and VmHWM of a process, in KiB.
pub(crate) fn memory(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

pub(crate) fn mem_json(pid: Option<u32>) -> Value {
    match pid.and_then(memory) {
        Some((rss, hwm)) => json!({"rssMiB": mib(rss), "hwmMiB": mib(hwm)}),
        None => Value::Null,
    }
}

/// [`mem_json`] of several processes (the replicas of one fleet) added up; one process as
/// itself.
pub(crate) fn mem_sum_json(pids: &[u32]) -> Value {
    match pids {
        [] => Value::Null,
        [one] => mem_json(Some(*one)),
        many => {
            let each: Vec<(u64, u64)> = many.iter().filter_map(|p| memory(*p)).collect();
            if each.len() != many.len() {
                return Value::Null;
            }
            let (rss, hwm) = each.iter().fold((0, 0), |(r, h), (a, b)| (r + a, h + b));
            json!({
                "rssMiB": mib(rss),
                "hwmMiB": mib(hwm),
                "perProcessRssMiB": each.iter().map(|(r, _)| mib(*r)).collect::<Vec<_>>(),
            })
        }
    }
}

pub(crate) fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}
