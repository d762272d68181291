//! The `hearth-agent` command. All logic lives in the `hearth_agent` library.

fn main() -> std::process::ExitCode {
    hearth_agent::cli::main_with_args(std::env::args_os())
}
