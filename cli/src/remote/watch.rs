//! `hearth get -w`: after the list, print each row that changes until interrupted.
//!
//! The CLI asks the server again every [`WATCH_INTERVAL`] (a plain poll of the same list
//! request; the admin API has no watch stream) and prints the rows that are new or differ from
//! the last one printed for that object, in the table's columns. Columns that only tick with
//! the clock (AGE, LASTREPORT, LAST SEEN) do not count as a change. Events print each new event
//! once. An object that is deleted prints nothing. An error from the server ends the watch
//! (exit 1), as `kubectl get -w` does when its watch breaks.

use super::conn::Client;
use super::get::{fetch, name_line, rows, GetArgs, GetKind};
use super::select::Selector;
use super::table::Table;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// How often `get -w` asks the server again.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Columns that change with the clock alone.
const CLOCK_COLUMNS: [&str; 3] = ["AGE", "LASTREPORT", "LAST SEEN"];

/// What identifies an object's row across polls: its name; an event is its whole document.
fn key(kind: GetKind, o: &Value) -> String {
    match kind {
        GetKind::Events => o.to_string(),
        _ => o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

/// A row without its clock columns: what a change is judged by.
fn comparable(header: &[&str], row: &[String]) -> Vec<String> {
    header
        .iter()
        .zip(row)
        .filter(|(h, _)| !CLOCK_COLUMNS.contains(h))
        .map(|(_, c)| c.clone())
        .collect()
}

/// Follows `a`'s list after `first` was printed: as rows of `table` (with `-o wide` or not), or
/// as names when `table` is none. Returns only on an error.
pub(super) fn follow(
    c: &Client,
    a: &GetArgs,
    sel: &Selector,
    first: &[Value],
    table: Option<(Table, bool)>,
) -> anyhow::Result<()> {
    let kind = a.kind;
    let mut seen: HashMap<String, Vec<String>> = HashMap::new();
    let mut table = table;
    let remember = |seen: &mut HashMap<String, Vec<String>>,
                    objects: &[Value],
                    table: &mut Option<(Table, bool)>,
                    print: bool|
     -> anyhow::Result<()> {
        let (header, rows) = match table {
            Some((_, wide)) => rows(kind, objects, *wide)?,
            None => (
                Vec::new(),
                objects.iter().map(|o| vec![name_line(kind, o)]).collect(),
            ),
        };
        for (o, row) in objects.iter().zip(rows) {
            let cmp = comparable(&header, &row);
            let k = key(kind, o);
            let cmp = if header.is_empty() { row.clone() } else { cmp };
            if seen.get(&k) == Some(&cmp) {
                continue;
            }
            if print {
                match table {
                    Some((t, _)) => t.print(&row),
                    None => crate::outln!("{}", row[0]),
                }
            }
            seen.insert(k, cmp);
        }
        Ok(())
    };
    remember(&mut seen, first, &mut table, false)?;
    loop {
        std::thread::sleep(WATCH_INTERVAL);
        let objects = fetch(c, a, sel)?;
        remember(&mut seen, &objects, &mut table, true)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_columns_are_not_a_change() {
        let header = ["NAME", "STATE", "AGE"];
        let a = comparable(&header, &["w0".into(), "Done".into(), "5s".into()]);
        let b = comparable(&header, &["w0".into(), "Done".into(), "7s".into()]);
        let c = comparable(&header, &["w0".into(), "Working".into(), "7s".into()]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
