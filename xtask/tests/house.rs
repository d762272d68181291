//! The house's rules that the code itself can be held to.

/// No crate has files that use each other in a loop (`cargo xtask house` prints them, with the
/// names that tie each circle).
#[test]
fn no_crate_has_an_import_circle() {
    let circles = hearth_xtask::house::circles(&hearth_xtask::workspace_root()).unwrap();
    let text: String = circles.iter().map(ToString::to_string).collect();
    assert!(
        circles.is_empty(),
        "{text}{} import circle(s): cut an arrow of each (docs/architecture.md, \"Rules of the house\")",
        circles.len()
    );
}

/// One concept per file: no file under a crate's `src/` is longer than 800 lines.
#[test]
fn no_source_file_is_longer_than_the_limit() {
    let long = hearth_xtask::house::long_files(&hearth_xtask::workspace_root()).unwrap();
    assert!(
        long.is_empty(),
        "longer than {} lines: {long:?}: split each by concept (docs/architecture.md, \"Rules of the house\")",
        hearth_xtask::house::MAX_FILE_LINES
    );
}
