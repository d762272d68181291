//! The generated reference (help, man pages, completions) matches the code: a change to a flag or
//! its help without `cargo xtask generate` fails here, naming the file.

#[test]
fn generated_files_are_current() {
    let stale = hearth_xtask::check(&hearth_xtask::workspace_root()).unwrap();
    assert!(
        stale.is_empty(),
        "out of date: {}\nrun `cargo xtask generate` and commit the result",
        stale.join(", ")
    );
}

#[test]
fn every_subcommand_has_a_section_and_a_man_page() {
    let files = hearth_xtask::generate();
    let cli =
        String::from_utf8(files[std::path::Path::new("docs/reference/hearth.md")].clone()).unwrap();
    // A nested subcommand (two levels) is documented with its full name.
    assert!(cli.contains("## `hearth node reset-credential`"), "{cli}");
    assert!(files.contains_key(std::path::Path::new(
        "docs/reference/man/hearth-node-reset-credential.1"
    )));
    let agent =
        String::from_utf8(files[std::path::Path::new("docs/reference/hearth-agent.md")].clone())
            .unwrap();
    assert!(agent.contains("## `hearth-agent run`"), "{agent}");
    // The variable is named, never its value (`[env: HEARTH_SERVER=]` without the hiding).
    assert!(agent.contains("[env: HEARTH_SERVER]"), "{agent}");
}

/// What is generated does not depend on the machine: `cargo xtask generate --check` finds the
/// checked-in files current with an environment value set that the help would show, and a
/// narrow terminal.
#[test]
fn the_output_does_not_depend_on_the_environment_or_the_terminal() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["generate", "--check"])
        .env("HEARTH_SERVER", "https://leak.invalid:22623")
        .env("HEARTH_NODE_NAME", "leaked-node")
        .env("COLUMNS", "40")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}
