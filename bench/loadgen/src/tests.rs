//! The load generator's pure helpers.

use crate::args::secret;
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
