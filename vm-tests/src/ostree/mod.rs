//! The ostree fast tier: libostree sysroots in a directory, their deployments booted in
//! systemd-nspawn, with reboots into whatever the boot loader entries say.
//!
//! ```no_run
//! use std::time::Duration;
//! use hearth_vm_tests::ostree::{refs, OstreeHost, OstreeHostOptions};
//!
//! # fn main() -> anyhow::Result<()> {
//! let mut host = OstreeHost::boot()?;              // v1 deployed with DEFAULT_KARGS, booted
//! assert_eq!(host.booted_entry().checksum, host.images().commit(refs::V1)?);
//! host.exec_ok(&["ostree", "admin", "status"])?;    // libostree sees it booted
//! host.exec_ok(&["ostree", "admin", "deploy", "--stage", "--karg-append=hugepages=32", refs::V1])?;
//! // Started before the reboot (its path unit may come too late: see images/README.md).
//! host.exec_ok(&["systemctl", "start", "ostree-finalize-staged.service"])?;
//! host.reboot(Duration::from_secs(60))?;           // finalized at shutdown, booted again
//! assert!(host.kernel_args().contains(&"hugepages=32".to_string()));
//! # Ok(()) }
//! ```
//!
//! ## Pieces
//!
//! - [`cached_images`]: the OS images of `images/build-images.sh` (Debian 12 commits `v1`,
//!   `v1-rt`, `v2`, `v2-rt`, `v2-broken`), built once and cached in
//!   `$HEARTH_TEST_CACHE/images-<sha256 of the script>` like the rootfs.
//! - [`TestSysroot`]: `ostree admin init-fs` + `os-init` in a fresh directory
//!   (`$HEARTH_TEST_TMPDIR/hearth-sysroot-<8 hex>/sysroot`), the image commits imported with
//!   `ostree pull-local` from the cached bare repository (hard links: about a second), the first
//!   deployment made with `ostree admin deploy`. Its `/boot` is a tmpfs of its own (64 MiB by
//!   default; smaller ones test space checks): libostree freezes and thaws the filesystem of
//!   `/boot` after writing boot entries (`FIFREEZE`), which must not hit the machine's root
//!   filesystem; on a tmpfs it falls back to `syncfs`.
//! - [`OstreeHost`]: a [`SystemdHost`](crate::SystemdHost) booted *directly* on a deployment directory:
//!   `systemd-nspawn --directory=<deployment> --bind=<sysroot>:/sysroot
//!   --bind=<sysroot>/boot:/boot --bind=<stateroot>/var:/var --bind-ro=<deployment>/usr:/usr`.
//!   The image's tmpfiles line creates `/run/ostree-booted`, so libostree inside sees a booted
//!   system. On a reboot (nspawn exits with 133) the harness plays boot loader: it reads
//!   `boot/loader/entries/*.conf`, takes the entry with the highest `version` (libostree's
//!   default), resolves its `ostree=` argument to a deployment directory and boots that.
//!   Kernel arguments are checked in that entry's `options` ([`OstreeHost::booted_entry`]),
//!   not in `/proc/cmdline` (the container shares the machine's kernel).
//!
//! ## Files
//!
//! - `images.rs`: the cached OS images ([`cached_images`], [`Images`], [`refs`])
//! - `entries.rs`: a boot loader entry resolved to its deployment ([`BootEntry`])
//! - `sysroot.rs`: [`TestSysroot`]: making (with [`DEFAULT_KARGS`]), querying and removing a
//!   sysroot; sysroots of dead test processes
//! - `oci.rs`: the same images as ostree-native container images in an OCI layout
//!   ([`cached_oci_images`], [`OciImages`], [`tags`]); the same made from the VM image's commits,
//!   with the never-booting `v3` ([`cached_vm_oci_images`])
//! - `booted.rs`: [`OstreeHost`]: a deployment booted in systemd-nspawn, the harness as boot
//!   loader on reboots
//!
//! Imports run one way: `booted` uses `sysroot`, `images` and `entries`; `sysroot` uses `images`
//! and `entries`; `oci` uses `images`. This file only re-exports.

mod booted;
mod entries;
mod images;
mod oci;
mod sysroot;

pub use booted::{OstreeHost, OstreeHostOptions};
pub use entries::BootEntry;
pub use images::{
    cached_images, images_key, refs, Images, BUILD_IMAGES_SCRIPT, IMAGES_REPO_INSIDE,
};
pub use oci::{
    cached_oci_images, cached_vm_oci_images, oci_images_key, tags, OciImages,
    BUILD_OCI_IMAGES_SCRIPT,
};
pub use sysroot::{SysrootOptions, TestSysroot, DEFAULT_KARGS, OSNAME};
