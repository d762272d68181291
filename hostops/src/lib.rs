//! `hearth-hostops`: the one handle hearth has on a host.
pub mod fs;
