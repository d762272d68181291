//! `cargo xtask`: hearth's developer tasks (see the library).

use clap::Parser;
use std::process::ExitCode;

/// hearth's developer tasks.
#[derive(Debug, Parser)]
#[command(name = "xtask")]
enum Task {
    /// Regenerate the files generated from the code (command reference, man pages, completions,
    /// wire schemas).
    Generate {
        /// Change nothing; exit 1 and name each file that is out of date.
        #[arg(long)]
        check: bool,
    },
    /// Hold the code to the house's rules: print the import circles inside each crate (files
    /// that use each other in a loop) and the source files longer than 800 lines; exit 1 when
    /// there is one.
    House,
}

fn main() -> ExitCode {
    let root = hearth_xtask::workspace_root();
    let check = match Task::parse() {
        Task::Generate { check } => check,
        Task::House => return house(&root),
    };
    let result = if check {
        hearth_xtask::check(&root).map(|stale| {
            for s in &stale {
                eprintln!("out of date: {s}");
            }
            stale.is_empty()
        })
    } else {
        hearth_xtask::write(&root).map(|written| {
            for w in &written {
                println!("wrote {w}");
            }
            true
        })
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("run `cargo xtask generate` and commit the result");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn house(root: &std::path::Path) -> ExitCode {
    let found = hearth_xtask::house::circles(root)
        .and_then(|c| Ok((c, hearth_xtask::house::long_files(root)?)));
    match found {
        Ok((circles, long)) if circles.is_empty() && long.is_empty() => ExitCode::SUCCESS,
        Ok((circles, long)) => {
            for c in &circles {
                print!("{c}");
            }
            for (file, lines) in &long {
                println!("{}: {lines} lines", file.display());
            }
            eprintln!(
                "{} import circle(s): cut an arrow of each; {} file(s) over {} lines: split each by concept",
                circles.len(),
                long.len(),
                hearth_xtask::house::MAX_FILE_LINES
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}
