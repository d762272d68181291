//! Standard output that a closed pipe ends quietly.
//!
//! `hearth get nodes | head` closes the pipe after ten lines; Rust ignores `SIGPIPE`, so a plain
//! `println!` would then panic ("failed printing to stdout: Broken pipe"). [`outln!`] and
//! [`out!`] write the same text, and when the reader is gone the process ends at once with
//! status 141, as a program killed by `SIGPIPE` does, without a message. Any other write error
//! ends it with status 1 and the error on stderr.

use std::io::{ErrorKind, Write};

/// The exit status of a program killed by `SIGPIPE` (128 + 13).
pub const BROKEN_PIPE_STATUS: i32 = 141;

/// Writes `args` to standard output (see the module doc).
pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        eprintln!("error: writing to standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` to standard output, ending quietly on a closed pipe.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::out::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` to standard output, ending quietly on a closed pipe.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!($($arg)*))
    };
}
