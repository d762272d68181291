//! The load generator's pure helpers.

use crate::args::{parse_sources, secret, MAX_SOURCES};
use crate::conn::Target;
use crate::stats::percentiles;

#[test]
fn percentiles_of_a_known_list() {
    let v: Vec<u32> = (1..=100).rev().map(|ms| ms * 1000).collect();
    let p = percentiles(v);
    assert_eq!(p["n"], 100);
    assert_eq!(p["p50"], 50.0);
    assert_eq!(p["p99"], 99.0);
    assert_eq!(p["max"], 100.0);
    assert_eq!(percentiles(Vec::new())["n"], 0);
}

#[test]
fn urls_other_than_https_are_refused_with_the_reason() {
    let e = Target::new("http://127.0.0.1:80/", std::path::Path::new("/nonexistent")).unwrap_err();
    assert!(e.to_string().contains("only https://"), "{e}");
    let e = Target::new("https://127.0.0.1:x/", std::path::Path::new("/nonexistent")).unwrap_err();
    assert!(e.to_string().contains("bad port"), "{e}");
}

#[test]
fn secrets_from_files_are_trimmed() {
    let d = std::env::temp_dir().join(format!("loadgen-secret-{}", std::process::id()));
    std::fs::write(&d, "hearth-bootstrap-abc\n").unwrap();
    assert_eq!(
        secret(&format!("@{}", d.display())).unwrap(),
        "hearth-bootstrap-abc"
    );
    assert_eq!(secret(" t ").unwrap(), "t");
    let _ = std::fs::remove_file(&d);
    assert!(secret("@/nonexistent/token").is_err());
}

#[test]
fn source_addresses_as_ranges_and_lists() {
    let s = parse_sources("127.0.0.2-127.0.0.4,::1").unwrap().0;
    let s: Vec<String> = s.iter().map(|ip| ip.to_string()).collect();
    assert_eq!(s, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "::1"]);
    assert!(parse_sources("127.0.0.4-127.0.0.2")
        .unwrap_err()
        .contains("ends before it starts"));
    assert!(parse_sources("127.0.0.0-127.0.255.255")
        .unwrap_err()
        .contains(&format!("more than {MAX_SOURCES}")));
    assert!(parse_sources("localhost")
        .unwrap_err()
        .contains("not an IP"));
    assert!(parse_sources(",").is_err());
}
