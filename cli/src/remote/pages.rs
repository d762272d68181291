//! Lists that come in pages: `GET /api/v1/nodes?limit=…&continue=…`, followed to the end, so
//! that neither the server nor this CLI holds every node's whole report at once for a large
//! fleet (docs/api.md, "Lists in pages"). A server that answers without pages (an older one)
//! answers everything in the first.
//!
//! Tables, names and `rollout status` ask for the summary view (`view=summary`): each node
//! without its history, drift lines and action runs, which the server answers from memory
//! without reading a report back from its store. An older server, which answers whole, has
//! those removed here ([`light`]).

use super::conn::{enc, Client};
use serde_json::Value;

/// Nodes asked for per page.
pub(super) const NODE_PAGE: usize = 500;

/// How much of each node to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    /// Whole: `-o json`, `-o yaml`.
    Full,
    /// Without history, drift lines and action runs: tables, names, `rollout status`.
    Summary,
}

/// Every node (of `pool`, when given), by name, one page at a time: `each` gets every page's
/// items in turn; in the summary view, each of them [`light`].
pub(super) fn nodes(
    c: &Client,
    pool: Option<&str>,
    view: View,
    mut each: impl FnMut(Vec<Value>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut from: Option<String> = None;
    loop {
        let mut query = format!("limit={NODE_PAGE}");
        if view == View::Summary {
            query.push_str("&view=summary");
        }
        if let Some(p) = pool {
            query.push_str(&format!("&pool={}", enc(p)));
        }
        if let Some(f) = &from {
            query.push_str(&format!("&continue={}", enc(f)));
        }
        let mut answer = c.get(&format!("/api/v1/nodes?{query}"))?;
        let next = answer["metadata"]["continue"].as_str().map(String::from);
        let mut items = match answer["items"].take() {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        if view == View::Summary {
            items.iter_mut().for_each(light);
        }
        each(items)?;
        match next {
            // Pages go by name: a position that does not move on would never end.
            Some(n) if from.as_deref().is_some_and(|f| n.as_str() <= f) => {
                anyhow::bail!(
                    "the server's pages of nodes do not move on (continue {:?} after {:?}); try `hearth get nodes` again",
                    crate::term::escape(&n),
                    crate::term::escape(from.as_deref().unwrap_or(""))
                )
            }
            Some(n) => from = Some(n),
            None => return Ok(()),
        }
    }
}

/// A node's document as the summary view has it, from a server that answered whole (an older
/// one, which knows no `view`): without history, drift lines and action runs, which tables and
/// `rollout status` do not show and which would be kept for every node of a list at once.
fn light(node: &mut Value) {
    if let Some(st) = node["status"].as_object_mut() {
        for key in ["history", "drift", "actions"] {
            st.remove(key);
        }
    }
}
