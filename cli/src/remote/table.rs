//! Output helpers shared by `get`, `describe` and `rollout`: cells (escaped), ages and times,
//! conditions, the aligned table, and `describe`'s indented tables.

use crate::term::escape;
use serde_json::Value;
use unicode_width::UnicodeWidthStr;

/// Seconds since the epoch of an RFC 3339 time as the server writes it
/// (`2026-11-22T08:00:00Z`; any offset is read, through `jiff`); none for a time before the
/// epoch or text that is not one.
pub fn parse_time(s: &str) -> Option<u64> {
    let t: jiff::Timestamp = s.parse().ok()?;
    u64::try_from(t.as_second()).ok()
}

/// `kubectl`'s way of showing an age.
pub fn human_age(secs: u64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        format!("{m}m{}s", secs % 60)
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if d < 2 {
        format!("{h}h")
    } else if d < 8 {
        format!("{d}d{}h", h % 24)
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

fn now() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0)
}

pub(super) fn age(v: &Value) -> String {
    age_of(v.as_str())
}

/// A scalar for a table cell or a line of text, with control characters escaped (see
/// [`crate::term`]): strings here come from the server, and through it from nodes.
pub(super) fn s(v: &Value) -> String {
    match v {
        Value::String(s) if !s.is_empty() => escape(s).into_owned(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// [`age`] of a time the server may leave out.
pub(super) fn age_of(t: Option<&str>) -> String {
    t.and_then(parse_time)
        .map(|t| human_age(now().saturating_sub(t)))
        .unwrap_or_else(|| "<unknown>".into())
}

/// A string from the server for a cell or a line, escaped (see [`crate::term`]).
pub(super) fn text(t: &str) -> String {
    escape(t).into_owned()
}

/// A string the server may leave out or empty: escaped, or `-`.
pub(super) fn opt(t: Option<&str>) -> String {
    match t {
        Some(t) if !t.is_empty() => text(t),
        _ => "-".into(),
    }
}

/// A boolean as `kubectl` shows one.
pub(super) fn yes(b: bool) -> String {
    if b { "True" } else { "False" }.into()
}

/// Column widths for rows printed as `kubectl` prints them: left-aligned, three spaces apart.
/// `get -w` keeps one for the rows it prints later (a wider cell widens its column from then
/// on), which is why this is not `tabwriter` (Go's text/tabwriter, kubectl's): that one aligns
/// only what it buffered before a flush. Cells are escaped first and measured in terminal
/// columns (`unicode-width`: a CJK character takes two), so that a node's control characters or
/// wide names cannot break the alignment.
pub(super) struct Table {
    widths: Vec<usize>,
}

impl Table {
    /// Widths that fit `header` and `rows`.
    pub(super) fn new(header: &[&str], rows: &[Vec<String>]) -> Table {
        let mut t = Table {
            widths: header.iter().map(|h| h.len()).collect(),
        };
        for r in rows {
            t.fit(r);
        }
        t
    }

    fn fit<S: AsRef<str>>(&mut self, cells: &[S]) {
        for (i, c) in cells.iter().enumerate() {
            let n = UnicodeWidthStr::width(&*escape(c.as_ref()));
            match self.widths.get_mut(i) {
                Some(w) => *w = (*w).max(n),
                None => self.widths.push(n),
            }
        }
    }

    /// Prints one row (escaped: cells may come from nodes).
    pub(super) fn print<S: AsRef<str>>(&mut self, cells: &[S]) {
        let line = self.line(cells);
        crate::outln!("{line}");
    }

    /// One row as printed.
    fn line<S: AsRef<str>>(&mut self, cells: &[S]) -> String {
        self.fit(cells);
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let cell = escape(c.as_ref());
            out.push_str(&cell);
            if i + 1 < cells.len() {
                let pad = self.widths[i].saturating_sub(UnicodeWidthStr::width(&*cell));
                out.push_str(&" ".repeat(pad + 3));
            }
        }
        out.trim_end().to_string()
    }
}

/// Prints rows as `kubectl` does: left-aligned columns, three spaces apart; the header line
/// unless `no_headers` (`--no-headers`).
pub(super) fn table(header: &[&str], rows: &[Vec<String>], no_headers: bool) {
    let mut t = Table::new(header, rows);
    if !no_headers {
        t.print(header);
    }
    for r in rows {
        t.print(r);
    }
}

pub(super) fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Rows as `describe` prints them under a heading: indented two spaces, columns two spaces
/// apart, widths in characters (cells are escaped by the caller).
pub(super) fn indent_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_in_terminal_columns_after_escaping() {
        let rows = vec![
            vec!["w\x1b[31m0".to_string(), "Done".to_string()],
            vec!["节点一".to_string(), "Degraded".to_string()],
        ];
        let mut t = Table::new(&["NAME", "STATE"], &rows);
        let lines: Vec<String> = std::iter::once(t.line(&["NAME", "STATE"]))
            .chain(rows.iter().map(|r| t.line(r)))
            .collect();
        // The escaped name is the widest cell: every STATE starts in the same column.
        let col = |l: &str, s: &str| UnicodeWidthStr::width(&l[..l.find(s).unwrap()]);
        assert_eq!(col(&lines[0], "STATE"), col(&lines[1], "Done"), "{lines:?}");
        assert_eq!(
            col(&lines[0], "STATE"),
            col(&lines[2], "Degraded"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("w\\x1b[31m0"), "{lines:?}");
    }

    #[test]
    fn times_and_ages() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(
            parse_time("2026-11-22T01:01:01Z"),
            Some(1_795_305_600 + 3661)
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(
            parse_time("2026-11-22T02:01:01+01:00"),
            Some(1_795_305_600 + 3661)
        );
        assert_eq!(parse_time("1969-12-31T23:59:59Z"), None);
        assert_eq!(parse_time("2026-02-30T00:00:00Z"), None);
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(300), "5m0s");
        assert_eq!(human_age(3600), "60m");
        assert_eq!(human_age(5 * 3600 + 60), "5h1m");
        assert_eq!(human_age(3 * 86_400), "3d0h");
        assert_eq!(human_age(30 * 86_400), "30d");
    }
}
