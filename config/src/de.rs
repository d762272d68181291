//! Decoding [`Node`] trees into typed structures with serde, with errors that carry the field
//! path (`spec.config.storage.files[2].contents.source`) and the line of the value.
//!
//! Scalars are interpreted per target type, with Kubernetes' YAML 1.1 rules: an integer field
//! reads a plain `0644` as octal 420, a string field reads any scalar as its text, a boolean
//! field accepts `true`/`false` (and the YAML 1.1 forms `yes`/`no`/`on`/`off`). Unknown keys do
//! not fail decoding (Ignition and the MCO ignore them too) but are collected as warnings with
//! their path so that `hearth validate` can point at typos.

use crate::node::{parse_yaml11_bool, parse_yaml11_int, Node, NodeValue};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::fmt;

/// A decoding error at one place of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Field path from the document root (`spec.config.storage.files[0].path`); empty for the root.
    pub path: String,
    /// 1-based line of the value (or of its parent for a missing field), when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    missing_field: Option<&'static str>,
    located: bool,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError {
            path: String::new(),
            line: None,
            message: msg.to_string(),
            missing_field: None,
            located: false,
        }
    }

    fn missing_field(field: &'static str) -> Self {
        let mut e = Self::custom(format!("required field `{field}` is missing"));
        e.missing_field = Some(field);
        e
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::custom(format!(
            "expected {exp}, found {}",
            describe_unexpected(&unexp)
        ))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::custom(format!(
            "unknown value {variant:?}; expected one of: {}",
            expected.join(", ")
        ))
    }
}

fn describe_unexpected(u: &de::Unexpected<'_>) -> String {
    match u {
        de::Unexpected::Str(s) => format!("the string {s:?}"),
        de::Unexpected::Unit => "null".to_string(),
        de::Unexpected::Map => "a mapping".to_string(),
        de::Unexpected::Seq => "a list".to_string(),
        other => other.to_string(),
    }
}

/// A warning found while decoding: an unknown field, ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeWarning {
    /// Field path of the unknown key.
    pub path: String,
    /// Line of the unknown key's value.
    pub line: usize,
    /// What was noticed.
    pub message: String,
    /// The structure's field the key is closest to, when one is close (a typo).
    pub did_you_mean: Option<&'static str>,
}

/// How many unknown fields of one decoded part (a document's metadata, spec, or config) get a
/// "did you mean".
const MAX_SUGGESTIONS: usize = 20;
/// A key longer than this misspells no field (the longest is some 40 characters).
const MAX_SUGGESTED_KEY: usize = 64;

/// The field of `known` that `key` most likely misspells: equal but for case, `-`/`_`, or a
/// plural's `s`; or within an edit distance of a third of its length (at least 1, at most 3).
pub fn closest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
    if key.is_empty() || key.len() > MAX_SUGGESTED_KEY {
        return None;
    }
    let k = norm(key);
    if let Some(f) = known.iter().find(|f| {
        let f = norm(f);
        f == k || f == format!("{k}s") || format!("{f}s") == k
    }) {
        return Some(f);
    }
    let len = k.chars().count();
    let limit = (len / 3).clamp(1, 3);
    known
        .iter()
        .map(|f| (norm(f), *f))
        // A field whose length differs by more than the limit is farther than it: not compared.
        .filter(|(n, _)| n.chars().count().abs_diff(len) <= limit)
        .map(|(n, f)| (strsim::osa_distance(&k, &n), f))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, f)| f)
}

/// Decodes `node` into `T`. `base` is the path prefix of `node` (empty for a document root).
/// Unknown fields are appended to `warnings`.
pub fn decode<'de, T: de::Deserialize<'de>>(
    node: &'de Node,
    base: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> Result<T, DecodeError> {
    decode_all(node, base, warnings).map_err(|mut errors| errors.swap_remove(0))
}

/// [`decode`], reporting every error instead of the first: a value of the wrong type is noted
/// and decoding goes on with a placeholder, so that one mistake does not hide the next. Errors
/// that follow from a placeholder (a required field "missing" in a mapping that was a string)
/// are left out. The error list is never empty.
pub fn decode_all<'de, T: de::Deserialize<'de>>(
    node: &'de Node,
    base: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> Result<T, Vec<DecodeError>> {
    match decode_partial(node, base, warnings) {
        (Some(value), errors) if errors.is_empty() => Ok(value),
        (_, errors) => Err(errors),
    }
}

/// [`decode_all`], also returning the value decoded with placeholders when decoding could go
/// on to the end (`None` when it could not): for validating the parts that were right. With
/// errors, the value must not be used for anything else.
pub fn decode_partial<'de, T: de::Deserialize<'de>>(
    node: &'de Node,
    base: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> (Option<T>, Vec<DecodeError>) {
    let ctx = Ctx::default();
    let result = T::deserialize(NodeDeserializer {
        node,
        path: Path::Root(base),
        ctx: &ctx,
        siblings: None,
    });
    warnings.extend(ctx.warnings.into_inner());
    let mut errors = ctx.errors.into_inner();
    match result {
        Ok(value) => (Some(value), errors),
        Err(e) => {
            if !errors.iter().any(|soft| is_within(&e.path, &soft.path)) {
                errors.push(e);
            }
            (None, errors)
        }
    }
}

/// True when field path `path` is `outer` or inside it (`a.b[2]` is within `a.b` and `a`).
pub fn is_within(path: &str, outer: &str) -> bool {
    path == outer
        || path
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with(['.', '[']))
        || outer.is_empty()
}

/// What decoding collects besides the value.
#[derive(Default)]
struct Ctx {
    warnings: RefCell<Vec<DecodeWarning>>,
    /// Type errors decoding went on after.
    errors: RefCell<Vec<DecodeError>>,
}

#[derive(Clone, Copy)]
enum Path<'a> {
    Root(&'a str),
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        match self {
            Path::Root(base) => base.to_string(),
            Path::Field(parent, name) => {
                let p = parent.render();
                if p.is_empty() {
                    name.to_string()
                } else {
                    format!("{p}.{name}")
                }
            }
            Path::Index(parent, i) => format!("{}[{i}]", parent.render()),
        }
    }
}

struct NodeDeserializer<'de, 'p> {
    node: &'de Node,
    path: Path<'p>,
    ctx: &'p Ctx,
    /// The fields of the structure this value is a field of (for "did you mean" when its key is
    /// unknown).
    siblings: Option<&'static [&'static str]>,
}

impl<'de> NodeDeserializer<'de, '_> {
    /// A mapping (a structure's, with its `fields`, or a map's).
    fn mapping<V: Visitor<'de>>(
        self,
        fields: Option<&'static [&'static str]>,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let entries: &'de [(String, Node)] = match &self.node.value {
            NodeValue::Map(entries) => entries,
            _ => {
                self.soft(self.type_error("a mapping"));
                &[]
            }
        };
        let access = MapDe {
            entries,
            index: 0,
            path: &self.path,
            ctx: self.ctx,
            fields,
        };
        visitor.visit_map(access).map_err(|e| self.locate(e))
    }

    fn locate(&self, mut e: DecodeError) -> DecodeError {
        if e.located {
            return e;
        }
        e.located = true;
        let here = self.path.render();
        match e.missing_field.take() {
            Some(field) => {
                e.path = if here.is_empty() {
                    field.to_string()
                } else {
                    format!("{here}.{field}")
                };
            }
            None => e.path = here,
        }
        e.line = Some(self.node.line);
        e
    }

    fn type_error(&self, expected: &str) -> DecodeError {
        let found = match &self.node.value {
            NodeValue::Scalar { text, .. } => {
                let shown: String = text.chars().take(60).collect();
                let ellipsis = if text.chars().count() > 60 { "…" } else { "" };
                format!("{} {shown:?}{ellipsis}", self.node.kind_name())
            }
            _ => self.node.kind_name().to_string(),
        };
        self.locate(de::Error::custom(format!(
            "expected {expected}, found {found}"
        )))
    }

    /// Notes `e` and lets decoding go on (the caller gives the visitor a placeholder).
    fn soft(&self, e: DecodeError) {
        self.ctx.errors.borrow_mut().push(e);
    }

    fn int(&self) -> Result<i64, DecodeError> {
        match &self.node.value {
            NodeValue::Scalar { text, plain: true } => {
                parse_yaml11_int(text).ok_or_else(|| self.type_error("an integer"))
            }
            NodeValue::Scalar { .. } => Err(self.type_error("an integer (remove the quotes)")),
            _ => Err(self.type_error("an integer")),
        }
    }
}

macro_rules! deserialize_int {
    ($($method:ident => $visit:ident: $ty:ty),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            let converted = match self.int() {
                Ok(value) => match <$ty>::try_from(value) {
                    Ok(v) => v,
                    Err(_) => {
                        self.soft(self.locate(de::Error::custom(format!(
                            "integer {value} is out of range for this field"
                        ))));
                        0
                    }
                },
                Err(e) => {
                    self.soft(e);
                    0
                }
            };
            visitor.$visit(converted).map_err(|e| self.locate(e))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDeserializer<'de, '_> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let r = match &self.node.value {
            NodeValue::Null => visitor.visit_unit(),
            NodeValue::Scalar { text, plain } => {
                if *plain {
                    if let Some(i) = parse_yaml11_int(text) {
                        visitor.visit_i64(i)
                    } else if let Some(b) = parse_yaml11_bool(text) {
                        visitor.visit_bool(b)
                    } else if let Some(f) = text.parse::<f64>().ok().filter(|f| f.is_finite()) {
                        visitor.visit_f64(f)
                    } else {
                        visitor.visit_str(text)
                    }
                } else {
                    visitor.visit_str(text)
                }
            }
            NodeValue::Seq(_) => return self.deserialize_seq(visitor),
            NodeValue::Map(_) => return self.deserialize_map(visitor),
        };
        r.map_err(|e| self.locate(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let value = match &self.node.value {
            NodeValue::Scalar { text, plain: true } => match parse_yaml11_bool(text) {
                Some(b) => Ok(b),
                None => Err(self.type_error("a boolean (true or false)")),
            },
            NodeValue::Scalar { .. } => {
                Err(self.type_error("a boolean (true or false, without quotes)"))
            }
            _ => Err(self.type_error("a boolean (true or false)")),
        };
        let b = value.unwrap_or_else(|e| {
            self.soft(e);
            false
        });
        visitor.visit_bool(b).map_err(|e| self.locate(e))
    }

    deserialize_int! {
        deserialize_i8 => visit_i8: i8,
        deserialize_i16 => visit_i16: i16,
        deserialize_i32 => visit_i32: i32,
        deserialize_i64 => visit_i64: i64,
        deserialize_u8 => visit_u8: u8,
        deserialize_u16 => visit_u16: u16,
        deserialize_u32 => visit_u32: u32,
        deserialize_u64 => visit_u64: u64,
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let f = match &self.node.value {
            NodeValue::Scalar { text, plain: true } => text.parse::<f64>().ok(),
            _ => None,
        };
        let f = f.unwrap_or_else(|| {
            self.soft(self.type_error("a number"));
            0.0
        });
        visitor.visit_f64(f).map_err(|e| self.locate(e))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            NodeValue::Scalar { text, .. } => visitor.visit_str(text).map_err(|e| self.locate(e)),
            _ => {
                self.soft(self.type_error("a string"));
                visitor.visit_str("").map_err(|e| self.locate(e))
            }
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.node.is_null() {
            visitor.visit_none().map_err(|e| self.locate(e))
        } else {
            let path = self.path;
            let located = NodeDeserializer {
                node: self.node,
                path,
                ctx: self.ctx,
                siblings: self.siblings,
            };
            visitor.visit_some(located).map_err(|e| self.locate(e))
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.node.is_null() {
            visitor.visit_unit().map_err(|e| self.locate(e))
        } else {
            Err(self.type_error("null"))
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let path = self.path;
        let inner = NodeDeserializer {
            node: self.node,
            path,
            ctx: self.ctx,
            siblings: self.siblings,
        };
        visitor
            .visit_newtype_struct(inner)
            .map_err(|e| self.locate(e))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            NodeValue::Seq(items) => {
                let access = SeqDe {
                    items,
                    index: 0,
                    path: &self.path,
                    ctx: self.ctx,
                };
                visitor.visit_seq(access).map_err(|e| self.locate(e))
            }
            _ => {
                self.soft(self.type_error("a list"));
                let access = SeqDe {
                    items: &[],
                    index: 0,
                    path: &self.path,
                    ctx: self.ctx,
                };
                visitor.visit_seq(access).map_err(|e| self.locate(e))
            }
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.mapping(None, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.mapping(Some(fields), visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match &self.node.value {
            NodeValue::Scalar { text, .. } => visitor
                .visit_enum(text.as_str().into_deserializer())
                .map_err(|e: DecodeError| self.locate(e)),
            _ => Err(self.type_error("a string")),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let key = match self.path {
            Path::Field(_, key) => key,
            _ => "",
        };
        let mut warnings = self.ctx.warnings.borrow_mut();
        // Suggestions for the first ones only: each compares the key with every field.
        let did_you_mean = match self.siblings {
            Some(known) if warnings.len() < MAX_SUGGESTIONS => closest(key, known),
            _ => None,
        };
        warnings.push(DecodeWarning {
            path: self.path.render(),
            line: self.node.line,
            message: "unknown field, ignored".to_string(),
            did_you_mean,
        });
        drop(warnings);
        visitor.visit_unit()
    }
}

struct SeqDe<'de, 'p> {
    items: &'de [Node],
    index: usize,
    path: &'p Path<'p>,
    ctx: &'p Ctx,
}

impl<'de> SeqAccess<'de> for SeqDe<'de, '_> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        let Some(node) = self.items.get(self.index) else {
            return Ok(None);
        };
        let path = Path::Index(self.path, self.index);
        self.index += 1;
        let de = NodeDeserializer {
            node,
            path,
            ctx: self.ctx,
            siblings: None,
        };
        seed.deserialize(de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len() - self.index)
    }
}

struct MapDe<'de, 'p> {
    entries: &'de [(String, Node)],
    index: usize,
    path: &'p Path<'p>,
    ctx: &'p Ctx,
    /// The structure's fields, when the mapping is one.
    fields: Option<&'static [&'static str]>,
}

impl<'de> MapAccess<'de> for MapDe<'de, '_> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, _)) = self.entries.get(self.index) else {
            return Ok(None);
        };
        let de: de::value::StrDeserializer<'_, DecodeError> = key.as_str().into_deserializer();
        seed.deserialize(de).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let (key, node) = &self.entries[self.index];
        self.index += 1;
        let path = Path::Field(self.path, key);
        let de = NodeDeserializer {
            node,
            path,
            ctx: self.ctx,
            siblings: self.fields,
        };
        seed.deserialize(de)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_documents;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct File {
        path: String,
        mode: Option<u32>,
        #[serde(default)]
        overwrite: Option<bool>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Doc {
        files: Vec<File>,
    }

    fn dec(text: &str) -> (Result<Doc, DecodeError>, Vec<DecodeWarning>) {
        let docs = parse_documents(text).unwrap();
        let mut w = Vec::new();
        let doc = docs[0].clone();
        let r = decode::<Doc>(&doc, "spec", &mut w);
        (r, w)
    }

    #[test]
    fn octal_mode_and_string_path() {
        let (r, w) = dec("files:\n- path: 0644\n  mode: 0644\n- path: /x\n  mode: 420\n");
        let doc = r.unwrap();
        assert_eq!(doc.files[0].path, "0644");
        assert_eq!(doc.files[0].mode, Some(420));
        assert_eq!(doc.files[1].mode, Some(420));
        assert!(w.is_empty());
    }

    #[test]
    fn null_required_field_names_path_and_line() {
        let (r, _) = dec("files:\n- path: /a\n- path: null\n  mode: 420\n");
        let e = r.unwrap_err();
        assert_eq!(e.path, "spec.files[1].path");
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("expected a string, found null"), "{e}");
    }

    #[test]
    fn missing_field_names_the_field() {
        let (r, _) = dec("files:\n- mode: 420\n");
        let e = r.unwrap_err();
        assert_eq!(e.path, "spec.files[0].path");
        assert_eq!(e.line, Some(2));
        assert!(
            e.message.contains("required field `path` is missing"),
            "{e}"
        );
    }

    #[test]
    fn quoted_integer_is_refused() {
        let (r, _) = dec("files:\n- path: /a\n  mode: \"0644\"\n");
        let e = r.unwrap_err();
        assert_eq!(e.path, "spec.files[0].mode");
        assert!(e.message.contains("remove the quotes"), "{e}");
    }

    #[test]
    fn bad_boolean_shows_value() {
        let (r, _) = dec("files:\n- path: /a\n  overwrite: ${{X}}\n");
        let e = r.unwrap_err();
        assert_eq!(e.path, "spec.files[0].overwrite");
        assert!(e.message.contains("${{X}}"), "{e}");
    }

    #[test]
    fn a_misspelled_field_names_the_one_it_misspells() {
        let known = &["maxUnavailable", "paused", "files", "machineConfigSelector"];
        assert_eq!(closest("maxUnavailble", known), Some("maxUnavailable"));
        assert_eq!(closest("file", known), Some("files"));
        assert_eq!(closest("Paused", known), Some("paused"));
        assert_eq!(
            closest("machine_config_selector", known),
            Some("machineConfigSelector")
        );
        assert_eq!(closest("color", known), None);
        assert_eq!(closest(&"x".repeat(10_000), known), None);
        let (_, warnings) = dec("files:\n  - path: /a\n    mdoe: 420\n");
        assert_eq!(warnings[0].did_you_mean, Some("mode"), "{warnings:?}");
    }

    #[test]
    fn unknown_fields_warn_with_path() {
        let (r, w) = dec("files:\n- path: /a\n  mdoe: 420\n");
        assert!(r.is_ok());
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].path, "spec.files[0].mdoe");
        assert_eq!(w[0].line, 3);
    }

    #[test]
    fn out_of_range_integers_are_errors() {
        let (r, _) = dec("files:\n- path: /a\n  mode: -1\n");
        assert!(r.unwrap_err().message.contains("out of range"));
    }
}
