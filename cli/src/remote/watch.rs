//! `hearth get -w`: after the list, print each row that changes until interrupted.
//!
//! The CLI asks the server again every [`WATCH_INTERVAL`] (a plain poll of the same list
//! request; the admin API has no watch stream) and prints the rows that are new or differ from
//! the last one printed for that object, in the table's columns. Columns that only tick with
//! the clock (AGE, LASTREPORT, LAST SEEN) do not count as a change. Events print each new event
//! once. An object that is deleted prints nothing. An error from the server ends the watch
//! (exit 1), as `kubectl get -w` does when its watch breaks.

use super::get::{fetch, name_line, rows, GetArgs, GetKind, Listed};
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

/// A row as `follow` sees it.
struct Keyed {
    /// Which object it is ([`key`]).
    key: String,
    /// What a change is judged by ([`comparable`]).
    cmp: Vec<String>,
    /// The cells to print.
    row: Vec<String>,
}

/// The rows of `objects` as `follow` prints them (table rows, or one name per row).
fn keyed_rows(a: &GetArgs, objects: &[Value], wide: Option<bool>) -> anyhow::Result<Vec<Keyed>> {
    let (header, rows) = match wide {
        Some(wide) => rows(a.kind, objects, wide)?,
        None => (
            Vec::new(),
            objects.iter().map(|o| vec![name_line(a.kind, o)]).collect(),
        ),
    };
    Ok(objects
        .iter()
        .zip(rows)
        .map(|(o, row)| {
            let cmp = if header.is_empty() {
                row.clone()
            } else {
                comparable(&header, &row)
            };
            Keyed {
                key: key(a.kind, o),
                cmp,
                row,
            }
        })
        .collect())
}

/// Follows `a`'s list after it was printed (`listed`): as rows of its table (with `-o wide` or
/// not), or as names when it has no table. Returns only on an error.
pub(super) fn follow(a: &GetArgs, listed: Listed) -> anyhow::Result<()> {
    let Listed {
        client: c,
        sel,
        objects: first,
        table,
    } = listed;
    let wide = table.as_ref().map(|(_, w)| *w);
    let mut table = table.map(|(t, _)| t);
    let mut printed: HashMap<String, Vec<String>> = keyed_rows(a, &first, wide)?
        .into_iter()
        .map(|k| (k.key, k.cmp))
        .collect();
    loop {
        std::thread::sleep(WATCH_INTERVAL);
        let objects = fetch(&c, a, &sel)?;
        // What is remembered is what this poll returned: objects gone (deleted, or events
        // past the server's window) are forgotten, so a long watch does not grow.
        let mut seen: HashMap<String, Vec<String>> = HashMap::with_capacity(objects.len());
        for k in keyed_rows(a, &objects, wide)? {
            if printed.get(&k.key) != Some(&k.cmp) {
                match &mut table {
                    Some(t) => t.print(&k.row),
                    None => crate::outln!("{}", k.row[0]),
                }
            }
            seen.insert(k.key, k.cmp);
        }
        printed = seen;
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
