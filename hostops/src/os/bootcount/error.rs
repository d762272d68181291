//! [`BootCountError`]: why the boot entries could not be put on the ESP.

use super::plan::PlanError;

/// Why the boot entries could not be put on the ESP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootCountError {
    /// The ESP is not there.
    #[error(
        "no ESP at {esp} (no loader/ directory): mount the EFI system partition there, or set \
         bootCounting.esp in /etc/hearth/os.json"
    )]
    NoEsp {
        /// Where it was looked for.
        esp: String,
    },
    /// ostree has no entry (not an ostree host, or `/boot` not mounted).
    #[error("no boot entries in {dir}: is this a booted ostree host with /boot mounted?")]
    NoOstreeEntries {
        /// The directory.
        dir: String,
    },
    /// More entries than a host has.
    #[error("more than {max} boot entries in {dir}")]
    TooMany {
        /// The directory.
        dir: String,
        /// The limit.
        max: usize,
    },
    /// An entry that names no deployment.
    #[error("boot entry /boot/loader/entries/{file}: {message}")]
    Entry {
        /// Its file name.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// An entry that cannot be put on the ESP.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The ESP has no room for the kernels.
    #[error(
        "the ESP at {esp} has {free} bytes free, the kernels and initramfs images to copy need \
         {needed} (plus 1 MiB): remove what else is on it, or make it larger"
    )]
    EspFull {
        /// The ESP.
        esp: String,
        /// Bytes to copy.
        needed: u64,
        /// Bytes free.
        free: u64,
    },
    /// A file operation failed.
    #[error("{path}: {cause}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        cause: String,
    },
}
