//! systemd's unit-name grammar, in one place: `prefix.type`, templates `prefix@.type` and
//! instances `prefix@instance.type`, at most 255 bytes, letters, digits and `:-_.\` (and `@` in
//! an instance). [`crate::validate`] refuses manifests by it (with a message per problem) and
//! `hearth-hostops`' offline enablement parses `[Install]` names with it.

/// The unit types systemd loads from unit files (the part after the last `.`), in the order
/// messages list them.
pub const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "timer",
    "mount",
    "automount",
    "path",
    "slice",
    "scope",
    "swap",
    "device",
];

/// The longest unit name systemd accepts (a file name).
pub const MAX_LEN: usize = 255;

/// The parts of a unit name: `prefix@instance.suffix`; `instance` is `Some("")` for templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitName<'a> {
    /// Before the `@` (or the `.type`).
    pub prefix: &'a str,
    /// After the `@`: `None` without one, `Some("")` for a template.
    pub instance: Option<&'a str>,
    /// The unit type (`service`).
    pub suffix: &'a str,
}

/// Whether `c` may stand in a unit name (`@` included: it separates the instance, and [`parse`]
/// splits the prefix off at the first one).
pub fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_' | '.' | '\\' | '@')
}

/// Splits a valid unit name into its parts; `None` when systemd would not accept it.
pub fn parse(name: &str) -> Option<UnitName<'_>> {
    if name.is_empty() || name.len() > MAX_LEN {
        return None;
    }
    let (stem, suffix) = name.rsplit_once('.')?;
    if !UNIT_TYPES.contains(&suffix) {
        return None;
    }
    let (prefix, instance) = match stem.split_once('@') {
        Some((p, i)) => (p, Some(i)),
        None => (stem, None),
    };
    if prefix.is_empty() || !prefix.chars().all(valid_char) {
        return None;
    }
    if let Some(i) = instance {
        if !i.chars().all(valid_char) {
            return None;
        }
    }
    Some(UnitName {
        prefix,
        instance,
        suffix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_templates_and_instances() {
        let n = parse("getty@tty1.service").unwrap();
        assert_eq!(
            (n.prefix, n.instance, n.suffix),
            ("getty", Some("tty1"), "service")
        );
        assert_eq!(parse("getty@.service").unwrap().instance, Some(""));
        assert_eq!(parse("a.b.mount").unwrap().prefix, "a.b");
        let long = "a".repeat(250) + ".service";
        for bad in ["", "@x.service", "x.conf", "a b.service", "x", &long] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
