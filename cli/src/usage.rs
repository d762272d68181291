//! What every command shares with the command line: how it fails (a usage error exits 2,
//! invalid input 1), the output format of the checking commands, and reading a file given with
//! `-f`.

use anyhow::{anyhow, Context};
use clap::ValueEnum;
use std::io::Read;
use std::path::Path;

/// The output format of `validate` and `version`: text for people, or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

/// Invalid input: the diagnostics were printed; exit 1.
#[derive(Debug)]
pub(crate) struct InvalidInput;

impl std::fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid input")
    }
}

impl std::error::Error for InvalidInput {}

/// A usage error found after argument parsing; exit 2.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The text of a file given with `-f` (`-` is standard input), which must be UTF-8.
pub(crate) fn read_text(path: &Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read standard input")?;
        return Ok(s);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))
}
