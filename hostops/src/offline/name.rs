//! Unit names: the `prefix@instance.suffix` grammar, templates and instances, unescaping, and
//! the specifiers (`%n %N %p %P %i %I %j %J %f %%`) of `[Install]` values.

use super::error::OfflineError;
// The grammar itself is hearth-config's, shared with manifest validation.
pub(super) use hearth_config::unit_name::{valid_char, UnitName};

pub(super) fn parse_name(name: &str) -> Option<UnitName<'_>> {
    hearth_config::unit_name::parse(name)
}

pub(super) fn is_valid_name(name: &str) -> bool {
    parse_name(name).is_some()
}

pub(super) fn is_template(name: &str) -> bool {
    matches!(
        parse_name(name),
        Some(UnitName {
            instance: Some(""),
            ..
        })
    )
}

pub(super) fn is_instance(name: &str) -> bool {
    matches!(parse_name(name), Some(UnitName { instance: Some(i), .. }) if !i.is_empty())
}

/// `foo@bar.service` → `foo@.service`; `None` for names without `@`.
pub(super) fn template_of(name: &str) -> Option<String> {
    let n = parse_name(name)?;
    n.instance?;
    Some(format!("{}@.{}", n.prefix, n.suffix))
}

pub(super) fn instance_of(name: &str) -> Option<&str> {
    parse_name(name)?.instance
}

/// `foo@.service` (or `foo@x.service`) with `bar` → `foo@bar.service`.
pub(super) fn replace_instance(name: &str, instance: &str) -> Option<String> {
    let n = parse_name(name)?;
    n.instance?;
    Some(format!("{}@{}.{}", n.prefix, instance, n.suffix))
}

pub(super) fn validate(unit: &str) -> Result<(), OfflineError> {
    if is_valid_name(unit) {
        Ok(())
    } else {
        Err(OfflineError::InvalidName {
            unit: unit.to_string(),
        })
    }
}

/// `\xNN` escapes decoded (systemd's `unit_name_unescape`).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() && bytes[i + 1] == b'x' {
            let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `%n %N %p %P %i %I %j %J %f %%` of `[Install]` values (systemd's `install_name_printf`).
pub(super) fn printf(name: &str, value: &str) -> Result<String, String> {
    if !value.contains('%') {
        return Ok(value.to_string());
    }
    let parts = parse_name(name).ok_or_else(|| format!("invalid unit name {name}"))?;
    let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
    let instance = parts.instance.unwrap_or("");
    let last_of_prefix = parts.prefix.rsplit('-').next().unwrap_or(parts.prefix);
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = chars
            .next()
            .ok_or_else(|| format!("\"{value}\" ends with a lone %"))?;
        match spec {
            '%' => out.push('%'),
            'n' => out.push_str(name),
            'N' => out.push_str(stem),
            'p' => out.push_str(parts.prefix),
            'P' => out.push_str(&unescape(parts.prefix)),
            'i' => out.push_str(instance),
            'I' => out.push_str(&unescape(instance)),
            'j' => out.push_str(last_of_prefix),
            'J' => out.push_str(&unescape(last_of_prefix)),
            'f' => {
                let src = if instance.is_empty() {
                    parts.prefix
                } else {
                    instance
                };
                let path = unescape(&src.replace('-', "/"));
                out.push('/');
                out.push_str(path.trim_start_matches('/'));
            }
            other => {
                return Err(format!(
                    "the specifier %{other} in \"{value}\" depends on the running system and is \
                     not supported offline"
                ))
            }
        }
    }
    Ok(out)
}
