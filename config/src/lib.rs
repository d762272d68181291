//! config
pub mod dataurl;
pub mod de;
pub mod diag;
pub mod disruption;
pub mod ignition;
pub mod kargs;
pub mod manifest;
pub mod mco;
pub mod model;
pub mod node;
pub mod plan;
pub mod render;
pub mod time;
pub mod validate;
pub mod window;
