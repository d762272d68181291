//! Field paths as diagnostics write them (`spec.config.storage.files[2].path`): joining them,
//! and finding the node (and so the line) one names.

use crate::node::{Node, NodeValue};

/// Finds the node at a field path like `spec.config.storage.files[2].path` (for line numbers).
pub fn node_at<'n>(root: &'n Node, path: &str) -> Option<&'n Node> {
    let mut node = root;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indexes) = match part.find('[') {
            Some(pos) => (&part[..pos], &part[pos..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            node = node.get(name)?;
        }
        for idx in indexes.split('[').filter(|s| !s.is_empty()) {
            let i: usize = idx.trim_end_matches(']').parse().ok()?;
            match &node.value {
                NodeValue::Seq(items) => node = items.get(i)?,
                _ => return None,
            }
        }
    }
    Some(node)
}

/// The line of the deepest existing node on `path`.
pub(super) fn line_of(root: &Node, path: &str) -> usize {
    let mut p = path.to_string();
    loop {
        if let Some(n) = node_at(root, &p) {
            return n.line;
        }
        match p.rfind(['.', '[']) {
            Some(pos) => p.truncate(pos),
            None => return root.line,
        }
    }
}

pub(super) fn join(base: &str, field: &str) -> String {
    if base.is_empty() {
        field.to_string()
    } else {
        format!("{base}.{field}")
    }
}
