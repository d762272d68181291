//! The rpm-ostree D-Bus names the stand-in serves (as in rpm-ostree's
//! `org.projectatomic.rpmostree1.xml`).

pub const BUS_NAME: &str = "org.projectatomic.rpmostree1";
pub const SYSROOT_PATH: &str = "/org/projectatomic/rpmostree1/Sysroot";
pub const TRANSACTION_IFACE: &str = "org.projectatomic.rpmostree1.Transaction";
