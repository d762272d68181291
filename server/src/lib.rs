//! `hearth-server`: the fleet's config server and rollout controller.
//!
//! In floors, each using only those before it (`docs/architecture.md`, "Rules of the house"):
//!
//! - Leaves: [`api`], [`time`], [`text`] (free text cut to a bound), [`pki`] (the CA, the
//!   serving certificate and the tokens in the state directory), [`error`] (the operations'
//!   refusals, no transport), [`bounds`] (what a node says, bounded).
//! - [`store`]: the store trait (get, list, atomic commit with compare-and-swap, watch), its
//!   embedded implementation on a `redb` database file, the store on etcd v3
//!   (`--etcd-endpoints`), either behind one type, and the documents stored.
//! - [`fleet`]: the fleet decoded in memory (reads never touch the store) and its events, kept by
//!   class.
//! - [`controller`]: rendering with `hearth-config`, pool targets, desired configs under
//!   `maxUnavailable` and maintenance windows, garbage collection of rendered configs. Pure.
//! - [`telemetry`]: metrics and the log; [`pace`]: turns for desired-config answers.
//! - [`registry`], [`served_agent`], [`firstboot`] ([`firstboot_cache`]), [`ostree_repo`]: tagged
//!   images resolved, the agent served at first boot, first-boot configs, the served ostree
//!   repository.
//! - [`app`]: the operations (apply, delete, label, pause, enroll, report, reboot slots), each
//!   one atomic commit; [`views`]: what the admin API shows of them.
//! - [`http`], [`kubernetes`]: the two front doors, the HTTPS API and a Kubernetes API server.
//! - [`serve`]: start it all; [`cli`]: the binary's flags and start-up (`main.rs` is thin).
//!
//! See `docs/server.md` and `docs/api.md`.
pub mod api;
pub mod app;
pub mod bounds;
pub mod cli;
pub mod controller;
pub mod error;
pub mod firstboot;
pub mod firstboot_cache;
pub mod fleet;
pub mod http;
pub mod kubernetes;
pub mod ostree_repo;
pub mod pace;
pub mod pki;
pub mod registry;
pub mod serve;
pub mod served_agent;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod time;
pub mod views;

#[cfg(test)]
mod test_util;
