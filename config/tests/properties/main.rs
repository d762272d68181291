//! Property tests of the config crate: rendering is deterministic, order-independent and
//! content-addressed; a rendered config reads back as the agent reads it; Ignition 2.x <-> 3.x
//! translation keeps content; a MachineConfig survives `to_manifest` -> `read_str`; and
//! `read_str` never panics, whatever the text.
//!
//! Bugs found here are kept as regression tests named after the bug (`rendered_*_is_refused`).
//!
//! Case counts are kept modest (64-256) so the suite runs in seconds; raise them locally with
//! `PROPTEST_CASES=10000 cargo test -p hearth-config --test properties`.
//!
//! One module per property family, generators shared in `generators`:
//! - `render`: rendering is deterministic, order-independent and content-addressed.
//! - `reads_back`: a rendered config reads back as the agent reads it; regressions it found.
//! - `ignition_round_trip`: Ignition 2.x <-> 3.x translation keeps content.
//! - `manifest_round_trip`: a MachineConfig survives `to_manifest` -> `read_str`.
//! - `never_panics`: `read_str` never panics, whatever the text.

mod generators;
mod ignition_round_trip;
mod manifest_round_trip;
mod never_panics;
mod reads_back;
mod render;
