//! `hearth-server`: the fleet's config server and rollout controller.
//!
//! - [`store`]: the store trait (get, list, atomic commit with compare-and-swap, watch) and its
//!   embedded implementation on a `redb` database file.
//! - [`etcd`]: the store on etcd v3 (`--etcd-endpoints`) and the server's lock on its prefix;
//!   [`backend`]: either store behind one type.
//! - [`records`], [`fleet`]: the stored documents, and the fleet decoded in memory (reads never
//!   touch the store); [`event_log`]: its events, kept by class.
//! - [`controller`], [`rollout`]: rendering with `hearth-config`, pool targets, desired configs
//!   under `maxUnavailable`, garbage collection of rendered configs. Pure.
//! - [`app`]: the operations (apply, delete, label, pause, enroll, report, reboot slots), each
//!   one atomic commit.
//! - [`http`], [`api`], [`views`], [`firstboot`] ([`firstboot_cache`]), [`error`]: the HTTPS
//!   API.
//! - [`pki`]: the CA, the serving certificate and the tokens in the state directory.
//! - [`serve`]: start it all; [`cli`]: the binary's flags and start-up (`main.rs` is thin).
//!
//! See `docs/server.md` and `docs/api.md`.
pub mod api;
pub mod app;
pub mod backend;
pub mod bounds;
pub mod cli;
pub mod controller;
pub mod error;
pub mod etcd;
pub mod event_log;
pub mod firstboot;
pub mod firstboot_cache;
pub mod fleet;
pub mod http;
pub mod kubernetes;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod ostree_repo;
pub mod pace;
pub mod pki;
pub mod records;
pub mod registry;
pub mod render_memo;
pub mod report;
pub mod rollout;
pub mod serve;
pub mod served_agent;
pub mod store;
pub mod time;
pub mod views;
pub mod window;

#[cfg(test)]
mod test_util;
