//! Unit paths and keyed lists.

use super::action::is_systemd_unit_path;
use super::entries::keyed;

#[test]
fn systemd_unit_paths() {
    assert!(is_systemd_unit_path("/etc/systemd/system/a.service"));
    assert!(is_systemd_unit_path(
        "/etc/systemd/system/a.service.d/x.conf"
    ));
    assert!(!is_systemd_unit_path("/etc/systemd/system"));
    assert!(!is_systemd_unit_path("/etc/systemd/system.conf"));
    assert!(!is_systemd_unit_path("/etc/systemd/systemd.conf"));
}

#[test]
fn keyed_last_entry_wins_at_first_position() {
    let items = [("a", 1), ("b", 2), ("a", 3)];
    let k = keyed(&items, |x| x.0);
    let v: Vec<_> = k.iter().map(|(k, (i, x))| (*k, *i, x.1)).collect();
    assert_eq!(v, [("a", 2, 3), ("b", 1, 2)]);
}
