//! Text from the server (and through it from nodes) made safe for the admin's terminal: the
//! escaping lives in `hearth_api::text`, shared with the server (its journal entries of what
//! nodes said) so that both escape the same characters.

pub use hearth_api::text::{escape, escape_keep_newlines, is_unsafe, json_safe};
