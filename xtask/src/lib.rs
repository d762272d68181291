//! Files generated from hearth's code, and the check that they are current.
//!
//! One generator for everything derived from the clap definitions of the three binaries
//! (`hearth`, `hearth-agent`, `hearth-server`):
//! - `docs/reference/<binary>.md`: the `--help` text of the binary and of every subcommand;
//! - `docs/reference/man/<binary>[-<subcommand>…].1`: man pages;
//! - `docs/reference/completions/`: shell completions for bash, zsh and fish;
//!
//! and the JSON Schema of every wire type of `hearth-api` (`docs/schema/<Type>.schema.json`,
//! from [`hearth_api::schemas`]).
//!
//! `cargo xtask generate` writes them; `cargo xtask generate --check` (and the test
//! `xtask/tests/generated.rs`, part of `cargo test --workspace`) fails naming every file that
//! differs from what the code says, or that the code no longer generates.
//!
//! The output does not depend on the machine: help is wrapped at [`WIDTH`] columns whatever the
//! terminal, and values of environment variables are never shown (`[env: NAME]` only).
//!
//! [`house`] holds the code to the house's rules: no import circle inside a crate, no long source
//! file (`cargo xtask house`; the test `xtask/tests/house.rs` fails on either).

pub mod house;

use anyhow::Context;
use clap::{Command, CommandFactory};
use clap_complete::Shell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The column help text is wrapped at.
pub const WIDTH: usize = 100;

/// Where the generated command reference lives, relative to the workspace root.
pub const REFERENCE_DIR: &str = "docs/reference";

/// Where the generated wire schemas live, relative to the workspace root.
pub const SCHEMA_DIR: &str = "docs/schema";

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// The three binaries' command definitions, as their users see them.
fn binaries() -> Vec<Command> {
    [
        hearth_cli::Cli::command(),
        hearth_agent::cli::Cli::command(),
        hearth_server::cli::Cli::command(),
    ]
    .into_iter()
    .map(machine_independent)
    .collect()
}

/// The same command, rendered alike on every machine: fixed width, no environment values.
fn machine_independent(cmd: Command) -> Command {
    let cmd = cmd
        .term_width(WIDTH)
        .max_term_width(WIDTH)
        .mut_args(|a| a.hide_env_values(true));
    cmd.mut_subcommands(machine_independent)
}

/// Every generated file: path relative to the workspace root → contents.
pub fn generate() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let dir = Path::new(REFERENCE_DIR);
    for cmd in binaries() {
        let mut cmd = cmd;
        cmd.build();
        let name = cmd.get_name().to_string();
        out.insert(dir.join(format!("{name}.md")), reference(&cmd).into_bytes());
        for (full, sub) in commands(&cmd, &name) {
            let page = full.replace(' ', "-");
            let mut buf = Vec::new();
            clap_mangen::Man::new(sub.clone())
                .title(page.to_uppercase())
                .source(format!("{name} {}", env!("CARGO_PKG_VERSION")))
                .render(&mut buf)
                .expect("rendering into memory cannot fail");
            out.insert(dir.join("man").join(format!("{page}.1")), buf);
        }
        for (shell, file) in [
            (Shell::Bash, format!("{name}.bash")),
            (Shell::Zsh, format!("_{name}")),
            (Shell::Fish, format!("{name}.fish")),
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd.clone(), &name, &mut buf);
            out.insert(dir.join("completions").join(file), buf);
        }
    }
    for (name, schema) in hearth_api::schemas() {
        out.insert(
            Path::new(SCHEMA_DIR).join(format!("{name}.schema.json")),
            hearth_api::schema_text(&schema).into_bytes(),
        );
    }
    out
}

/// `cmd` and its subcommands at every depth (without clap's `help`), each with its full name
/// (`hearth node reset-credential`).
fn commands<'a>(cmd: &'a Command, name: &str) -> Vec<(String, &'a Command)> {
    let mut out = vec![(name.to_string(), cmd)];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        out.extend(commands(sub, &format!("{name} {}", sub.get_name())));
    }
    out
}

/// The Markdown reference of one binary: its long help and every subcommand's.
fn reference(cmd: &Command) -> String {
    let name = cmd.get_name();
    let mut md = format!(
        "# `{name}` command reference\n\n\
         Generated from the code by `cargo xtask generate`: do not edit by hand (CI checks that \
         it is current). Man pages: [`man/`](man/); shell completions: \
         [`completions/`](completions/).\n"
    );
    for (title, sub) in commands(cmd, name) {
        let help = sub.clone().render_long_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        md.push_str(&format!(
            "\n## `{title}`\n\n```text\n{}\n```\n",
            help.join("\n").trim_end()
        ));
    }
    md
}

/// Writes every generated file under `root` and removes generated files the code no longer
/// generates; returns what changed.
pub fn write(root: &Path) -> anyhow::Result<Vec<String>> {
    let files = generate();
    let mut changed = Vec::new();
    for stale in strays(root, &files)? {
        std::fs::remove_file(root.join(&stale))
            .with_context(|| format!("removing {}", stale.display()))?;
        changed.push(format!("{} (removed)", stale.display()));
    }
    for (path, contents) in &files {
        let full = root.join(path);
        if std::fs::read(&full).ok().as_deref() == Some(contents.as_slice()) {
            continue;
        }
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&full, contents).with_context(|| format!("writing {}", full.display()))?;
        changed.push(path.display().to_string());
    }
    Ok(changed)
}

/// The generated files under `root` that differ from what the code generates, are missing, or
/// are no longer generated (empty: all current).
pub fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let files = generate();
    let mut stale: Vec<String> = strays(root, &files)?
        .into_iter()
        .map(|p| format!("{} (no longer generated)", p.display()))
        .collect();
    for (path, contents) in &files {
        match std::fs::read(root.join(path)) {
            Ok(on_disk) if on_disk == *contents => {}
            Ok(_) => stale.push(path.display().to_string()),
            Err(_) => stale.push(format!("{} (missing)", path.display())),
        }
    }
    Ok(stale)
}

/// Files in the generated directories that the code does not generate.
fn strays(root: &Path, files: &BTreeMap<PathBuf, Vec<u8>>) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let dirs = [
        PathBuf::from(REFERENCE_DIR),
        Path::new(REFERENCE_DIR).join("man"),
        Path::new(REFERENCE_DIR).join("completions"),
        PathBuf::from(SCHEMA_DIR),
    ];
    for rel in dirs {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in entries {
            let e = e.with_context(|| format!("reading {}", rel.display()))?;
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = rel.join(e.file_name());
            if !files.contains_key(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
