//! The VM tier: a real kernel, a dracut initramfs with the ostree module, real reboots, in QEMU
//! with software emulation (TCG: these machines have no usable KVM).
//!
//! ```no_run
//! use hearth_vm_tests::qemu::{Vm, VmOptions};
//!
//! # fn main() -> anyhow::Result<()> {
//! let mut vm = Vm::boot(VmOptions::default())?;     // ~30 s: firmware, kernel, initramfs, systemd
//! assert!(vm.proc_cmdline().contains("ostree=/ostree/boot."));
//! // ostree's entries reach the ESP (systemd-boot's) through hearth's boot entry sync.
//! vm.install_hearth(r#"{"bootCounting": {}}"#)?;
//! vm.exec_ok("ostree admin deploy --stage --karg-append=selinux=0 hearth/debian/v1")?;
//! vm.reboot()?;                                     // QEMU exits and starts again: systemd-boot picks the entry
//! assert!(vm.proc_cmdline().split(' ').any(|a| a == "selinux=0"));
//! # Ok(()) }
//! ```
//!
//! ## Pieces
//!
//! - [`cached_vm_image`]: `images/build-vm-image.sh` (Debian 12, `linux-image-amd64`, dracut
//!   with the ostree module, commits `hearth/debian/v1` and `v2`, v1 deployed; a GPT disk with
//!   an ESP holding systemd-boot and v1's entry, and the ext4 root written with
//!   `mkfs.ext4 -d`), built once and cached in `$HEARTH_TEST_CACHE/vm-image-<sha256 of the
//!   script>` like the other images.
//! - [`Vm`]: a sparse copy of the disk and of OVMF's variables per VM
//!   (`$HEARTH_TEST_TMPDIR/hearth-vm-<8 hex>/`). QEMU boots the firmware (OVMF), which starts
//!   systemd-boot from the ESP; systemd-boot picks the entry (and counts tries of entries
//!   with a boot counter). ostree writes its entries to `/boot` on ext4, which systemd-boot
//!   cannot read: hearth's boot entry sync puts them on the ESP (the tests install it with
//!   the agent). A reboot inside makes QEMU exit (`-no-reboot`); the harness starts it again
//!   on the same disk and variables, and counts boots that reset the machine before the guest
//!   script ran ([`Vm::wait_for_reboot_with_failed_boots`]), reading the ESP's entries from the
//!   host after each ([`FailedBoot`]: the boot counters as systemd-boot left them).
//! - The guest talks to the harness through a 9p share (`-virtfs ...,mount_tag=hearth`),
//!   mounted at `/run/hearth-test` by the image's `hearth-share.service`. `hearth-guest.service`
//!   runs `/run/hearth-test/guest.sh`, which the harness writes before every boot: it reports the
//!   boot (`ready`: boot id, `/proc/cmdline` and the entry systemd-boot selected) and then runs
//!   the scripts the harness drops into `cmd/` ([`Vm::exec`]), writing their output and exit
//!   code back. Binaries the tests need (the agent) are copied into the share
//!   ([`Vm::share_dir`]): the image does not change when hearth does.
//! - The guest has a user-mode network (10.0.2.15) and reaches the host's loopback at
//!   [`HOST_FROM_GUEST`] (QEMU's slirp): a registry on `127.0.0.1:PORT` is
//!   `10.0.2.2:PORT` inside.
//! - The serial console (firmware, kernel, systemd, the guest script) is appended to
//!   `serial.log` in the VM's directory; errors carry its last 100 lines.
//!
//! ## Files
//!
//! - `image.rs`: the cached VM image ([`cached_vm_image`], [`VmImage`], [`refs`])
//! - `entries.rs`: the entries on the disk's ESP, read with mtools ([`read_esp_entries`])
//! - `vm.rs`: a [`Vm`]: its directory, disk and EFI variables, its state, stopping it, VMs of
//!   dead tests
//! - `boot.rs`: one boot: the QEMU command line, the guest's report, the serial log, reboots,
//!   boots that failed
//! - `guest.rs`: running scripts in the guest through the share ([`Vm::exec`], [`SHARE_INSIDE`])
//! - `hearth.rs`: hearth's agent, helper and units in the guest ([`Vm::install_hearth`])
//! - `workspace.rs`: binaries of this workspace for the guest ([`workspace_binary`])
//!
//! Imports run one way: `boot`, `guest` and `hearth` use `vm`, which uses `image` and
//! `entries`; `boot` also reads the ESP with `entries` and takes the guest script from `guest`, `hearth` runs scripts through it and
//! takes binaries from `workspace`. This file only re-exports.

mod boot;
mod entries;
mod guest;
mod hearth;
mod image;
mod vm;
mod workspace;

pub use entries::{read_esp_entries, EspEntry};
pub use guest::{GuestOutput, SHARE_INSIDE};
pub use hearth::{GUEST_AGENT, GUEST_HELPER};
pub use image::{cached_vm_image, refs, vm_image_key, VmImage, BUILD_VM_IMAGE_SCRIPT};
pub use vm::{FailedBoot, Vm, VmBoot, VmOptions};
pub use workspace::workspace_binary;

/// The host's loopback as the guest sees it (QEMU's user-mode network).
pub const HOST_FROM_GUEST: &str = "10.0.2.2";
