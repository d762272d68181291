//! hearth-hostops' integration tests in one binary, a module per file: one link
//! instead of one per file, the most of a fresh build's test time saved. Files that must run
//! alone are test targets of their own (Cargo.toml, `autotests = false`).

mod os_common;

/// The guest side of `Mode::Inside` for every `os_*` module, at the binary's top level so that
/// `--exact guest_entry_point` names it (does nothing in a normal run).
#[test]
fn guest_entry_point() {
    os_common::guest_entry_point();
}

mod drift_host;
mod drift_monitor;
mod os_bootcount;
mod os_container;
mod os_detect;
mod os_measure;
mod os_ostree;
mod os_space;
mod reboot_logind;
mod selinux_labels;
mod systemd_dbus;
mod systemd_offline;
mod users_keys;
mod users_passwd;
mod users_shadow;
mod verify_host;
mod verify_offline;
