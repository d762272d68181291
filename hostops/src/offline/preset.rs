//! Presets: `*.preset` files in their directories, their `enable`/`disable` lines, the first
//! matching rule (enable when none matches), and `fnmatch(3)` globbing.

use super::error::OfflineError;
use super::lookup::{conf_files, Ctx};
use super::name::{instance_of, is_template, replace_instance, template_of};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PresetRule {
    pattern: String,
    enable: bool,
    instances: Option<Vec<String>>,
}

pub(super) fn read_presets(ctx: &Ctx<'_>) -> Result<Vec<PresetRule>, OfflineError> {
    let mut dirs: Vec<String> = [
        "/etc/systemd/system-preset",
        "/run/systemd/system-preset",
        "/usr/local/lib/systemd/system-preset",
        "/usr/lib/systemd/system-preset",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !ctx.same_dir(
        "/lib/systemd/system-preset",
        "/usr/lib/systemd/system-preset",
    )? {
        dirs.push("/lib/systemd/system-preset".into());
    }
    let mut rules = Vec::new();
    for file in conf_files(ctx, &dirs, ".preset")? {
        let text = ctx.read(&file)?.unwrap_or_default();
        for (n, line) in String::from_utf8_lossy(&text).lines().enumerate() {
            match parse_preset_line(line) {
                Ok(Some(rule)) => rules.push(rule),
                Ok(None) => {}
                Err(()) => tracing::warn!("{file}:{}: cannot parse \"{line}\", ignoring", n + 1),
            }
        }
    }
    Ok(rules)
}

pub(super) fn parse_preset_line(line: &str) -> Result<Option<PresetRule>, ()> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
        return Ok(None);
    }
    let first_word = |word: &str| {
        l.strip_prefix(word)
            .filter(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
            .map(str::trim)
    };
    if let Some(param) = first_word("enable") {
        let mut parts = param.split_whitespace();
        let pattern = parts.next().ok_or(())?.to_string();
        let instances: Vec<String> = parts.map(String::from).collect();
        if !instances.is_empty() && !is_template(&pattern) {
            return Err(());
        }
        return Ok(Some(PresetRule {
            pattern,
            enable: true,
            instances: (!instances.is_empty()).then_some(instances),
        }));
    }
    if let Some(param) = first_word("disable") {
        if param.is_empty() {
            return Err(());
        }
        return Ok(Some(PresetRule {
            pattern: param.to_string(),
            enable: false,
            instances: None,
        }));
    }
    Err(())
}

/// The first matching rule decides; none: enable. Returns (enable, instances to enable).
pub(super) fn query_presets(name: &str, rules: &[PresetRule]) -> (bool, Option<Vec<String>>) {
    for rule in rules {
        if let Some(instances) = &rule.instances {
            if template_of(name).as_deref() == Some(rule.pattern.as_str()) {
                if is_template(name) {
                    let names = instances
                        .iter()
                        .filter_map(|i| replace_instance(name, i))
                        .collect();
                    return (rule.enable, Some(names));
                }
                if instance_of(name).is_some_and(|i| instances.iter().any(|x| x == i)) {
                    return (rule.enable, None);
                }
            }
        }
        if fnmatch(&rule.pattern, name) {
            return (rule.enable, None);
        }
    }
    tracing::debug!("preset files have no rule for {name}: enabling");
    (true, None)
}

/// Shell glob matching as `fnmatch(3)` with `FNM_NOESCAPE`: `*`, `?`, `[...]` (with `!`/`^`
/// negation and ranges); `\` is an ordinary character.
pub(super) fn fnmatch(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = bracket(&p, pi, n[ni]) {
                        if matched {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the bracket expression at `p[start]` (`[`): `Some((matched, index after
/// it))`, `None` when the bracket is not closed (then `[` is literal).
fn bracket(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let ch = *p.get(i)?;
        if ch == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            let end = p[i + 2];
            if ch <= c && c <= end {
                matched = true;
            }
            i += 3;
        } else {
            if ch == c {
                matched = true;
            }
            i += 1;
        }
    }
}
