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
use std::collections::{HashMap, HashSet};

/// The most nodes one stream (one file) may hold, counting every node an alias expands to:
/// enough for a hundred thousand files or kernel arguments, small enough that the tree stays
/// within a few hundred MiB whatever the input.
pub const MAX_NODES: usize = 2_000_000;

/// The deepest nesting of sequences and mappings accepted.
pub const MAX_DEPTH: usize = 256;

/// Below this many nodes, aliases may make up to 99% of a document (go-yaml's
/// `alias_ratio_range_low`).
const ALIAS_RATIO_RANGE_LOW: f64 = 400_000.0;
/// From this many nodes on, aliases may make up only 10% of a document
/// (`alias_ratio_range_high`).
const ALIAS_RATIO_RANGE_HIGH: f64 = 4_000_000.0;

/// The share of a document's nodes that may come from alias expansion when it has
/// `nodes` nodes, as go-yaml (the reader under Kubernetes' `sigs.k8s.io/yaml`) allows it:
/// 99% up to 400,000 nodes, falling linearly to 10% at 4,000,000.
pub fn allowed_alias_ratio(nodes: usize) -> f64 {
    let n = nodes as f64;
    if n <= ALIAS_RATIO_RANGE_LOW {
        0.99
    } else if n >= ALIAS_RATIO_RANGE_HIGH {
        0.10
    } else {
        0.99 - 0.89
            * ((n - ALIAS_RATIO_RANGE_LOW) / (ALIAS_RATIO_RANGE_HIGH - ALIAS_RATIO_RANGE_LOW))
    }
}

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

/// A syntax error (or a refused document) with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {col}: {message}")]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub message: String,
    /// True when the document is well-formed YAML but exceeds a limit (alias expansion, node
    /// count, nesting depth) rather than being malformed.
    pub limit: bool,
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
    parse_with_limit(text, MAX_NODES)
}

fn parse_with_limit(text: &str, max_nodes: usize) -> Result<Vec<Node>, SyntaxError> {
    let mut builder = Builder {
        max_nodes,
        ..Builder::default()
    };
    let parser = Parser::new_from_str(text);
    for item in parser {
        let (event, span) = item.map_err(|e| {
            // The parser's own guard against deep flow nesting is a limit, not a typo.
            let limit = e.info().contains("recursion limit");
            SyntaxError {
                line: e.marker().line(),
                col: e.marker().col() + 1,
                message: if limit {
                    format!("nesting deeper than the YAML parser allows ({}); hearth refuses deeper documents", e.info())
                } else {
                    e.info().to_string()
                },
                limit,
            }
        })?;
        builder.event(event, span)?;
    }
    Ok(builder.documents)
}

/// A key waiting for its value: text, line, column, and whether it is a merge key (`<<`).
type PendingKey = (String, usize, usize, bool);

/// A collection being built: the node, its anchor (0: none) and how many nodes it holds
/// (itself included).
enum Frame {
    Seq(Node, usize, usize),
    Map(MapFrame),
}

struct MapFrame {
    node: Node,
    anchor: usize,
    size: usize,
    pending: Option<PendingKey>,
    /// Line of every explicit key, for the duplicate check in constant time.
    keys: HashMap<String, usize>,
    /// Values of `<<` merge keys, merged when the mapping ends.
    merges: Vec<Node>,
}

#[derive(Default)]
struct Builder {
    documents: Vec<Node>,
    stack: Vec<Frame>,
    /// Anchored nodes with their node counts.
    anchors: HashMap<usize, (Node, usize)>,
    in_document: bool,
    document_has_root: bool,
    /// Nodes built so far in the stream, alias expansions included.
    nodes: usize,
    /// Of those, the nodes that alias expansion produced.
    alias_nodes: usize,
    /// [`MAX_NODES`], smaller in tests.
    max_nodes: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let line = span.start.line();
        let col = span.start.col() + 1;
        let err = |message: String| SyntaxError {
            line,
            col,
            message,
            limit: false,
        };
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
                let size = self
                    .anchors
                    .get(&id)
                    .map(|(_, size)| *size)
                    .ok_or_else(|| err("alias refers to an unknown anchor".into()))?;
                // Count before copying: a refused expansion allocates nothing.
                self.count(size, true).map_err(|m| SyntaxError {
                    limit: true,
                    ..err(m)
                })?;
                let node = self.anchors[&id].0.clone();
                self.push_value(node, 0, size)?;
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
                self.count(1, false).map_err(|m| SyntaxError {
                    limit: true,
                    ..err(m)
                })?;
                self.push_value(Node { value, line, col }, anchor, 1)?;
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(SyntaxError {
                        limit: true,
                        ..err(format!(
                            "nesting deeper than {MAX_DEPTH} levels; hearth refuses deeper documents"
                        ))
                    });
                }
                self.count(1, false).map_err(|m| SyntaxError {
                    limit: true,
                    ..err(m)
                })?;
                let frame = if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(
                        Node {
                            value: NodeValue::Seq(Vec::new()),
                            line,
                            col,
                        },
                        anchor,
                        1,
                    )
                } else {
                    Frame::Map(MapFrame {
                        node: Node {
                            value: NodeValue::Map(Vec::new()),
                            line,
                            col,
                        },
                        anchor,
                        size: 1,
                        pending: None,
                        keys: HashMap::new(),
                        merges: Vec::new(),
                    })
                };
                self.stack.push(frame);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, size) = match self.stack.pop() {
                    Some(Frame::Seq(node, anchor, size)) => (node, anchor, size),
                    Some(Frame::Map(frame)) => {
                        if let Some((key, kl, kc, _)) = frame.pending {
                            return Err(SyntaxError {
                                line: kl,
                                col: kc,
                                message: format!("key {key:?} has no value"),
                                limit: false,
                            });
                        }
                        let MapFrame {
                            mut node,
                            anchor,
                            size,
                            keys,
                            merges,
                            ..
                        } = frame;
                        if !merges.is_empty() {
                            merge_keys(&mut node, keys, merges)?;
                        }
                        (node, anchor, size)
                    }
                    None => return Err(err("unbalanced end of collection".into())),
                };
                self.push_value(node, anchor, size)?;
            }
        }
        Ok(())
    }

    /// Counts `n` more nodes (from an alias when `alias`), refusing the document when it grows
    /// past [`MAX_NODES`] or when aliases make up more of it than go-yaml allows (the check
    /// Kubernetes' YAML reader applies against "billion laughs" documents: past 100 alias-made
    /// nodes and 1,000 nodes in all, the alias-made share must stay within
    /// [`allowed_alias_ratio`]).
    fn count(&mut self, n: usize, alias: bool) -> Result<(), String> {
        let nodes = self.nodes.saturating_add(n);
        if nodes > self.max_nodes {
            return Err(if alias {
                format!(
                    "this alias would expand the file past {} YAML nodes; hearth refuses documents that large (excessive aliasing?): write the values out or split the file",
                    self.max_nodes
                )
            } else {
                format!(
                    "the file holds more than {} YAML nodes; hearth refuses documents that large: split the file",
                    self.max_nodes
                )
            });
        }
        self.nodes = nodes;
        if alias {
            self.alias_nodes += n;
            if self.alias_nodes > 100
                && self.nodes > 1000
                && self.alias_nodes as f64 / self.nodes as f64 > allowed_alias_ratio(self.nodes)
            {
                return Err(format!(
                    "excessive aliasing: aliases expand to {} of the {} YAML nodes read so far (at most {:.0}% may come from aliases at this size, as in Kubernetes' YAML reader); write the values out instead of nesting aliases",
                    self.alias_nodes,
                    self.nodes,
                    allowed_alias_ratio(self.nodes) * 100.0
                ));
            }
        }
        Ok(())
    }

    fn push_value(&mut self, node: Node, anchor: usize, size: usize) -> Result<(), SyntaxError> {
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => {
                self.documents.push(node);
                self.document_has_root = true;
            }
            Some(Frame::Seq(seq, _, total)) => {
                *total += size;
                if let NodeValue::Seq(items) = &mut seq.value {
                    items.push(node);
                }
            }
            Some(Frame::Map(frame)) => {
                frame.size += size;
                match frame.pending.take() {
                    None => {
                        let (key, merge) = match &node.value {
                            NodeValue::Scalar { text, plain } => {
                                (text.clone(), *plain && text == "<<")
                            }
                            NodeValue::Null => ("null".to_string(), false),
                            _ => {
                                return Err(SyntaxError {
                                    line: node.line,
                                    col: node.col,
                                    message: format!(
                                        "a {} cannot be a mapping key; keys must be strings",
                                        node.kind_name()
                                    ),
                                    limit: false,
                                })
                            }
                        };
                        if let Some(first) = frame.keys.get(&key) {
                            return Err(SyntaxError {
                                line: node.line,
                                col: node.col,
                                message: format!(
                                    "duplicate key {key:?} (first defined at line {first})"
                                ),
                                limit: false,
                            });
                        }
                        frame.keys.insert(key.clone(), node.line);
                        frame.pending = Some((key, node.line, node.col, merge));
                    }
                    Some((_, _, _, true)) => frame.merges.push(node),
                    Some((key, _, _, false)) => {
                        if let NodeValue::Map(entries) = &mut frame.node.value {
                            entries.push((key, node));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Applies YAML 1.1 merge keys (`<<: *base`, `<<: [*a, *b]`) to a finished mapping, as
/// Kubernetes' reader (go-yaml) does: keys written in the mapping itself win over merged ones,
/// and of a list of merged mappings the earlier one wins. Merged entries are appended after the
/// explicit ones, in the merged mapping's order.
fn merge_keys(
    node: &mut Node,
    mut keys: HashMap<String, usize>,
    merges: Vec<Node>,
) -> Result<(), SyntaxError> {
    keys.remove("<<");
    let mut seen: HashSet<String> = keys.into_keys().collect();
    let NodeValue::Map(entries) = &mut node.value else {
        return Ok(());
    };
    let refuse = |n: &Node| {
        SyntaxError {
        line: n.line,
        col: n.col,
        message: format!(
            "a merge key `<<` takes a mapping or a list of mappings (usually an alias such as *base), found a {}",
            n.kind_name()
        ),
        limit: false,
    }
    };
    for merge in merges {
        let sources = match merge.value {
            NodeValue::Map(_) => vec![merge],
            NodeValue::Seq(items) => items,
            _ => return Err(refuse(&merge)),
        };
        for source in sources {
            let NodeValue::Map(merged) = source.value else {
                return Err(refuse(&source));
            };
            for (k, v) in merged {
                if seen.insert(k.clone()) {
                    entries.push((k, v));
                }
            }
        }
    }
    Ok(())
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
    fn small_aliases_and_many_of_them_still_work() {
        // 300 aliases of one list in a small file: mostly alias-made, within go-yaml's 99%.
        let mut text = String::from("base: &b [x, y]\nuses:\n");
        for _ in 0..300 {
            text.push_str("- *b\n");
        }
        let docs = parse_documents(&text).unwrap();
        match &docs[0].get("uses").unwrap().value {
            NodeValue::Seq(items) => assert_eq!(items.len(), 300),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn alias_ratio_follows_go_yaml() {
        assert_eq!(allowed_alias_ratio(1_000), 0.99);
        assert_eq!(allowed_alias_ratio(400_000), 0.99);
        assert!((allowed_alias_ratio(2_200_000) - 0.545).abs() < 1e-9);
        assert_eq!(allowed_alias_ratio(4_000_000), 0.10);
        assert_eq!(allowed_alias_ratio(40_000_000), 0.10);
    }

    #[test]
    fn too_many_nodes_are_refused_as_a_limit() {
        // The same check as with MAX_NODES, at a size a unit test can build: plain nodes...
        let text = format!("a: [{}]\n", vec!["1"; 100].join(","));
        assert!(parse_with_limit(&text, 200).is_ok());
        let err = parse_with_limit(&text, 50).unwrap_err();
        assert!(err.limit, "{err}");
        assert!(err.message.contains("more than 50 YAML nodes"), "{err}");
        // ...and an alias that would cross it, refused before it is copied.
        let text = format!("a: &a [{}]\nb: *a\n", vec!["1"; 100].join(","));
        let err = parse_with_limit(&text, 150).unwrap_err();
        assert!(err.limit && err.message.contains("this alias"), "{err}");
        assert_eq!(err.line, 2);
    }

    #[test]
    fn depth_is_bounded() {
        let flow = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let mut block = String::new();
        for i in 0..=MAX_DEPTH {
            block.push_str(&format!("{}k:\n", " ".repeat(i)));
        }
        for text in [flow, block] {
            let err = parse_documents(&text).unwrap_err();
            assert!(err.limit && err.message.contains("nesting deeper"), "{err}");
        }
    }

    #[test]
    fn merge_keys_merge_as_in_kubernetes() {
        let text = "\
a: &a {x: 1, y: 1}
b: &b {y: 2, z: 2}
one:
  <<: *a
  x: explicit
seq:
  <<: [*a, *b]
after:
  w: 0
  <<: *b
  z: explicit
";
        let docs = parse_documents(text).unwrap();
        let get = |m: &str, k: &str| {
            docs[0]
                .get(m)
                .unwrap()
                .get(k)
                .and_then(Node::as_str)
                .map(str::to_string)
        };
        assert_eq!(
            get("one", "x").as_deref(),
            Some("explicit"),
            "explicit keys win"
        );
        assert_eq!(get("one", "y").as_deref(), Some("1"));
        assert_eq!(get("one", "<<"), None, "the merge key itself is gone");
        assert_eq!(
            get("seq", "y").as_deref(),
            Some("1"),
            "the first mapping of a list wins"
        );
        assert_eq!(get("seq", "z").as_deref(), Some("2"));
        assert_eq!(
            get("after", "z").as_deref(),
            Some("explicit"),
            "wins wherever it is written"
        );
        assert_eq!(get("after", "y").as_deref(), Some("2"));
        let err = parse_documents("a:\n  <<: 3\n").unwrap_err();
        assert!(err.message.contains("merge key"), "{err}");
        assert_eq!(err.line, 2);
        // A quoted "<<" is an ordinary key.
        let docs = parse_documents("a:\n  \"<<\": 3\n").unwrap();
        assert_eq!(
            docs[0].get("a").unwrap().get("<<").and_then(Node::as_str),
            Some("3")
        );
    }

    #[test]
    fn wide_mappings_check_duplicates_in_linear_time() {
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("k{i}: v\n"));
        }
        text.push_str("k7: again\n");
        let err = parse_documents(&text).unwrap_err();
        assert!(
            err.message
                .contains("duplicate key \"k7\" (first defined at line 8)"),
            "{err}"
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
