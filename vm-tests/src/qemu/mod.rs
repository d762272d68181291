//! The VM tier: a real kernel, a dracut initramfs with the ostree module, real reboots, in QEMU
//! with software emulation (TCG: these machines have no usable KVM).
//!
//! ```no_run
//! use hearth_vm_tests::qemu::{Vm, VmOptions};
//!
//! # fn main() -> anyhow::Result<()> {
//! let mut vm = Vm::boot(VmOptions::default())?;     // ~1 min: kernel, initramfs, systemd
//! assert!(vm.proc_cmdline().contains("ostree=/ostree/boot."));
//! vm.exec_ok("ostree admin deploy --stage --karg-append=selinux=0 hearth/debian/v1")?;
//! vm.reboot()?;                                     // QEMU exits, the harness boots the new default entry
//! assert!(vm.proc_cmdline().split(' ').any(|a| a == "selinux=0"));
//! # Ok(()) }
//! ```
//!
//! ## Pieces
//!
//! - [`cached_vm_image`]: `images/build-vm-image.sh` (Debian 12, `linux-image-amd64`, dracut
//!   with the ostree module, commits `hearth/debian/v1` and `v2`, v1 deployed, written into a
//!   raw ext4 disk with `mkfs.ext4 -d`), built once and cached in
//!   `$HEARTH_TEST_CACHE/vm-image-<sha256 of the script>` like the other images.
//! - [`Vm`]: a sparse copy of the disk per VM (`$HEARTH_TEST_TMPDIR/hearth-vm-<8 hex>/disk.raw`).
//!   The harness is the boot loader: before every boot it reads the default BLS entry
//!   (`/boot/loader/entries/*.conf` with the highest `version`, as libostree orders them) from
//!   the disk with `debugfs` (no mount, no loop device), extracts that entry's kernel and initrd
//!   and starts `qemu-system-x86_64 -accel tcg,thread=multi -no-reboot -kernel ... -initrd ...
//!   -append <options>`. A reboot inside makes QEMU exit; the harness reads the entries again
//!   and boots the (new) default.
//! - The guest talks to the harness through a 9p share (`-virtfs ...,mount_tag=hearth`),
//!   mounted at `/run/hearth-test` by the image's `hearth-share.service`. `hearth-guest.service`
//!   runs `/run/hearth-test/guest.sh`, which the harness writes before every boot: it reports the
//!   boot (`ready`: boot id and `/proc/cmdline`) and then runs the scripts the harness drops
//!   into `cmd/` ([`Vm::exec`]), writing their output and exit code back. Binaries the tests
//!   need (the agent) are copied into the share ([`Vm::share_dir`]): the image does not change
//!   when hearth does.
//! - The serial console (kernel, systemd, the guest script) is appended to `serial.log` in the
//!   VM's directory; errors carry its last 100 lines.
//!
//! ## Files
//!
//! - `image.rs`: the cached VM image ([`cached_vm_image`], [`VmImage`], [`refs`])
//! - `entries.rs`: the disk's boot loader entries, read with `debugfs` ([`read_boot_entries`])
//! - `vm.rs`: a [`Vm`]: its directory and disk copy, its state, stopping it, VMs of dead tests
//! - `boot.rs`: one boot: the QEMU command line, the guest's report, the serial log, reboots
//! - `guest.rs`: running scripts in the guest through the share ([`Vm::exec`], [`SHARE_INSIDE`])
//! - `workspace.rs`: binaries of this workspace for the guest ([`workspace_binary`])
//!
//! Imports run one way: `boot` and `guest` use `vm`, which uses `image` and `entries`; `boot`
//! also uses `entries` and takes the guest script from `guest`. This file only re-exports.

mod boot;
mod entries;
mod guest;
mod image;
mod vm;
mod workspace;

pub use entries::{read_boot_entries, VmBootEntry};
pub use guest::{GuestOutput, SHARE_INSIDE};
pub use image::{cached_vm_image, refs, vm_image_key, VmImage, BUILD_VM_IMAGE_SCRIPT};
pub use vm::{Vm, VmBoot, VmOptions};
pub use workspace::workspace_binary;
