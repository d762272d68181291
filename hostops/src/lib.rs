//! `hearth-hostops`: the one handle hearth has on a host.
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
