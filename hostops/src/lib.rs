//! `hearth-hostops`: the one handle hearth has on a host.
//!
//! - [`fs`]: files under a root, written crash-safely (temp, fsync, rename, directory fsync),
//!   never through a symbolic link out of the root, labelled for SELinux before they appear.
//! - [`files`]: managed files: a config's file entries, the originals hearth overwrote, undo.
//! - [`selinux`]: the label the policy's `file_contexts` give a path (read without libselinux).
//! - [`passwd`]: users and groups of the target root (its `/etc/passwd`, not the machine's).
//! - [`users`]: SSH keys and the password hash of user `core`, as the MCO writes them.
//! - [`systemd`]: systemd over D-Bus: unit files, unit jobs whose result is checked, states.
//! - [`offline`]: unit enablement without a running systemd (`systemctl --root` semantics).
//! - [`reboot`]: reboot through logind, never past a block inhibitor.
//! - [`verify`]: does the host match a rendered config (on-disk state validation).
//! - [`drift`]: the drift monitor: notices when someone changes a managed file.
//! - [`os`]: the OS layer: kernel arguments, kernel type and OS image through one
//!   [`os::OsBackend`] (libostree in the helper process `hearth-ostree-helper`, rpm-ostree over
//!   D-Bus, or none); configuration, image refs, changes, status and the kernel argument ledger
//!   each in a file of their own. This crate links no libostree or GLib.
//!
//! Imports run one way: `fs` uses `selinux` (which reads the policy through its
//! `PolicySource` trait, implemented by `fs::Root`); `passwd`, `files`, `offline` and `os` (its
//! ledger) use `fs`; `users` uses `fs` and `passwd`; `verify` uses those and `users`; `drift`
//! uses `verify`. `systemd` and `reboot` stand alone (D-Bus). See `docs/architecture.md`,
//! `docs/hostops-host.md`, `docs/hostops-systemd.md` and `docs/os-layer.md`.
pub mod drift;
pub mod files;
pub mod fs;
pub mod offline;
pub mod os;
pub mod passwd;
pub mod reboot;
pub mod selinux;
pub mod systemd;
pub mod users;
pub mod verify;
