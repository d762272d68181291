//! Text from the server (and through it from nodes) made safe for an admin's terminal: used by
//! the CLI for everything it prints and by the server for the journal entries of what nodes
//! said (journalctl prints them to a terminal too). Pure functions, no I/O.
//!
//! A node is not trusted: its reason, journal lines, drift entries, names and labels reach
//! `hearth get`, `describe` and `rollout status`. Printed raw, an escape sequence in them could
//! clear the screen, retitle the window, move the cursor over earlier lines or hide text, and a
//! newline or carriage return could print a line that looks like `hearth`'s own. Every string
//! that did not come from this program goes through [`escape`] (one line: every control
//! character shown as an escape) or [`escape_keep_newlines`] (a block of lines this program
//! composed), and JSON/YAML output through [`json_safe`].
//!
//! What is escaped: every Unicode control character (C0 including `\n`, `\r`, `\t`, ESC; DEL;
//! C1, which some terminals act on as 8-bit controls: U+009B is CSI) and the invisible format
//! characters that reorder or hide text (bidirectional overrides and isolates, zero-width
//! characters, the line and paragraph separators, the byte order mark). Everything else,
//! including non-ASCII text, is printed as it is.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters that are not control characters but change how the text around them shows.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' // zero-width space/joiners, LRM, RLM
        | '\u{2028}' | '\u{2029}' // line and paragraph separator
        | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
        | '\u{2060}'..='\u{2069}' // word joiner, invisible operators, bidi isolates
        | '\u{FEFF}' // byte order mark / zero-width no-break space
        | '\u{061C}' // Arabic letter mark
    )
}

/// Whether `c` must not reach a terminal as it is.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_invisible_format(c)
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line of untrusted text: every control and invisible format character, newlines
/// included, becomes a visible escape (`\n`, `\x1b`, `\u{202e}`).
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, |_| false)
}

/// A block of lines: like [`escape`] but newlines stay (use it on text whose lines this
/// program composed from already-escaped fields, as a second guard).
pub fn escape_keep_newlines(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c == '\n')
}

/// Serialized JSON (or a YAML double-quoted scalar) with the characters `serde_json` leaves raw
/// (DEL, C1, invisible format characters) written as `\uXXXX`. Such characters can only stand
/// inside strings in JSON, where `\uXXXX` means the same character, so the document's value
/// is unchanged. C0 characters are already escaped by `serde_json` inside strings, and outside
/// them they are the document's layout.
pub fn json_safe(text: &str) -> Cow<'_, str> {
    // C0 characters outside strings are the document's own layout (pretty-printing).
    let raw = |c: char| is_unsafe(c) && c as u32 >= 0x7f;
    if !text.chars().any(raw) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if raw(c) {
            // Every such character is in the Basic Multilingual Plane: one `\uXXXX`.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(escape("worker-0 Done ✓ é"), Cow::Borrowed(_)));
        assert!(matches!(json_safe(r#"{"a":"ü"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_controls_become_visible() {
        assert_eq!(
            escape("ok\x1b]0;pwned\x07\x1b[2J\rDone\nworker-1 Done"),
            "ok\\x1b]0;pwned\\x07\\x1b[2J\\rDone\\nworker-1 Done"
        );
        assert_eq!(escape("a\u{9b}31mb\u{7f}"), "a\\x9b31mb\\x7f");
        assert_eq!(escape("abc\u{202e}gpj.exe"), "abc\\u{202e}gpj.exe");
        assert_eq!(escape("tab\there"), "tab\\there");
    }

    #[test]
    fn blocks_keep_their_newlines_only() {
        assert_eq!(escape_keep_newlines("a\n\x1b[Hb\n"), "a\n\\x1b[Hb\n");
    }

    #[test]
    fn json_stays_the_same_value() {
        let v = serde_json::json!({"reason": "x\u{1b}[2J\u{9b}1m\u{202e}y\u{7f}"});
        let text = serde_json::to_string_pretty(&v).unwrap();
        let safe = json_safe(&text);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, v);
    }
}
