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
}

fn main() -> ExitCode {
    let Task::Generate { check } = Task::parse();
    let root = hearth_xtask::workspace_root();
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
