//! The `hearth` command. All logic lives in the `hearth_cli` library.

fn main() -> std::process::ExitCode {
    hearth_cli::main_with_args(std::env::args_os())
}
