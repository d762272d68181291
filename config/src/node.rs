//! A YAML (and JSON) document as a tree of nodes that remember where they came from.
//!
//! Manifests are parsed into [`Node`]s first and only then decoded into typed structures (see
//! [`crate::de`]). Keeping the tree lets every later error name the line of the offending value,
//! and keeping each scalar's original text and quoting lets the decoder apply Kubernetes' YAML 1.1
//! rules per field: `mode: 0644` is the octal integer 420 for an integer field, while
//! `name: 0644` stays the string `"0644"` for a string field.
//!
//! JSON is read with the same parser: a JSON document is a YAML flow document, and a JSON string
//! is a double-quoted scalar, so `"mode": "420"` is refused for an integer field exactly as
//! `kubectl` refuses it.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use std::collections::HashMap;

/// One node of a parsed document.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: NodeValue,
    /// 1-based line where the node starts.
    pub line: usize,
    /// 1-based column where the node starts.
    pub col: usize,
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// `null`, `~`, or an empty value.
    Null,
    /// A scalar with its text as written (after YAML unescaping) and whether it was unquoted.
    Scalar {
        /// The scalar's text.
        text: String,
        /// True for a plain (unquoted, non-block) scalar: only those can be numbers or booleans.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order. Keys are scalars (other keys are refused while parsing).
    Map(Vec<(String, Node)>),
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {col}: {message}")]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

impl Node {
    /// A short name for the kind of value, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Scalar { plain: false, .. } => "string",
            NodeValue::Scalar { text, plain: true } => {
                if parse_yaml11_int(text).is_some() {
                    "integer"
                } else if parse_yaml11_bool(text).is_some() {
                    "boolean"
                } else {
                    "string"
                }
            }
            NodeValue::Seq(_) => "list",
            NodeValue::Map(_) => "mapping",
        }
    }

    /// The value of `key` if this node is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The scalar text of this node, if it is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// True for a null node.
    pub fn is_null(&self) -> bool {
        matches!(self.value, NodeValue::Null)
    }
}

/// Parses an integer with YAML 1.1 rules, as Kubernetes (go-yaml v2) reads them: a leading `0`
/// means octal (`0644` = 420), `0o` is also accepted, `0x` hex, `0b` binary, `_` separators
/// allowed, optional sign. Returns `None` for anything that is not such an integer.
pub fn parse_yaml11_int(text: &str) -> Option<i64> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if body.is_empty() {
        return None;
    }
    let cleaned: String = body.chars().filter(|c| *c != '_').collect();
    if cleaned.is_empty() || body.starts_with('_') {
        return None;
    }
    let (radix, digits) = if let Some(rest) = cleaned.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = cleaned.strip_prefix("0b") {
        (2, rest)
    } else if let Some(rest) = cleaned.strip_prefix("0o") {
        (8, rest)
    } else if cleaned.len() > 1 && cleaned.starts_with('0') {
        (8, &cleaned[1..])
    } else {
        (10, cleaned.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -magnitude } else { magnitude })
}

/// Parses a boolean with YAML 1.1 rules (`true`, `yes`, `on`, `y` and their opposites, in the
/// three usual capitalisations), as Kubernetes reads them.
pub fn parse_yaml11_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            Some(true)
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
            Some(false)
        }
        _ => None,
    }
}

fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// Parses every document of a YAML (or JSON) stream. Empty documents (a lone `---`, or a
/// document holding only comments) are returned as `Null` nodes so that document indexes match
/// what a user counts.
pub fn parse_documents(text: &str) -> Result<Vec<Node>, SyntaxError> {
    let mut builder = Builder::default();
    let parser = Parser::new_from_str(text);
    for item in parser {
        let (event, span) = item.map_err(|e| SyntaxError {
            line: e.marker().line(),
            col: e.marker().col() + 1,
            message: e.info().to_string(),
        })?;
        builder.event(event, span)?;
    }
    Ok(builder.documents)
}

enum Frame {
    Seq(Node, usize),
    Map(Node, usize, Option<(String, usize, usize)>),
}

#[derive(Default)]
struct Builder {
    documents: Vec<Node>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    in_document: bool,
    document_has_root: bool,
}

const MAX_DEPTH: usize = 256;

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let line = span.start.line();
        let col = span.start.col() + 1;
        let err = |message: String| SyntaxError { line, col, message };
        match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
            Event::DocumentStart(_) => {
                self.in_document = true;
                self.document_has_root = false;
                self.anchors.clear();
            }
            Event::DocumentEnd => {
                if !self.document_has_root {
                    self.documents.push(Node {
                        value: NodeValue::Null,
                        line,
                        col,
                    });
                }
                self.in_document = false;
            }
            Event::Alias(id) => {
                let node = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| err("alias refers to an unknown anchor".into()))?;
                self.push_value(node, 0)?;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = matches!(style, ScalarStyle::Plain);
                let forced_string = tag
                    .as_ref()
                    .map(|t| t.suffix == "str" || t.suffix.ends_with(":str"))
                    .unwrap_or(false);
                let value = if plain && !forced_string && is_null_text(&text) {
                    NodeValue::Null
                } else {
                    NodeValue::Scalar {
                        text: text.into_owned(),
                        plain: plain && !forced_string,
                    }
                };
                self.push_value(Node { value, line, col }, anchor)?;
            }
            Event::SequenceStart(anchor, _) => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(err(format!("nesting deeper than {MAX_DEPTH} levels")));
                }
                self.stack.push(Frame::Seq(
                    Node {
                        value: NodeValue::Seq(Vec::new()),
                        line,
                        col,
                    },
                    anchor,
                ));
            }
            Event::MappingStart(anchor, _) => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(err(format!("nesting deeper than {MAX_DEPTH} levels")));
                }
                self.stack.push(Frame::Map(
                    Node {
                        value: NodeValue::Map(Vec::new()),
                        line,
                        col,
                    },
                    anchor,
                    None,
                ));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq(node, anchor)) => (node, anchor),
                    Some(Frame::Map(node, anchor, pending)) => {
                        if let Some((key, kl, kc)) = pending {
                            return Err(SyntaxError {
                                line: kl,
                                col: kc,
                                message: format!("key {key:?} has no value"),
                            });
                        }
                        (node, anchor)
                    }
                    None => return Err(err("unbalanced end of collection".into())),
                };
                self.push_value(node, anchor)?;
            }
        }
        Ok(())
    }

    fn push_value(&mut self, node: Node, anchor: usize) -> Result<(), SyntaxError> {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => {
                self.documents.push(node);
                self.document_has_root = true;
            }
            Some(Frame::Seq(seq, _)) => {
                if let NodeValue::Seq(items) = &mut seq.value {
                    items.push(node);
                }
            }
            Some(Frame::Map(map, _, pending)) => match pending.take() {
                None => {
                    let key = match &node.value {
                        NodeValue::Scalar { text, .. } => text.clone(),
                        NodeValue::Null => "null".to_string(),
                        _ => {
                            return Err(SyntaxError {
                                line: node.line,
                                col: node.col,
                                message: format!(
                                    "a {} cannot be a mapping key; keys must be strings",
                                    node.kind_name()
                                ),
                            })
                        }
                    };
                    if let NodeValue::Map(entries) = &map.value {
                        if let Some((_, first)) = entries.iter().find(|(k, _)| *k == key) {
                            return Err(SyntaxError {
                                line: node.line,
                                col: node.col,
                                message: format!(
                                    "duplicate key {key:?} (first defined at line {})",
                                    first.line
                                ),
                            });
                        }
                    }
                    *pending = Some((key, node.line, node.col));
                }
                Some((key, _, _)) => {
                    if let NodeValue::Map(entries) = &mut map.value {
                        entries.push((key, node));
                    }
                }
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml11_integers_follow_kubernetes() {
        assert_eq!(parse_yaml11_int("0644"), Some(420));
        assert_eq!(parse_yaml11_int("0755"), Some(493));
        assert_eq!(parse_yaml11_int("420"), Some(420));
        assert_eq!(parse_yaml11_int("0o644"), Some(420));
        assert_eq!(parse_yaml11_int("0x1A4"), Some(420));
        assert_eq!(parse_yaml11_int("0"), Some(0));
        assert_eq!(parse_yaml11_int("-12"), Some(-12));
        assert_eq!(parse_yaml11_int("1_000"), Some(1000));
        assert_eq!(parse_yaml11_int("0999"), None, "9 is not an octal digit");
        assert_eq!(parse_yaml11_int("3.2.0"), None);
        assert_eq!(parse_yaml11_int(""), None);
        assert_eq!(parse_yaml11_int("-"), None);
        assert_eq!(parse_yaml11_int("99999999999999999999"), None);
    }

    #[test]
    fn lines_and_styles_are_kept() {
        let docs = parse_documents("a: 1\nb:\n  - '0644'\n  - 0644\n---\n---\nc: ~\n").unwrap();
        assert_eq!(docs.len(), 3);
        let b = docs[0].get("b").unwrap();
        assert_eq!(b.line, 3);
        match &b.value {
            NodeValue::Seq(items) => {
                assert_eq!(items[0].line, 3);
                assert_eq!(
                    items[0].value,
                    NodeValue::Scalar {
                        text: "0644".into(),
                        plain: false
                    }
                );
                assert_eq!(items[1].line, 4);
                assert_eq!(
                    items[1].value,
                    NodeValue::Scalar {
                        text: "0644".into(),
                        plain: true
                    }
                );
            }
            other => panic!("not a seq: {other:?}"),
        }
        assert!(docs[1].is_null());
        assert!(docs[2].get("c").unwrap().is_null());
    }

    #[test]
    fn duplicate_keys_are_refused_with_both_lines() {
        let err = parse_documents("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("duplicate key \"a\""), "{err}");
        assert!(err.message.contains("line 1"), "{err}");
    }

    #[test]
    fn anchors_and_aliases_resolve() {
        let docs = parse_documents("x: &m {k: v}\ny: *m\n").unwrap();
        assert_eq!(
            docs[0].get("y").unwrap().get("k").unwrap().as_str(),
            Some("v")
        );
    }

    #[test]
    fn json_is_read_with_strings_quoted() {
        let docs = parse_documents(r#"{"mode": 420, "name": "420", "n": null}"#).unwrap();
        assert_eq!(docs[0].get("mode").unwrap().kind_name(), "integer");
        assert_eq!(docs[0].get("name").unwrap().kind_name(), "string");
        assert!(docs[0].get("n").unwrap().is_null());
    }

    #[test]
    fn misindented_yaml_fails_with_a_line() {
        let text = "spec:\n  kernelArguments:\n - a\n - b\n";
        let err = parse_documents(text).unwrap_err();
        assert!(err.line >= 3, "{err}");
    }
}
